/**
 * Five-field cron in UTC (minute hour day-of-month month day-of-week) with the `@daily`-style
 * names; `@reboot` is refused because a schedule has no boot to run at. Parse once, then ask `next`.
 */

export interface Cron {
  readonly source: string;
  readonly minutes: ReadonlySet<number>;
  readonly hours: ReadonlySet<number>;
  readonly days: ReadonlySet<number>;
  readonly months: ReadonlySet<number>;
  /** 0 = Sunday; a 7 in the expression is folded into 0. */
  readonly weekdays: ReadonlySet<number>;
  /** Whether the day-of-month / day-of-week field was `*` (cron ORs the two only when both are restricted). */
  readonly anyDay: boolean;
  readonly anyWeekday: boolean;
}

export type CronResult = { ok: true; value: Cron } | { ok: false; error: string };

const NICKNAMES: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const MONTH_NAMES = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY_NAMES = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

interface FieldSpec {
  readonly label: string;
  readonly min: number;
  readonly max: number;
  /** Names mapped to `min + index`. */
  readonly names?: readonly string[];
}

const FIELDS: readonly FieldSpec[] = [
  { label: 'minute', min: 0, max: 59 },
  { label: 'hour', min: 0, max: 23 },
  { label: 'day of month', min: 1, max: 31 },
  { label: 'month', min: 1, max: 12, names: MONTH_NAMES },
  { label: 'day of week', min: 0, max: 7, names: DAY_NAMES },
];

function value(raw: string, f: FieldSpec): number | null {
  const lower = raw.toLowerCase();
  const named = f.names?.indexOf(lower) ?? -1;
  if (named >= 0) return f.min + named;
  if (!/^\d{1,2}$/.test(raw)) return null;
  const n = Number(raw);
  return n >= f.min && n <= f.max ? n : null;
}

function parseField(text: string, f: FieldSpec): { ok: true; value: Set<number> } | { ok: false; error: string } {
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const bad = { ok: false as const, error: `${f.label}: ${JSON.stringify(part)} is not valid (${f.min}-${f.max}${f.names ? ' or a name' : ''})` };
    const [range, stepText, extra] = part.split('/');
    if (range === undefined || range === '' || extra !== undefined) return bad;
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d{1,2}$/.test(stepText) || Number(stepText) === 0) return bad;
      step = Number(stepText);
    }
    let lo: number;
    let hi: number;
    if (range === '*') {
      lo = f.min;
      hi = f.max;
    } else {
      const [a, b, more] = range.split('-');
      if (a === undefined || more !== undefined) return bad;
      const av = value(a, f);
      if (av === null) return bad;
      lo = av;
      if (b !== undefined) {
        const bv = value(b, f);
        if (bv === null || bv < av) return bad;
        hi = bv;
      } else {
        // `a/n` means from a to the end of the range, as in Vixie cron.
        hi = stepText !== undefined ? f.max : av;
      }
    }
    for (let v = lo; v <= hi; v += step) out.add(v);
  }
  return { ok: true, value: out };
}

export function parseCron(expression: string): CronResult {
  const source = expression.trim().replace(/\s+/g, ' ');
  if (source === '') return { ok: false, error: 'cron must not be empty' };
  if (source.startsWith('@')) {
    const lower = source.toLowerCase();
    if (lower === '@reboot') return { ok: false, error: '@reboot is not supported: schedules run on a clock, not at boot' };
    const expanded = NICKNAMES[lower];
    if (!expanded) return { ok: false, error: `unknown cron name ${source}; use one of ${Object.keys(NICKNAMES).join(', ')}` };
    const r = parseCron(expanded);
    return r.ok ? { ok: true, value: { ...r.value, source: lower } } : r;
  }
  const parts = source.split(' ');
  if (parts.length !== 5) return { ok: false, error: `cron needs 5 fields (minute hour day-of-month month day-of-week), got ${parts.length}` };
  const sets: Set<number>[] = [];
  for (let i = 0; i < 5; i++) {
    const r = parseField(parts[i]!, FIELDS[i]!);
    if (!r.ok) return r;
    sets.push(r.value);
  }
  const weekdays = sets[4]!;
  if (weekdays.delete(7)) weekdays.add(0);
  const cron: Cron = {
    source,
    minutes: sets[0]!,
    hours: sets[1]!,
    days: sets[2]!,
    months: sets[3]!,
    weekdays,
    // As in Vixie cron: a field starting with `*` (also `*/n`) does not take part in the OR.
    anyDay: parts[2]!.startsWith('*'),
    anyWeekday: parts[4]!.startsWith('*'),
  };
  if (next(cron, new Date(Date.UTC(2000, 0, 1))) === null) return { ok: false, error: `cron ${source} never fires` };
  return { ok: true, value: cron };
}

function dayMatches(c: Cron, d: Date): boolean {
  const dom = c.days.has(d.getUTCDate());
  const dow = c.weekdays.has(d.getUTCDay());
  if (c.anyDay && c.anyWeekday) return true;
  if (c.anyDay) return dow;
  if (c.anyWeekday) return dom;
  return dom || dow;
}

/** Searching further than this means the expression never matches (e.g. 30 February). */
const HORIZON_YEARS = 9;

/** The first matching minute strictly after `after` (UTC), or null when there is none. */
export function next(c: Cron, after: Date): Date | null {
  const t = new Date(after.getTime());
  t.setUTCSeconds(0, 0);
  t.setUTCMinutes(t.getUTCMinutes() + 1);
  const limit = after.getUTCFullYear() + HORIZON_YEARS;
  // Jump by the coarsest field that does not match, so each step moves at least a minute forward.
  while (t.getUTCFullYear() <= limit) {
    if (!c.months.has(t.getUTCMonth() + 1)) {
      t.setUTCMonth(t.getUTCMonth() + 1, 1);
      t.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!dayMatches(c, t)) {
      t.setUTCDate(t.getUTCDate() + 1);
      t.setUTCHours(0, 0, 0, 0);
      continue;
    }
    if (!c.hours.has(t.getUTCHours())) {
      t.setUTCHours(t.getUTCHours() + 1, 0, 0, 0);
      continue;
    }
    if (!c.minutes.has(t.getUTCMinutes())) {
      t.setUTCMinutes(t.getUTCMinutes() + 1, 0, 0);
      continue;
    }
    return t;
  }
  return null;
}
