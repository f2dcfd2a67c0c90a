/**
 * The gateway's tables and queries: one row per model call (the metering and the audit, never a
 * body), the account's model limits, and what a caller is (conversation, agent, limits); budgets
 * are judged against running totals (totals.ts).
 */
import { and, desc, eq, gte, lt, sql } from 'drizzle-orm';
import { bigint, integer, jsonb, pgTable, text, timestamp, uuid, type PgInsertValue } from 'drizzle-orm/pg-core';
import type { EngineDb } from '../store/engine-db.ts';
import { accounts } from '../store/schema.ts';
import { agents, conversations, type ModelLimits, type Runtime } from '../store/conversation-schema.ts';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const modelCalls = pgTable('model_calls', {
  id: uuid('id').primaryKey().defaultRandom(),
  accountId: uuid('account_id').notNull(),
  agentId: uuid('agent_id'),
  conversationId: uuid('conversation_id'),
  turnId: uuid('turn_id'),
  nodeId: text('node_id'),
  api: text('api').notNull(),
  endpoint: text('endpoint').notNull(),
  model: text('model'),
  status: integer('status').notNull(),
  /** The limit that refused the call; null when it was forwarded. */
  refused: text('refused'),
  inputTokens: bigint('input_tokens', { mode: 'number' }).notNull().default(0),
  outputTokens: bigint('output_tokens', { mode: 'number' }).notNull().default(0),
  cacheReadTokens: bigint('cache_read_tokens', { mode: 'number' }).notNull().default(0),
  cacheWriteTokens: bigint('cache_write_tokens', { mode: 'number' }).notNull().default(0),
  costMicros: bigint('cost_micros', { mode: 'number' }),
  latencyMs: integer('latency_ms').notNull(),
  firstByteMs: integer('first_byte_ms'),
  /** A call held to a budget is written when it starts (status 0, in flight) with what it may use. */
  reservedTokens: bigint('reserved_tokens', { mode: 'number' }).notNull().default(0),
  reservedMicros: bigint('reserved_micros', { mode: 'number' }).notNull().default(0),
  createdAt: ts('created_at').notNull().defaultNow(),
});
export type ModelCall = typeof modelCalls.$inferSelect;
export type NewModelCall = typeof modelCalls.$inferInsert;

