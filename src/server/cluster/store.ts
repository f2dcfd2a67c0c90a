/**
 * Server node liveness and the ownership of open work: heartbeat rows, the open work of lost nodes,
 * and the compare-and-set claims by which exactly one node adopts each piece of it.
 */
import { and, asc, eq, inArray, sql, type AnyColumn, type SQL } from 'drizzle-orm';
import {
  capacityQueue,
  conversations,
  serverNodes,
  turns,
  type Conversation,
  type Turn,
} from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';

/**
 * Which nodes count as lost, seen from `self`: with `expiryMs` null this process is the database's only
 * one (PGlite), so every other node id is a previous process; otherwise a node is lost once its
 * heartbeat row is older than `expiryMs` or gone. Null node ids (rows from before migration 0050) are lost.
 */
export interface Liveness {
  readonly self: string;
  readonly expiryMs: number | null;
}

/** The database's clock decides expiry, so clock skew between nodes does not matter. */
function lostNode(col: AnyColumn | SQL, l: Liveness): SQL {
  const other = sql`${col} IS DISTINCT FROM ${l.self}`;
  if (l.expiryMs === null) return other;
  return sql`(${other} AND NOT EXISTS (SELECT 1 FROM ${serverNodes} WHERE ${serverNodes.nodeId} = ${col} AND ${serverNodes.heartbeatAt} >= now() - make_interval(secs => ${l.expiryMs / 1000})))`;
}

const OPEN = ['pending', 'running'] as const;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A new conversation waiting in the capacity queue is nobody's provisioning yet: no node adopts it. */
const notQueued = sql`NOT EXISTS (SELECT 1 FROM ${capacityQueue} WHERE ${capacityQueue.conversationId} = ${conversations.id})`;
const hasOpenTurn = sql`EXISTS (SELECT 1 FROM ${turns} WHERE ${turns.conversationId} = ${conversations.id} AND ${turns.status} IN ('pending', 'running'))`;

/** Writes this node's heartbeat (the row is created on the first beat and again if it was reaped). */
export async function stampNode(db: EngineDb, nodeId: string): Promise<void> {
  await db
    .insert(serverNodes)
    .values({ nodeId })
    .onConflictDoUpdate({ target: serverNodes.nodeId, set: { heartbeatAt: sql`now()` } });
}

/** A node that stops cleanly removes its row, so its open turns are adopted without waiting for the expiry. */
export async function removeNode(db: EngineDb, nodeId: string): Promise<void> {
  await db.delete(serverNodes).where(eq(serverNodes.nodeId, nodeId));
}

/**
 * Drops the rows of nodes silent for longer than `afterMs`. For adoption a missing row means the same as
 * an expired one; the rows are kept a while so every node's runner host sees the node lost (cluster-host.ts).
 */
export async function reapNodes(db: EngineDb, afterMs: number): Promise<void> {
  await db
    .delete(serverNodes)
    .where(sql`${serverNodes.heartbeatAt} < now() - make_interval(secs => ${afterMs / 1000})`);
}

/** Conversations still provisioning on a lost node. */
export async function lostProvisionings(db: EngineDb, l: Liveness): Promise<Conversation[]> {
  return db
    .select()
    .from(conversations)
    .where(and(eq(conversations.status, 'pending'), notQueued, lostNode(conversations.nodeId, l)))
    .orderBy(asc(conversations.insertedAt));
}

/** Open turns of running conversations whose node was lost. */
export async function lostTurns(db: EngineDb, l: Liveness): Promise<Array<{ conversation: Conversation; turn: Turn }>> {
  return db
    .select({ conversation: conversations, turn: turns })
    .from(turns)
    .innerJoin(conversations, eq(conversations.id, turns.conversationId))
    .where(and(inArray(turns.status, [...OPEN]), eq(conversations.status, 'running'), lostNode(turns.nodeId, l)))
    .orderBy(asc(turns.conversationId), asc(turns.turnNumber));
}

