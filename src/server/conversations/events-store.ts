/**
 * The event log: batched inserts (one statement per flush, ids in insertion order) and cursor paging.
 */
import { and, asc, eq, gt, inArray, isNotNull, lte, max, sql, type SQL } from 'drizzle-orm';
import { conversations, events, type EventRow, type EventStream, type NewEvent } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';

/** An event as it will be stored, every default filled in; its id (0 here) is the database's to give. */
export const eventRowOf = (r: NewEvent): EventRow => ({
  id: 0,
  conversationId: r.conversationId,
  turnId: r.turnId ?? null,
  kind: r.kind,
  stream: r.stream ?? '',
  data: r.data ?? '',
  stage: r.stage ?? null,
  state: r.state ?? null,
  durationMs: r.durationMs ?? null,
  seq: r.seq ?? null,
  ts: r.ts ?? new Date(),
});

/**
 * One INSERT per batch whatever its size: every column goes as one array parameter and `unnest` turns
 * them back into rows, so the statement text is the same for 1 row or 200 (PostgreSQL parses the
 * same short text each time, and no query builder walks 11 columns × N rows per flush). `ORDER BY ord`
 * makes the bigserial ids follow the batch order, which the SSE tail and paging rely on. Only the ids
 * come back: every other column is what was sent.
 */
export async function insertEvents(db: EngineDb, rows: readonly NewEvent[]): Promise<EventRow[]> {
  if (rows.length === 0) return [];
  const full = rows.map(eventRowOf);
  const col = <T>(f: (r: EventRow) => T) => sql.param(full.map(f));
  const result: unknown = await db.execute(sql`
    INSERT INTO events (conversation_id, turn_id, kind, stream, data, stage, state, duration_ms, seq, ts)
    SELECT conversation_id, turn_id, kind, stream, data, stage, state, duration_ms, seq, ts
    FROM unnest(${col((r) => r.conversationId)}::uuid[], ${col((r) => r.turnId)}::uuid[], ${col((r) => r.kind)}::text[],
      ${col((r) => r.stream)}::text[], ${col((r) => r.data)}::text[], ${col((r) => r.stage)}::text[], ${col((r) => r.state)}::text[],
      ${col((r) => r.durationMs)}::int[], ${col((r) => r.seq)}::int[], ${col((r) => r.ts.toISOString())}::timestamptz[])
      WITH ORDINALITY AS u(conversation_id, turn_id, kind, stream, data, stage, state, duration_ms, seq, ts, ord)
    ORDER BY ord
    RETURNING id`);
  // Either driver's result has `rows`; pg returns a bigserial as a string, PGlite as a number.
  const returned = (result as { rows?: unknown }).rows;
  const ids = (Array.isArray(returned) ? returned : [])
    .map((r: { id?: unknown }) => Number(r.id))
    .sort((a, b) => a - b);
  if (ids.length !== full.length || ids.some((id) => !Number.isSafeInteger(id)))
    throw new Error(`insertEvents: ${full.length} rows sent, ${ids.length} ids returned`);
  full.forEach((r, i) => (r.id = ids[i]!));
  return full;
}

export interface EventPageQuery {
  readonly after: number;
  readonly limit: number;
  /** Output streams to include, plus `stage` for stage events; absent means all. */
  readonly streams?: ReadonlyArray<EventStream | 'stage'> | undefined;
}

/** `?streams=`: output streams to include, plus `stage` for stage events; absent or empty means all. */
export function streamFilter(streams: EventPageQuery['streams']): SQL | undefined {
  if (!streams || streams.length === 0) return undefined;
  const outputs = streams.filter((s): s is EventStream => s !== 'stage');
  const stage = streams.includes('stage');
  if (stage && outputs.length === 0) return eq(events.kind, 'stage');
  if (!stage) return and(eq(events.kind, 'output'), inArray(events.stream, outputs));
  return inArray(events.stream, [...outputs, '']);
}

