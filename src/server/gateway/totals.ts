/**
 * What budgets are judged against, kept as running totals: one row per conversation, agent-day,
 * agent-month, account-day and account-month, added to in the transaction that writes each call's usage.
 * Admission reads five rows by key (and the few calls in flight) instead of summing the month's calls.
 */
import { sql } from 'drizzle-orm';
import { bigint, date, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { rowsOf, type EngineDb } from '../store/engine-db.ts';
import { modelCalls, type CallerContext, type NewModelCall } from './store.ts';

export const modelUsageTotals = pgTable(
  'model_usage_totals',
  {
    accountId: uuid('account_id').notNull(),
    /** conversation, agent_day, agent_month, account_day or account_month. */
    scope: text('scope').notNull(),
    /** The conversation's, the agent's or the account's id. */
    subject: uuid('subject').notNull(),
    /** The UTC day, or the first day of the UTC month; a conversation's one total has CONVERSATION_PERIOD. */
    period: date('period', { mode: 'string' }).notNull(),
    tokens: bigint('tokens', { mode: 'number' }).notNull().default(0),
    micros: bigint('micros', { mode: 'number' }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.scope, t.subject, t.period] })],
);

/** A conversation's budget spans its life: its total has no period. */
const CONVERSATION_PERIOD = '1970-01-01';

/** A reservation older than this is a call whose node died mid-call: it no longer holds budget back. */
export const IN_FLIGHT_MAX_MS = 30 * 60_000;
/** Status of a reserved call that has not ended. */
export const IN_FLIGHT = 0;

/** One budget's window: what finished calls used, and what the calls still in flight reserved. */
export interface ScopeSpent {
  readonly tokens: number;
  readonly micros: number;
  readonly reservedTokens: number;
  readonly reservedMicros: number;
  readonly inFlight: number;
}

export interface Spent {
  readonly conversation: ScopeSpent;
  readonly agentDay: ScopeSpent;
  readonly agentMonth: ScopeSpent;
  readonly accountDay: ScopeSpent;
  readonly accountMonth: ScopeSpent;
  readonly agentLastMinute: number;
  readonly accountLastMinute: number;
}

type Scope = Exclude<keyof Spent, 'agentLastMinute' | 'accountLastMinute'>;
const SCOPE_NAME: Record<Scope, string> = {
  conversation: 'conversation',
  agentDay: 'agent_day',
  agentMonth: 'agent_month',
  accountDay: 'account_day',
  accountMonth: 'account_month',
};
const SCOPES = Object.keys(SCOPE_NAME) as Scope[];

const isoDay = (d: Date) => d.toISOString().slice(0, 10);
const dayOf = (d: Date) => isoDay(d);
const monthOf = (d: Date) => `${isoDay(d).slice(0, 7)}-01`;

/** The totals rows a call counts in, by scope: its subject and period (no agent, no agent rows). */
function keysOf(accountId: string, agentId: string | null, conversationId: string | null, at: Date) {
  const keys: Array<{ scope: string; subject: string; period: string }> = [
    { scope: 'account_day', subject: accountId, period: dayOf(at) },
    { scope: 'account_month', subject: accountId, period: monthOf(at) },
  ];
  if (agentId)
    keys.push(
      { scope: 'agent_day', subject: agentId, period: dayOf(at) },
      { scope: 'agent_month', subject: agentId, period: monthOf(at) },
    );
  if (conversationId) keys.push({ scope: 'conversation', subject: conversationId, period: CONVERSATION_PERIOD });
  return keys;
}

const tokensOf = (r: NewModelCall) =>
  (r.inputTokens ?? 0) + (r.outputTokens ?? 0) + (r.cacheReadTokens ?? 0) + (r.cacheWriteTokens ?? 0);

/**
 * Adds the calls' usage to their totals, in the caller's transaction (the calls' rows are written in
 * it too, so a total never counts a call that is not stored). Increments are summed per row first
 * (one statement may touch a row once) and written in key order, so two nodes' batches never deadlock.
 */
