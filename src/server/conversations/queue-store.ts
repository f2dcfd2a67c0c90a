/**
 * The capacity queue's rows: an account's limits (whose row is the lock admission takes), what it has
 * running, what waits, and taking the head of its queue with `FOR UPDATE SKIP LOCKED` on any node.
 */
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { accountLimits, capacityQueue, type QueueEntry, type QueueKind } from '../store/conversation-schema.ts';
import { rowsOf, type EngineDb } from '../store/engine-db.ts';

/** The limits an account runs under: its own, else the server's defaults. */
export interface Limits {
  readonly maxRunningTurns: number;
  readonly maxSandboxes: number;
}

/** An account's own limits as stored; null fields take the server's default. */
export interface OwnLimits {
  readonly maxRunningTurns: number | null;
  readonly maxSandboxes: number | null;
}

/** What an account holds now, read under its lock. */
export interface Load {
  readonly limits: Limits;
  /** Turns pending (capacity held, about to run) or running. */
  readonly running: number;
  /** Sandboxes starting or ready (parked, failed and terminated ones hold nothing). */
  readonly sandboxes: number;
  /** Entries waiting in the account's queue. */
  readonly waiting: number;
}

/** Sandbox statuses that hold a slot of the account's sandbox limit. */
export const ACTIVE_SANDBOX = ['starting', 'ready'] as const;

type Tx = Parameters<Parameters<EngineDb['transaction']>[0]>[0];

const num = (v: unknown): number => Number(v ?? 0);

async function counts(tx: Tx | EngineDb, accountId: string): Promise<Omit<Load, 'limits'>> {
  const [row] = rowsOf<{ running: unknown; sandboxes: unknown; waiting: unknown }>(
    await tx.execute(sql`SELECT
      (SELECT count(*) FROM turns t JOIN conversations c ON c.id = t.conversation_id
        WHERE c.account_id = ${accountId} AND t.status IN ('pending', 'running')) AS running,
      (SELECT count(*) FROM sandboxes s WHERE s.account_id = ${accountId} AND s.status IN ('starting', 'ready')) AS sandboxes,
      (SELECT count(*) FROM capacity_queue q WHERE q.account_id = ${accountId}) AS waiting`),
  );
  return { running: num(row?.running), sandboxes: num(row?.sandboxes), waiting: num(row?.waiting) };
}

const effective = (own: OwnLimits | undefined, defaults: Limits): Limits => ({
  maxRunningTurns: own?.maxRunningTurns ?? defaults.maxRunningTurns,
  maxSandboxes: own?.maxSandboxes ?? defaults.maxSandboxes,
});

/**
 * Takes the account's admission lock (its limits row, created on first use) and reads its load.
 * With `skipLocked`, null when another node holds the lock: that node is admitting for the account.
 */
export async function lockAccount(
  tx: Tx,
  accountId: string,
  defaults: Limits,
  skipLocked = false,
): Promise<Load | null> {
  const lockRow = () =>
    tx
      .select({ maxRunningTurns: accountLimits.maxRunningTurns, maxSandboxes: accountLimits.maxSandboxes })
      .from(accountLimits)
      .where(eq(accountLimits.accountId, accountId))
      .for('update', skipLocked ? { skipLocked: true } : {});
  let [own] = await lockRow();
  if (!own) {
    await tx.insert(accountLimits).values({ accountId }).onConflictDoNothing();
    [own] = await lockRow();
    if (!own) return null;
  }
  return { limits: effective(own, defaults), ...(await counts(tx, accountId)) };
}

/** A prompt or a new conversation fits now: nothing waits before it, and the limits it needs have room. */
export function fits(load: Load, needs: { turn: boolean; sandbox: boolean }): boolean {
  return (
    (!needs.turn || load.running < load.limits.maxRunningTurns) &&
    (!needs.sandbox || load.sandboxes < load.limits.maxSandboxes)
  );
}

export async function enqueue(
  tx: Tx,
  entry: { accountId: string; conversationId: string; turnId: string | null; kind: QueueKind; expiresAt: Date },
): Promise<QueueEntry> {
  const [row] = await tx.insert(capacityQueue).values(entry).returning();
  return row!;
}

