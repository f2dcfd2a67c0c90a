/**
 * The webhook tables and their queries: endpoints (secrets only sealed), deliveries claimed with
 * FOR UPDATE SKIP LOCKED so each is sent by one node at a time, and every attempt recorded.
 */
import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import { bigserial, boolean, integer, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { type EngineDb, rowsOf } from '../store/engine-db.ts';
import type { WebhookEventKind } from './kinds.ts';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const webhookEndpoints = pgTable('webhook_endpoints', {
  id: uuid('id').primaryKey(),
  accountId: uuid('account_id').notNull(),
  url: text('url').notNull(),
  secretSealed: text('secret_sealed').notNull(),
  kinds: text('kinds').array().notNull().$type<WebhookEventKind[]>(),
  enabled: boolean('enabled').notNull().default(true),
  disabledReason: text('disabled_reason'),
  disabledAt: ts('disabled_at'),
  failingSince: ts('failing_since'),
  createdAt: ts('created_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export const webhookDeliveries = pgTable('webhook_deliveries', {
  id: uuid('id').primaryKey().defaultRandom(),
  endpointId: uuid('endpoint_id').notNull(),
  accountId: uuid('account_id').notNull(),
  eventId: text('event_id').notNull(),
  eventKind: text('event_kind').notNull().$type<WebhookEventKind>(),
  payload: jsonb('payload').notNull().$type<Record<string, unknown>>(),
  status: text('status', { enum: DELIVERY_STATUSES }).notNull().default('pending'),
  attempts: integer('attempts').notNull().default(0),
  nextAttemptAt: ts('next_attempt_at').notNull().defaultNow(),
  leaseUntil: ts('lease_until'),
  redeliveryOf: uuid('redelivery_of'),
  createdAt: ts('created_at').notNull().defaultNow(),
  deliveredAt: ts('delivered_at'),
});

export const webhookAttempts = pgTable('webhook_attempts', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  deliveryId: uuid('delivery_id').notNull(),
  attemptedAt: ts('attempted_at').notNull().defaultNow(),
  statusCode: integer('status_code'),
  error: text('error'),
  latencyMs: integer('latency_ms').notNull(),
  responseExcerpt: text('response_excerpt'),
});

export type EndpointRow = typeof webhookEndpoints.$inferSelect;
export type DeliveryRow = typeof webhookDeliveries.$inferSelect;
export type AttemptRow = typeof webhookAttempts.$inferSelect;

export async function insertEndpoint(
  db: EngineDb,
  row: { id: string; accountId: string; url: string; secretSealed: string; kinds: WebhookEventKind[] },
): Promise<EndpointRow> {
  const [r] = await db.insert(webhookEndpoints).values(row).returning();
  return r!;
}

export async function listEndpoints(db: EngineDb, accountId: string): Promise<EndpointRow[]> {
  return db
    .select()
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.accountId, accountId))
    .orderBy(webhookEndpoints.createdAt);
}

export async function findEndpoint(db: EngineDb, accountId: string, id: string): Promise<EndpointRow | undefined> {
  const [r] = await db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.accountId, accountId), eq(webhookEndpoints.id, id)));
  return r;
}

export async function endpointsByIds(db: EngineDb, ids: string[]): Promise<EndpointRow[]> {
  if (ids.length === 0) return [];
  return db.select().from(webhookEndpoints).where(inArray(webhookEndpoints.id, ids));
}

export async function updateEndpoint(
  db: EngineDb,
  accountId: string,
  id: string,
  patch: Partial<
    Pick<EndpointRow, 'url' | 'kinds' | 'enabled' | 'disabledReason' | 'disabledAt' | 'failingSince' | 'secretSealed'>
  >,
): Promise<EndpointRow | undefined> {
  const [r] = await db
    .update(webhookEndpoints)
    .set({ ...patch, updatedAt: new Date() })
    .where(and(eq(webhookEndpoints.accountId, accountId), eq(webhookEndpoints.id, id)))
    .returning();
  return r;
}