export async function addToTotals(tx: EngineDb, rows: readonly NewModelCall[]): Promise<void> {
  const sums = new Map<
    string,
    { accountId: string; scope: string; subject: string; period: string; tokens: number; micros: number }
  >();
  for (const r of rows) {
    const tokens = tokensOf(r);
    const micros = r.costMicros ?? 0;
    if (tokens === 0 && micros === 0) continue;
    const at = r.createdAt instanceof Date ? r.createdAt : new Date();
    for (const k of keysOf(r.accountId, r.agentId ?? null, r.conversationId ?? null, at)) {
      const id = `${r.accountId} ${k.scope} ${k.subject} ${k.period}`;
      const s = sums.get(id) ?? { accountId: r.accountId, ...k, tokens: 0, micros: 0 };
      s.tokens += tokens;
      s.micros += micros;
      sums.set(id, s);
    }
  }
  if (sums.size === 0) return;
  const values = [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  await tx
    .insert(modelUsageTotals)
    .values(values)
    .onConflictDoUpdate({
      target: [modelUsageTotals.accountId, modelUsageTotals.scope, modelUsageTotals.subject, modelUsageTotals.period],
      set: {
        tokens: sql`${modelUsageTotals.tokens} + excluded.tokens`,
        micros: sql`${modelUsageTotals.micros} + excluded.micros`,
      },
    });
}

interface SpentRow {
  totals: Array<{ scope: string; tokens: string; micros: string }> | null;
  flying: Record<string, string> | null;
  agent_minute: string | null;
  account_minute: string | null;
}

/**
 * What the caller's account has spent and has in flight, in one statement: its five totals rows by
 * key, the sums of its calls in flight (a partial index holds only those), and, when a rate is set,
 * its calls of the last minute.
 */
export async function spent(db: EngineDb, c: CallerContext, now: Date, counting: boolean): Promise<Spent> {
  const day = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const minute = new Date(now.getTime() - 60_000);
  const stale = new Date(now.getTime() - IN_FLIGHT_MAX_MS);
  const keys = keysOf(c.accountId, c.agentId, c.conversationId, now);
  const wanted = sql.join(
    keys.map((k) => sql`(${k.scope}, ${k.subject}::uuid, ${k.period}::date)`),
    sql`, `,
  );
  const agent = c.agentId ? sql`agent_id = ${c.agentId}::uuid` : sql`false`;
  const window: Record<Scope, ReturnType<typeof sql>> = {
    conversation: sql`conversation_id = ${c.conversationId}::uuid`,
    agentDay: sql`${agent} AND created_at >= ${day.toISOString()}::timestamptz`,
    agentMonth: sql`${agent} AND created_at >= ${month.toISOString()}::timestamptz`,
    accountDay: sql`created_at >= ${day.toISOString()}::timestamptz`,
    accountMonth: sql`created_at >= ${month.toISOString()}::timestamptz`,
  };
  const flyingFields = sql.join(
    SCOPES.flatMap((s) => [
      sql`${`${s}_reservedTokens`}::text, coalesce(sum(reserved_tokens) FILTER (WHERE ${window[s]}), 0)::text`,
      sql`${`${s}_reservedMicros`}::text, coalesce(sum(reserved_micros) FILTER (WHERE ${window[s]}), 0)::text`,
      sql`${`${s}_inFlight`}::text, (count(*) FILTER (WHERE ${window[s]}))::text`,
    ]),
    sql`, `,
  );
  const minuteCount = (extra: ReturnType<typeof sql>) =>
    counting
      ? sql`(SELECT count(*) FROM ${modelCalls} WHERE account_id = ${c.accountId}::uuid AND created_at >= ${minute.toISOString()}::timestamptz AND refused IS NULL AND ${extra})::text`
      : sql`NULL`;
  const [r] = rowsOf<SpentRow>(
    await db.execute(sql`SELECT
      (SELECT json_agg(json_build_object('scope', scope, 'tokens', tokens::text, 'micros', micros::text))
         FROM ${modelUsageTotals}
        WHERE account_id = ${c.accountId}::uuid AND (scope, subject, period) IN (${wanted})) AS totals,
      (SELECT json_build_object(${flyingFields})
         FROM ${modelCalls}
        WHERE account_id = ${c.accountId}::uuid AND status = ${IN_FLIGHT} AND refused IS NULL
          AND created_at >= ${stale.toISOString()}::timestamptz) AS flying,
      ${minuteCount(agent)} AS agent_minute,
      ${minuteCount(sql`true`)} AS account_minute`),
  );
  const totals = new Map((r?.totals ?? []).map((t) => [t.scope, t]));
  const flying = r?.flying ?? {};
  const scope = (s: Scope): ScopeSpent => {
    const t = totals.get(SCOPE_NAME[s]);
    return {
      tokens: Number(t?.tokens ?? 0),
      micros: Number(t?.micros ?? 0),
      reservedTokens: Number(flying[`${s}_reservedTokens`] ?? 0),
      reservedMicros: Number(flying[`${s}_reservedMicros`] ?? 0),
      inFlight: Number(flying[`${s}_inFlight`] ?? 0),
    };
  };
  return {
    conversation: scope('conversation'),
    agentDay: scope('agentDay'),
    agentMonth: scope('agentMonth'),
    accountDay: scope('accountDay'),
    accountMonth: scope('accountMonth'),
    agentLastMinute: Number(r?.agent_minute ?? 0),
    accountLastMinute: Number(r?.account_minute ?? 0),
  };
}