/** The account's queue, head first, with what each entry's conversation holds. */
export async function waitingOf(
  tx: Tx | EngineDb,
  accountId: string,
): Promise<Array<QueueEntry & { readonly sandboxActive: boolean; readonly sandboxId: string | null }>> {
  const rows = rowsOf<{
    id: string;
    account_id: string;
    conversation_id: string;
    turn_id: string | null;
    kind: QueueKind;
    enqueued_at: string | Date;
    expires_at: string | Date;
    sandbox_id: string | null;
    sandbox_status: string | null;
  }>(
    await tx.execute(sql`SELECT q.*, c.sandbox_id, s.status AS sandbox_status
      FROM capacity_queue q
      JOIN conversations c ON c.id = q.conversation_id
      LEFT JOIN sandboxes s ON s.id = c.sandbox_id
      WHERE q.account_id = ${accountId}
      ORDER BY q.enqueued_at, q.id`),
  );
  return rows.map((r) => ({
    id: r.id,
    accountId: r.account_id,
    conversationId: r.conversation_id,
    turnId: r.turn_id,
    kind: r.kind,
    enqueuedAt: new Date(r.enqueued_at),
    expiresAt: new Date(r.expires_at),
    sandboxId: r.sandbox_id,
    sandboxActive: r.sandbox_status === 'starting' || r.sandbox_status === 'ready',
  }));
}

/** Removes one entry; false when it was gone (cancelled, expired or taken by another node meanwhile). */
export async function removeEntry(tx: Tx | EngineDb, id: string): Promise<boolean> {
  const rows = await tx.delete(capacityQueue).where(eq(capacityQueue.id, id)).returning({ id: capacityQueue.id });
  return rows.length === 1;
}

/** Removes a conversation's entry (its cancel or its end); the removed entry, if there was one. */
export async function removeEntryOf(db: EngineDb, conversationId: string): Promise<QueueEntry | undefined> {
  const [row] = await db.delete(capacityQueue).where(eq(capacityQueue.conversationId, conversationId)).returning();
  return row;
}

/** The entries past their expiry, removed (under the account's lock). */
export async function takeExpired(tx: Tx, accountId: string): Promise<QueueEntry[]> {
  return tx
    .delete(capacityQueue)
    .where(and(eq(capacityQueue.accountId, accountId), sql`${capacityQueue.expiresAt} <= now()`))
    .returning();
}

/** Accounts with something waiting, oldest wait first. */
export async function accountsWaiting(db: EngineDb): Promise<string[]> {
  const rows = rowsOf<{ account_id: string }>(
    await db.execute(
      sql`SELECT account_id FROM capacity_queue GROUP BY account_id ORDER BY min(enqueued_at) LIMIT 500`,
    ),
  );
  return rows.map((r) => r.account_id);
}

/** Each waiting conversation's place in its account's line (1 = next), keyed by conversation id. */
export async function positionsOf(
  db: EngineDb,
  conversationIds: readonly string[],
): Promise<Map<string, { position: number; expiresAt: Date; turnId: string | null; kind: QueueKind }>> {
  const out = new Map<string, { position: number; expiresAt: Date; turnId: string | null; kind: QueueKind }>();
  if (conversationIds.length === 0) return out;
  const mine = await db
    .select()
    .from(capacityQueue)
    .where(inArray(capacityQueue.conversationId, [...conversationIds]))
    .orderBy(asc(capacityQueue.enqueuedAt));
  for (const e of mine) {
    const [ahead] = rowsOf<{ n: unknown }>(
      await db.execute(sql`SELECT count(*) AS n FROM capacity_queue
        WHERE account_id = ${e.accountId} AND (enqueued_at, id) < (${e.enqueuedAt.toISOString()}::timestamptz, ${e.id}::uuid)`),
    );
    out.set(e.conversationId, { position: num(ahead?.n) + 1, expiresAt: e.expiresAt, turnId: e.turnId, kind: e.kind });
  }
  return out;
}

export async function getOwnLimits(db: EngineDb, accountId: string): Promise<OwnLimits> {
  const [row] = await db
    .select({ maxRunningTurns: accountLimits.maxRunningTurns, maxSandboxes: accountLimits.maxSandboxes })
    .from(accountLimits)
    .where(eq(accountLimits.accountId, accountId));
  return row ?? { maxRunningTurns: null, maxSandboxes: null };
}

/** Stores an account's own limits; false when there is no such account. */
export async function setOwnLimits(db: EngineDb, accountId: string, limits: OwnLimits): Promise<boolean> {
  const [exists] = rowsOf<{ id: string }>(await db.execute(sql`SELECT id FROM accounts WHERE id = ${accountId}`));
  if (!exists) return false;
  await db
    .insert(accountLimits)
    .values({ accountId, ...limits, updatedAt: new Date() })
    .onConflictDoUpdate({ target: accountLimits.accountId, set: { ...limits, updatedAt: new Date() } });
  return true;
}

/** The account's load without its lock, for showing (not for deciding). */
export async function loadOf(db: EngineDb, accountId: string, defaults: Limits): Promise<Load> {
  return { limits: effective(await getOwnLimits(db, accountId), defaults), ...(await counts(db, accountId)) };
}