export async function deleteEndpoint(db: EngineDb, accountId: string, id: string): Promise<boolean> {
  const r = await db
    .delete(webhookEndpoints)
    .where(and(eq(webhookEndpoints.accountId, accountId), eq(webhookEndpoints.id, id)))
    .returning({ id: webhookEndpoints.id });
  return r.length > 0;
}

/** Deliveries of an endpoint, newest first, each with its attempts oldest first. */
export async function listDeliveries(
  db: EngineDb,
  endpointId: string,
  limit: number,
): Promise<Array<DeliveryRow & { attemptLog: AttemptRow[] }>> {
  const rows = await db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.endpointId, endpointId))
    .orderBy(desc(webhookDeliveries.createdAt), desc(webhookDeliveries.id))
    .limit(limit);
  const attempts = rows.length
    ? await db
        .select()
        .from(webhookAttempts)
        .where(
          inArray(
            webhookAttempts.deliveryId,
            rows.map((r) => r.id),
          ),
        )
        .orderBy(webhookAttempts.id)
    : [];
  return rows.map((r) => ({ ...r, attemptLog: attempts.filter((a) => a.deliveryId === r.id) }));
}

export async function findDelivery(db: EngineDb, endpointId: string, id: string): Promise<DeliveryRow | undefined> {
  const [r] = await db
    .select()
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.endpointId, endpointId), eq(webhookDeliveries.id, id)));
  return r;
}

/** A new pending delivery of the same event and payload, asked for by the account. */
export async function insertRedelivery(db: EngineDb, of: DeliveryRow): Promise<DeliveryRow> {
  const [r] = await db
    .insert(webhookDeliveries)
    .values({
      endpointId: of.endpointId,
      accountId: of.accountId,
      eventId: of.eventId,
      eventKind: of.eventKind,
      payload: of.payload,
      redeliveryOf: of.id,
    })
    .returning();
  return r!;
}

/**
 * One event of the account to every enabled endpoint subscribed to its kind; an event already queued for
 * an endpoint (another node saw it first) is not queued again. Returns how many deliveries were queued.
 */
export async function enqueueEvent(
  db: EngineDb,
  e: { accountId: string; eventId: string; kind: WebhookEventKind; payload: Record<string, unknown> },
): Promise<number> {
  const res = await db.execute(sql`
    INSERT INTO webhook_deliveries (endpoint_id, account_id, event_id, event_kind, payload)
    SELECT w.id, w.account_id, ${e.eventId}, ${e.kind}, ${JSON.stringify(e.payload)}::jsonb
    FROM webhook_endpoints w
    WHERE w.account_id = ${e.accountId} AND w.enabled AND ${e.kind} = ANY (w.kinds)
    ON CONFLICT (endpoint_id, event_id) WHERE redelivery_of IS NULL DO NOTHING
    RETURNING id`);
  return rowsOf(res).length;
}

export interface ScanPosition {
  readonly eventCursor: number;
  readonly conversationsSince: Date;
}

export async function readScanPosition(db: EngineDb): Promise<ScanPosition> {
  const [r] = rowsOf<{ event_cursor: string | number; conversations_since: Date | string }>(
    await db.execute(sql`SELECT event_cursor, conversations_since FROM webhook_scan WHERE id = 1`),
  );
  return r
    ? { eventCursor: Number(r.event_cursor), conversationsSince: new Date(r.conversations_since) }
    : { eventCursor: 0, conversationsSince: new Date() };
}

/**
 * Turns the stage events in (low, high] into deliveries: a turn's end, a permission request, a failed
 * provisioning. Rescanning a range is harmless (each event is queued once per endpoint), which is what
 * lets the scanner look back below its cursor for rows that committed late.
 */