/**
 * Takes a lost node's pending conversation for `l.self`. The row must still name the node it was
 * found with and that node must still be lost: of several nodes racing, exactly one gets the row.
 */
export async function claimProvisioning(db: EngineDb, id: string, from: string | null, l: Liveness): Promise<boolean> {
  const rows = await db
    .update(conversations)
    .set({ nodeId: l.self })
    .where(
      and(
        eq(conversations.id, id),
        eq(conversations.status, 'pending'),
        notQueued,
        sql`${conversations.nodeId} IS NOT DISTINCT FROM ${from}`,
        lostNode(conversations.nodeId, l),
      ),
    )
    .returning({ id: conversations.id });
  return rows.length === 1;
}

/** Takes a lost node's open turn for `l.self`, compare-and-set like claimProvisioning; the claimed row, or undefined. */
export async function claimTurn(db: EngineDb, id: string, from: string | null, l: Liveness): Promise<Turn | undefined> {
  const [row] = await db
    .update(turns)
    .set({ nodeId: l.self })
    .where(
      and(
        eq(turns.id, id),
        inArray(turns.status, [...OPEN]),
        sql`${turns.nodeId} IS NOT DISTINCT FROM ${from}`,
        lostNode(turns.nodeId, l),
      ),
    )
    .returning();
  return row;
}

/**
 * A running conversation with no open turn (its node died between closing the turn and settling the
 * conversation) is settled idle when the node of its last turn was lost. Returns the ids settled.
 */
export async function settleAbandoned(db: EngineDb, l: Liveness): Promise<string[]> {
  const lastNode = sql`(SELECT ${turns.nodeId} FROM ${turns} WHERE ${turns.conversationId} = ${conversations.id} ORDER BY ${turns.turnNumber} DESC LIMIT 1)`;
  const rows = await db
    .update(conversations)
    .set({ status: 'idle', updatedAt: new Date() })
    .where(and(eq(conversations.status, 'running'), sql`NOT ${hasOpenTurn}`, lostNode(lastNode, l)))
    .returning({ id: conversations.id });
  return rows.map((r) => r.id);
}

/** Of the turns `self` drives, those another node has adopted meanwhile (`self` was presumed lost). */
export async function turnsTakenOver(db: EngineDb, ids: readonly string[], self: string): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({ id: turns.id })
    .from(turns)
    .where(and(inArray(turns.id, [...ids]), sql`${turns.nodeId} IS DISTINCT FROM ${self}`));
  return rows.map((r) => r.id);
}

/**
 * The live node other than `self` that drives a conversation: the node of its open turn, else the node
 * that launched its agent; null when that is this node, no node, or a node whose heartbeat expired.
 */
export async function liveOwnerOf(
  db: EngineDb,
  conversationId: string,
  l: { readonly self: string; readonly expiryMs: number },
): Promise<string | null> {
  // Not a uuid: no conversation has it (and PostgreSQL would refuse to compare it).
  if (!UUID.test(conversationId)) return null;
  const owner = sql`(SELECT coalesce(
      (SELECT ${turns.nodeId} FROM ${turns} WHERE ${turns.conversationId} = ${conversationId} AND ${turns.status} IN ('pending', 'running') ORDER BY ${turns.turnNumber} DESC LIMIT 1),
      (SELECT ${conversations.nodeId} FROM ${conversations} WHERE ${conversations.id} = ${conversationId})))`;
  const [row] = await db
    .select({ node: serverNodes.nodeId })
    .from(serverNodes)
    .where(
      and(
        sql`${serverNodes.nodeId} = ${owner}`,
        sql`${serverNodes.nodeId} <> ${l.self}`,
        sql`${serverNodes.heartbeatAt} >= now() - make_interval(secs => ${l.expiryMs / 1000})`,
      ),
    );
  return row?.node ?? null;
}
