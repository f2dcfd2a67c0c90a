/**
 * The rows of a turn waiting in the capacity queue. No node drives a queued turn, so its steps are written
 * here, as the state machine decides them from `queued`: admitted (its row then holds capacity as
 * `pending`), or ended in words (expired, cancelled, terminated). Each write holds only while the row is
 * still `queued`, so of two nodes acting on one turn exactly one does.
 */
import { and, eq, sql } from 'drizzle-orm';
import { conversations, turns, type Turn, type TurnImage } from '../../store/conversation-schema.ts';
import type { EngineDb } from '../../store/engine-db.ts';
import type { EngineCore } from '../live.ts';
import { QUEUED, transition, type TurnEvent } from './machine.ts';

type Tx = Parameters<Parameters<EngineDb['transaction']>[0]>[0];

/** A prompt's turn stored as waiting: no node, no start. */
export async function insertQueuedTurn(
  tx: Tx | EngineDb,
  row: { conversationId: string; turnNumber: number; prompt: string; images?: TurnImage[] },
): Promise<Turn> {
  const [t] = await tx
    .insert(turns)
    .values({ ...row, status: 'queued', nodeId: null })
    .returning();
  return t!;
}

/** A prompt's turn that fits at once: stored `pending` for `nodeId`, holding its capacity until it runs. */
export async function insertAdmittedTurn(
  tx: Tx | EngineDb,
  row: { conversationId: string; turnNumber: number; prompt: string; images?: TurnImage[]; nodeId: string },
): Promise<Turn> {
  const [t] = await tx
    .insert(turns)
    .values({ ...row, status: 'pending' })
    .returning();
  return t!;
}

/**
 * The queued turn leaves the queue; false when it is no longer queued (cancelled meanwhile). It names
 * the node expected to drive it (`conversation`: the node that runs its conversation's agent), so that
 * node's ownership check never takes it for a turn another node adopted.
 */
export async function admitQueuedTurn(
  tx: Tx | EngineDb,
  turnId: string,
  nodeId: string | 'conversation',
): Promise<boolean> {
  if (transition(QUEUED, { type: 'admitted' }).state.kind !== 'sending') return false;
  const node =
    nodeId === 'conversation'
      ? sql`(SELECT ${conversations.nodeId} FROM ${conversations} WHERE ${conversations.id} = ${turns.conversationId})`
      : nodeId;
  const rows = await tx
    .update(turns)
    .set({ status: 'pending', nodeId: node })
    .where(and(eq(turns.id, turnId), eq(turns.status, 'queued')))
    .returning({ id: turns.id });
  return rows.length === 1;
}

/** The node about to start an admitted turn takes it first (before the turn is live here). */
export async function claimAdmittedTurn(db: EngineDb, turnId: string, nodeId: string): Promise<boolean> {
  const rows = await db
    .update(turns)
    .set({ nodeId })
    .where(and(eq(turns.id, turnId), eq(turns.status, 'pending')))
    .returning({ id: turns.id });
  return rows.length === 1;
}

/**
 * Ends a queued turn as the machine says for `event` (expired, interrupt, terminate, failed): its row
 * and its `turn` stage event with the reason in words. False when the turn had left the queue already.
 */
export async function endQueuedTurn(
  c: EngineCore,
  conversationId: string,
  turnId: string,
  event: Extract<TurnEvent, { type: 'expired' | 'interrupt' | 'terminate' | 'failed' }>,
): Promise<boolean> {
  const fx = transition(QUEUED, event).effects.find((f) => f.type === 'end');
  if (!fx || fx.type !== 'end') return false;
  const r = fx.outcome;
  const reason = r.ok ? null : r.error;
  const rows = await c.d.db
    .update(turns)
    .set({ status: fx.interrupted ? 'interrupted' : 'failed', reason, endedAt: new Date() })
    .where(and(eq(turns.id, turnId), eq(turns.status, 'queued')))
    .returning({ turnNumber: turns.turnNumber });
  const [row] = rows;
  if (!row) return false;
  c.events.stage(conversationId, turnId, 'turn', fx.interrupted ? 'interrupted' : 'failed', {
    turn_id: turnId,
    turn_number: row.turnNumber,
    reason,
    queued: true,
    ...(!r.ok && r.code ? { error: r.code } : {}),
  });
  return true;
}

/** A turn admitted at once whose conversation could not be woken: it never ran, so its row goes. */
export async function releaseAdmittedTurn(db: EngineDb, turnId: string): Promise<void> {
  await db.delete(turns).where(and(eq(turns.id, turnId), eq(turns.status, 'pending')));
}

/** A turn the queue admitted that could not start (its conversation ended, its sandbox would not wake). */
export async function failAdmittedTurn(
  c: EngineCore,
  conversationId: string,
  turn: Turn,
  reason: string,
): Promise<void> {
  const rows = await c.d.db
    .update(turns)
    .set({ status: 'failed', reason, endedAt: new Date() })
    .where(and(eq(turns.id, turn.id), eq(turns.status, 'pending')))
    .returning({ id: turns.id });
  if (rows.length === 0) return;
  c.events.stage(conversationId, turn.id, 'turn', 'failed', {
    turn_id: turn.id,
    turn_number: turn.turnNumber,
    reason,
  });
}