export const accountModelLimits = pgTable('account_model_limits', {
  accountId: uuid('account_id')
    .primaryKey()
    .references(() => accounts.id, { onDelete: 'cascade' }),
  limits: jsonb('limits').$type<ModelLimits>().notNull(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

/** Who is calling: the conversation a sandbox token belongs to, its agent and both sets of limits. */
export interface CallerContext {
  readonly accountId: string;
  readonly conversationId: string;
  readonly agentId: string | null;
  readonly runtime: Runtime;
  readonly agentLimits: ModelLimits;
  readonly accountLimits: ModelLimits;
}

export async function callerContext(db: EngineDb, conversationId: string): Promise<CallerContext | null> {
  const [row] = await db
    .select({
      accountId: conversations.accountId,
      agentId: conversations.agentId,
      runtime: conversations.runtime,
      agentLimits: agents.modelLimits,
      accountLimits: accountModelLimits.limits,
    })
    .from(conversations)
    .leftJoin(agents, eq(agents.id, conversations.agentId))
    .leftJoin(accountModelLimits, eq(accountModelLimits.accountId, conversations.accountId))
    .where(eq(conversations.id, conversationId));
  if (!row) return null;
  return {
    accountId: row.accountId,
    conversationId,
    agentId: row.agentId,
    runtime: row.runtime,
    agentLimits: row.agentLimits ?? {},
    accountLimits: row.accountLimits ?? {},
  };
}

/** The row with its turn: the latest of its conversation's turns started by the time the call was. */
export function withTurn(row: NewModelCall): PgInsertValue<typeof modelCalls> {
  const at = row.createdAt instanceof Date ? row.createdAt : new Date();
  const turn = row.conversationId
    ? sql`(SELECT id FROM turns WHERE conversation_id = ${row.conversationId} AND started_at IS NOT NULL AND started_at <= ${at} ORDER BY started_at DESC LIMIT 1)`
    : null;
  return { ...row, ...(turn && !row.turnId ? { turnId: turn } : {}) };
}

export interface CallFilter {
  readonly conversationId?: string | undefined;
  readonly agentId?: string | undefined;
  readonly since?: Date | undefined;
  readonly until?: Date | undefined;
  readonly limit: number;
  /** Calls created before this one (newest first paging). */
  readonly before?: Date | undefined;
}

export function listCalls(db: EngineDb, accountId: string, f: CallFilter): Promise<ModelCall[]> {
  const conds = [eq(modelCalls.accountId, accountId)];
  if (f.conversationId) conds.push(eq(modelCalls.conversationId, f.conversationId));
  if (f.agentId) conds.push(eq(modelCalls.agentId, f.agentId));
  if (f.since) conds.push(gte(modelCalls.createdAt, f.since));
  if (f.until) conds.push(lt(modelCalls.createdAt, f.until));
  if (f.before) conds.push(lt(modelCalls.createdAt, f.before));
  return db
    .select()
    .from(modelCalls)
    .where(and(...conds))
    .orderBy(desc(modelCalls.createdAt))
    .limit(f.limit);
}

export interface UsageGroup {
  readonly key: string;
  readonly calls: number;
  readonly refused: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheReadTokens: number;
  readonly cacheWriteTokens: number;
  readonly costMicros: number;
}

export type GroupBy = 'conversation' | 'agent' | 'day' | 'model' | 'turn';

export async function usageBy(
  db: EngineDb,
  accountId: string,
  by: GroupBy,
  f: Omit<CallFilter, 'limit' | 'before'>,
): Promise<UsageGroup[]> {
  const key =
    by === 'conversation'
      ? sql<string>`coalesce(${modelCalls.conversationId}::text, '')`
      : by === 'agent'
        ? sql<string>`coalesce(${modelCalls.agentId}::text, '')`
        : by === 'turn'
          ? sql<string>`coalesce(${modelCalls.turnId}::text, '')`
          : by === 'model'
            ? sql<string>`coalesce(${modelCalls.model}, '')`
            : sql<string>`to_char(${modelCalls.createdAt} AT TIME ZONE 'UTC', 'YYYY-MM-DD')`;
  const conds = [eq(modelCalls.accountId, accountId)];
  if (f.conversationId) conds.push(eq(modelCalls.conversationId, f.conversationId));
  if (f.agentId) conds.push(eq(modelCalls.agentId, f.agentId));
  if (f.since) conds.push(gte(modelCalls.createdAt, f.since));
  if (f.until) conds.push(lt(modelCalls.createdAt, f.until));
  const rows = await db
    .select({
      key,
      calls: sql<string>`count(*)::text`,
      refused: sql<string>`count(*) FILTER (WHERE ${modelCalls.refused} IS NOT NULL)::text`,
      inputTokens: sql<string>`coalesce(sum(${modelCalls.inputTokens}), 0)::text`,
      outputTokens: sql<string>`coalesce(sum(${modelCalls.outputTokens}), 0)::text`,
      cacheReadTokens: sql<string>`coalesce(sum(${modelCalls.cacheReadTokens}), 0)::text`,
      cacheWriteTokens: sql<string>`coalesce(sum(${modelCalls.cacheWriteTokens}), 0)::text`,
      costMicros: sql<string>`coalesce(sum(${modelCalls.costMicros}), 0)::text`,
    })
    .from(modelCalls)
    .where(and(...conds))
    .groupBy(key)
    .orderBy(key);
  return rows.map((r) => ({
    key: r.key,
    calls: Number(r.calls),
    refused: Number(r.refused),
    inputTokens: Number(r.inputTokens),
    outputTokens: Number(r.outputTokens),
    cacheReadTokens: Number(r.cacheReadTokens),
    cacheWriteTokens: Number(r.cacheWriteTokens),
    costMicros: Number(r.costMicros),
  }));
}

export async function getAccountLimits(db: EngineDb, accountId: string): Promise<ModelLimits> {
  const [r] = await db
    .select({ limits: accountModelLimits.limits })
    .from(accountModelLimits)
    .where(eq(accountModelLimits.accountId, accountId));
  return r?.limits ?? {};
}

export async function setAccountLimits(db: EngineDb, accountId: string, limits: ModelLimits): Promise<void> {
  const now = new Date();
  await db
    .insert(accountModelLimits)
    .values({ accountId, limits, updatedAt: now })
    .onConflictDoUpdate({ target: accountModelLimits.accountId, set: { limits, updatedAt: now } });
}
