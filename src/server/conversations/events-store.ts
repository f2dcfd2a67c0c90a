/**
 * The event log: batched inserts (one statement per flush, ids in insertion order) and cursor paging.
 */
import { and, asc, eq, gt, inArray, isNotNull, max, sql, type SQL } from 'drizzle-orm';
import { events, type EventRow, type EventStream, type NewEvent } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';

/** One multi-row INSERT; PostgreSQL assigns the bigserial ids in VALUES order. */
export async function insertEvents(db: EngineDb, rows: readonly NewEvent[]): Promise<EventRow[]> {
  if (rows.length === 0) return [];
  const inserted = await db.insert(events).values([...rows]).returning();
  return inserted.sort((a, b) => a.id - b.id);
}

export interface EventPageQuery {
  readonly after: number;
  readonly limit: number;
  /** Output streams to include, plus `stage` for stage events; absent means all. */
  readonly streams?: ReadonlyArray<EventStream | 'stage'> | undefined;
}

export async function pageEvents(db: EngineDb, conversationId: string, q: EventPageQuery): Promise<EventRow[]> {
  const where: SQL[] = [eq(events.conversationId, conversationId), gt(events.id, q.after)];
  if (q.streams && q.streams.length > 0) {
    const outputs = q.streams.filter((s): s is EventStream => s !== 'stage');
    const stage = q.streams.includes('stage');
    if (stage && outputs.length === 0) where.push(eq(events.kind, 'stage'));
    else if (!stage) where.push(and(eq(events.kind, 'output'), inArray(events.stream, outputs))!);
    else where.push(inArray(events.stream, [...outputs, '']));
  }
  return db.select().from(events).where(and(...where)).orderBy(asc(events.id)).limit(q.limit);
}

/**
 * The highest stored output ordinals of a turn: `lines` over its acp/stdout events (the ACP line seq),
 * `stderr` over its stderr chunks; -1 when none. A reattach replays from byte zero and skips up to these.
 */
export async function storedOutputSeqs(db: EngineDb, turnId: string): Promise<{ lines: number; stderr: number }> {
  const rows = await db
    .select({ stream: events.stream, seq: max(events.seq) })
    .from(events)
    .where(and(eq(events.turnId, turnId), eq(events.kind, 'output'), isNotNull(events.seq)))
    .groupBy(events.stream);
  let lines = -1;
  let stderr = -1;
  for (const r of rows) {
    const v = r.seq ?? -1;
    if (r.stream === 'stderr') stderr = Math.max(stderr, v);
    else lines = Math.max(lines, v);
  }
  return { lines, stderr };
}

/** Whether a permission request id was ever published for this conversation (it may predate this process). */
export async function permissionWasAsked(db: EngineDb, conversationId: string, requestId: string): Promise<boolean> {
  const rows = await db
    .select({ id: events.id })
    .from(events)
    .where(and(eq(events.conversationId, conversationId), eq(events.stage, 'permission'), sql`${events.data}::jsonb ->> 'request_id' = ${requestId}`))
    .limit(1);
  return rows.length > 0;
}
