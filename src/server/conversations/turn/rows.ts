/**
 * The end of a turn row that no state machine holds on this node: a queued turn whose provisioning
 * failed or whose conversation was terminated, a turn a lost node left open. Nothing of it runs here.
 */
import type { EngineDb } from '../../store/engine-db.ts';
import { updateTurn } from '../store.ts';

export async function endUndrivenTurn(
  db: EngineDb,
  turnId: string,
  status: 'failed' | 'interrupted',
  reason: string,
): Promise<void> {
  await updateTurn(db, turnId, { status, reason, endedAt: new Date() });
}