export async function pageEvents(db: EngineDb, conversationId: string, q: EventPageQuery): Promise<EventRow[]> {
  const where: SQL[] = [eq(events.conversationId, conversationId), gt(events.id, q.after)];
  const streams = streamFilter(q.streams);
  if (streams) where.push(streams);
  return db
    .select()
    .from(events)
    .where(and(...where))
    .orderBy(asc(events.id))
    .limit(q.limit);
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

/** The agent's reply in a turn: the text of its agent_message_chunk updates, joined. */
export async function replyText(db: EngineDb, conversationId: string, turnId: string): Promise<string> {
  const rows = await db
    .select({ data: events.data })
    .from(events)
    .where(and(eq(events.conversationId, conversationId), eq(events.turnId, turnId), eq(events.stream, 'acp')))
    .orderBy(asc(events.id));
  let text = '';
  for (const r of rows) {
    let msg: unknown;
    try {
      msg = JSON.parse(r.data);
    } catch {
      continue;
    }
    const u = (
      msg as {
        method?: unknown;
        params?: { update?: { sessionUpdate?: unknown; content?: { type?: unknown; text?: unknown } } };
      }
    ).params?.update;
    if (
      (msg as { method?: unknown }).method === 'session/update' &&
      u?.sessionUpdate === 'agent_message_chunk' &&
      u.content?.type === 'text' &&
      typeof u.content.text === 'string'
    ) {
      text += u.content.text;
    }
  }
  return text;
}

/** Whether a permission request id was ever published for this conversation (it may predate this process). */
export async function permissionWasAsked(db: EngineDb, conversationId: string, requestId: string): Promise<boolean> {
  const rows = await db
    .select({ id: events.id })
    .from(events)
    .where(
      and(
        eq(events.conversationId, conversationId),
        eq(events.stage, 'permission'),
        sql`${events.data}::jsonb ->> 'request_id' = ${requestId}`,
      ),
    )
    .limit(1);
  return rows.length > 0;
}

/** Events of some of an account's conversations (or all of them), after a cursor, oldest first. */
export async function pageAccountEvents(
  db: EngineDb,
  accountId: string,
  q: EventPageQuery & { conversationIds?: readonly string[] | undefined; upTo?: number | undefined },
): Promise<EventRow[]> {
  const where: SQL[] = [eq(conversations.accountId, accountId), gt(events.id, q.after)];
  if (q.upTo !== undefined) where.push(lte(events.id, q.upTo));
  if (q.conversationIds) where.push(inArray(events.conversationId, [...q.conversationIds]));
  const streams = streamFilter(q.streams);
  if (streams) where.push(streams);
  const rows = await db
    .select({ event: events })
    .from(events)
    .innerJoin(conversations, eq(conversations.id, events.conversationId))
    .where(and(...where))
    .orderBy(asc(events.id))
    .limit(q.limit);
  return rows.map((r) => r.event);
}

/** Which account each conversation belongs to (unknown ids are absent). */
export async function accountsOf(db: EngineDb, conversationIds: readonly string[]): Promise<Map<string, string>> {
  if (conversationIds.length === 0) return new Map();
  const rows = await db
    .select({ id: conversations.id, accountId: conversations.accountId })
    .from(conversations)
    .where(inArray(conversations.id, [...conversationIds]));
  return new Map(rows.map((r) => [r.id, r.accountId]));
}

/** The highest stored event id (0 when none): where a stream without a cursor starts. */
export async function latestEventId(db: EngineDb): Promise<number> {
  const [row] = await db.select({ id: sql<string | null>`max(${events.id})` }).from(events);
  return Number(row?.id ?? 0);
}

/**
 * The stored tool-call lines of some turns before an event id (tool_call, tool_call_update, the permission
 * requests naming a call): what blocks derived from the middle of a conversation merge into.
 */
export async function toolLinesBefore(
  db: EngineDb,
  conversationId: string,
  turnIds: readonly string[],
  beforeId: number,
): Promise<EventRow[]> {
  if (turnIds.length === 0) return [];
  return db
    .select()
    .from(events)
    .where(
      and(
        eq(events.conversationId, conversationId),
        inArray(events.turnId, [...turnIds]),
        eq(events.stream, 'acp'),
        sql`${events.id} < ${beforeId}`,
        sql`${events.data} LIKE '%"toolCallId"%'`,
      ),
    )
    .orderBy(asc(events.id));
}

/** Ids above a cursor that no committed row holds, with the transaction horizon they were read at. */
export interface EventHoles {
  /** The highest id scanned: the stored maximum, or the cursor plus `span` when that is lower. */
  readonly top: number;
  /** Rows above `top` exist (the span was the limit). */
  readonly more: boolean;
  /** Ids in (after, top] with no visible row: taken by a transaction still running, or by one rolled back. */
  readonly holes: readonly number[];
  /** The oldest transaction still running (`pg_snapshot_xmin`), and the next one to start (`pg_snapshot_xmax`). */
  readonly xmin: bigint;
  readonly xmax: bigint;
}

/**
 * One statement, so one snapshot: a row committed after it is either above `top` or among `holes`,
 * never missed by a page read afterwards up to `top`.
 */
export async function eventHoles(db: EngineDb, after: number, span = 10_000): Promise<EventHoles> {
  const r = await db.execute(sql`
    WITH stored AS (SELECT coalesce(max(${events.id}), 0) AS id FROM ${events}),
      top AS (SELECT least(id, ${after}::bigint + ${span}::bigint) AS id FROM stored)
    SELECT (SELECT id FROM top)::text AS top, (SELECT id FROM stored)::text AS stored,
      pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
      pg_snapshot_xmax(pg_current_snapshot())::text AS xmax,
      coalesce((SELECT array_agg(g)::text FROM generate_series(${after}::bigint + 1, (SELECT id FROM top)) AS g
        WHERE NOT EXISTS (SELECT 1 FROM ${events} AS e WHERE e.id = g)), '{}') AS holes`);
  const row = (r as unknown as { rows: Array<Record<'top' | 'stored' | 'xmin' | 'xmax' | 'holes', string>> }).rows[0]!;
  const inner = row.holes.replace(/[{}]/g, '');
  return {
    top: Math.max(after, Number(row.top)),
    more: Number(row.stored) > Number(row.top),
    holes: inner ? inner.split(',').map(Number) : [],
    xmin: BigInt(row.xmin),
    xmax: BigInt(row.xmax),
  };
}
