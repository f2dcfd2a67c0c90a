/**
 * Five-field cron in UTC (minute hour day-of-month month day-of-week) with the `@daily`-style
 * names, parsed and stepped by croner; `@reboot` is refused because a schedule has no boot to run at.
 */
import { Cron as Croner, type CronOptions } from 'croner';

export interface Cron {
  readonly source: string;
  readonly pattern: Croner;
}

export type CronResult = { ok: true; value: Cron } | { ok: false; error: string };

const FIELD_LABELS = ['minute', 'hour', 'day of month', 'month', 'day of week'] as const;

// Day-of-month and day-of-week are ORed when neither is a bare `*` (so `*/10` counts as restricted,
// unlike Vixie cron), and `10/20` means 10 to the end of the range in steps of 20, as in Vixie cron.
const OPTIONS: CronOptions = { timezone: 'UTC', mode: '5-part', domAndDow: false, sloppyRanges: true, paused: true };

function compile(pattern: string): { ok: true; value: Croner } | { ok: false; error: string } {
  try {
    return { ok: true, value: new Croner(pattern, OPTIONS) };
  } catch (e) {
    return { ok: false, error: (e instanceof Error ? e.message : String(e)).replace(/^CronPattern:\s*/, '') };
  }
}

/** croner's message does not always name the field, so find the first field that fails on its own. */
function fieldError(parts: readonly string[], whole: string): string {
  for (let i = 0; i < parts.length; i++) {
    const alone = parts.map((p, j) => (j === i ? p : '*')).join(' ');
    const r = compile(alone);
    if (!r.ok) return `${FIELD_LABELS[i]}: ${JSON.stringify(parts[i])} is not valid (${r.error})`;
  }
  return whole;
}

export function parseCron(expression: string): CronResult {
  const source = expression.trim().replace(/\s+/g, ' ');
  if (source === '') return { ok: false, error: 'cron must not be empty' };
  if (source.toLowerCase() === '@reboot')
    return { ok: false, error: '@reboot is not supported: schedules run on a clock, not at boot' };
  const nickname = source.startsWith('@');
  if (!nickname) {
    const count = source.split(' ').length;
    if (count !== 5)
      return { ok: false, error: `cron needs 5 fields (minute hour day-of-month month day-of-week), got ${count}` };
  }
  const compiled = compile(nickname ? source.toLowerCase() : source);
  if (!compiled.ok) {
    if (nickname)
      return {
        ok: false,
        error: `unknown cron name ${source}; use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly`,
      };
    return { ok: false, error: fieldError(source.split(' '), compiled.error) };
  }
  const cron: Cron = { source: nickname ? source.toLowerCase() : source, pattern: compiled.value };
  if (next(cron, new Date(Date.UTC(2000, 0, 1))) === null) return { ok: false, error: `cron ${source} never fires` };
  return { ok: true, value: cron };
}

/** The first matching minute strictly after `after` (UTC), or null when there is none. */
export function next(c: Cron, after: Date): Date | null {
  return c.pattern.nextRun(after) ?? null;
}