export async function enqueueStageEvents(db: EngineDb, low: number, high: number): Promise<number> {
  const res = await db.execute(sql`
    INSERT INTO webhook_deliveries (endpoint_id, account_id, event_id, event_kind, payload)
    SELECT w.id, c.account_id, 'evt_' || e.id, k.kind,
      jsonb_build_object(
        'id', 'evt_' || e.id,
        'type', k.kind,
        'created_at', to_char(e.ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'account_id', c.account_id,
        'data', jsonb_strip_nulls(jsonb_build_object(
          'conversation_id', e.conversation_id,
          'turn_id', e.turn_id,
          'status', CASE WHEN k.kind = 'turn.ended' THEN (CASE e.state WHEN 'done' THEN 'completed' ELSE e.state END) END,
          'event_id', e.id)))
    FROM events e
    JOIN conversations c ON c.id = e.conversation_id
    CROSS JOIN LATERAL (SELECT CASE
      WHEN e.stage = 'turn' AND e.state IN ('done', 'failed', 'interrupted') THEN 'turn.ended'
      WHEN e.stage = 'permission' AND e.state = 'started' THEN 'permission.requested'
      WHEN e.stage = 'provision' AND e.state = 'failed' THEN 'conversation.failed'
    END AS kind) k
    JOIN webhook_endpoints w ON w.account_id = c.account_id AND w.enabled AND k.kind = ANY (w.kinds)
    WHERE e.id > ${low} AND e.id <= ${high} AND e.kind = 'stage' AND k.kind IS NOT NULL
      -- An endpoint hears what happened after it was added, not the rescanned window before it.
      AND e.ts >= w.created_at
      -- A warm-pool member failing to provision is the pool's business (logged, made again), no conversation's.
      AND c.pool_agent_id IS NULL
    ON CONFLICT (endpoint_id, event_id) WHERE redelivery_of IS NULL DO NOTHING
    RETURNING id`);
  return rowsOf(res).length;
}

/** Conversations created after `since` (rescanned for late commits the same way). */
export async function enqueueCreatedConversations(db: EngineDb, since: Date): Promise<number> {
  const res = await db.execute(sql`
    INSERT INTO webhook_deliveries (endpoint_id, account_id, event_id, event_kind, payload)
    SELECT w.id, c.account_id, 'conv_' || c.id || '_created', 'conversation.created',
      jsonb_build_object(
        'id', 'conv_' || c.id || '_created',
        'type', 'conversation.created',
        'created_at', to_char(c.inserted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'account_id', c.account_id,
        'data', jsonb_strip_nulls(jsonb_build_object('conversation_id', c.id, 'agent_id', c.agent_id)))
    FROM conversations c
    JOIN webhook_endpoints w ON w.account_id = c.account_id AND w.enabled AND 'conversation.created' = ANY (w.kinds)
    -- A warm-pool member is created when it is taken (its inserted_at is set then, pool.ts).
    WHERE c.inserted_at > ${since.toISOString()}::timestamptz AND c.inserted_at >= w.created_at
      AND c.pool_agent_id IS NULL
    ON CONFLICT (endpoint_id, event_id) WHERE redelivery_of IS NULL DO NOTHING
    RETURNING id`);
  return rowsOf(res).length;
}

/** Whether any endpoint exists: without one nothing is queued or due, and a tick reads no events. */
export async function anyEndpoint(db: EngineDb): Promise<boolean> {
  const [r] = rowsOf<{ any: boolean }>(await db.execute(sql`SELECT EXISTS (SELECT 1 FROM webhook_endpoints) AS any`));
  return r?.any === true;
}

export async function maxEventId(db: EngineDb): Promise<number> {
  const [r] = rowsOf<{ m: string | number | null }>(await db.execute(sql`SELECT max(id) AS m FROM events`));
  return Number(r?.m ?? 0);
}

export async function saveScanPosition(db: EngineDb, p: ScanPosition): Promise<void> {
  await db.execute(sql`
    UPDATE webhook_scan SET event_cursor = GREATEST(event_cursor, ${p.eventCursor}),
      conversations_since = GREATEST(conversations_since, ${p.conversationsSince.toISOString()}::timestamptz)
    WHERE id = 1`);
}

export interface Claimed {
  readonly id: string;
  readonly endpointId: string;
  readonly eventId: string;
  readonly eventKind: WebhookEventKind;
  readonly payload: Record<string, unknown>;
  /** This attempt's number, 1-based. */
  readonly attempt: number;
}

/** Up to `limit` due deliveries, leased to this node for `leaseMs`; another node skips them meanwhile. */
export async function claimDue(db: EngineDb, limit: number, leaseMs: number): Promise<Claimed[]> {
  const rows = rowsOf<{
    id: string;
    endpoint_id: string;
    event_id: string;
    event_kind: WebhookEventKind;
    payload: Record<string, unknown> | string;
    attempts: number;
  }>(
    await db.execute(sql`
      UPDATE webhook_deliveries d SET lease_until = now() + ${`${leaseMs} milliseconds`}::interval, attempts = d.attempts + 1
      WHERE d.id IN (
        SELECT id FROM webhook_deliveries
        WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
        ORDER BY next_attempt_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED)
      RETURNING d.id, d.endpoint_id, d.event_id, d.event_kind, d.payload, d.attempts`),
  );
  return rows.map((r) => ({
    id: r.id,
    endpointId: r.endpoint_id,
    eventId: r.event_id,
    eventKind: r.event_kind,
    payload: typeof r.payload === 'string' ? (JSON.parse(r.payload) as Record<string, unknown>) : r.payload,
    attempt: Number(r.attempts),
  }));
}

export async function recordAttempt(
  db: EngineDb,
  a: {
    deliveryId: string;
    statusCode: number | null;
    error: string | null;
    latencyMs: number;
    responseExcerpt: string | null;
  },
  outcome: { delivered: true } | { delivered: false; retryAt: Date | null },
): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.insert(webhookAttempts).values(a);
    await tx
      .update(webhookDeliveries)
      .set(
        outcome.delivered
          ? { status: 'delivered', deliveredAt: new Date(), leaseUntil: null }
          : outcome.retryAt
            ? { nextAttemptAt: outcome.retryAt, leaseUntil: null }
            : { status: 'failed', leaseUntil: null },
      )
      .where(eq(webhookDeliveries.id, a.deliveryId));
  });
}

/** The endpoint's first failure is remembered; one failing longer than `disableAfterMs` is disabled. */
export async function markEndpointFailure(
  db: EngineDb,
  id: string,
  disableAfterMs: number,
): Promise<{ disabled: boolean; failingSince: Date } | null> {
  const interval = `${disableAfterMs} milliseconds`;
  const [r] = rowsOf<{ enabled: boolean; failing_since: Date | string }>(
    await db.execute(sql`
      UPDATE webhook_endpoints SET
        failing_since = COALESCE(failing_since, now()),
        enabled = NOT (failing_since IS NOT NULL AND failing_since < now() - ${interval}::interval),
        disabled_at = CASE WHEN failing_since IS NOT NULL AND failing_since < now() - ${interval}::interval THEN now() ELSE disabled_at END,
        disabled_reason = CASE WHEN failing_since IS NOT NULL AND failing_since < now() - ${interval}::interval
          THEN 'every delivery failed since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI "UTC"') || '; fix the receiver, then enable the endpoint again'
          ELSE disabled_reason END,
        updated_at = now()
      WHERE id = ${id} AND enabled
      RETURNING enabled, failing_since`),
  );
  return r ? { disabled: !r.enabled, failingSince: new Date(r.failing_since) } : null;
}

export async function markEndpointSuccess(db: EngineDb, id: string): Promise<void> {
  await db.execute(
    sql`UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ${id} AND failing_since IS NOT NULL`,
  );
}
