/**
 * Starting a turn the capacity queue admitted, on the node that drives its conversation: like a new
 * prompt (the sandbox woken if parked, then the prompt sent), or failed in words when it cannot start.
 */
import { accept, type EngineResult } from '../core/engine-errors.ts';
import type { EngineCore, EngineParts } from './live.ts';
import { getConversationForPrompt, getTurn } from './store.ts';
import { claimAdmittedTurn, failAdmittedTurn } from './turn/queued.ts';

export function startAdmitted(
  c: EngineCore,
  p: EngineParts,
  accountId: string,
  id: string,
  turnId: string,
): Promise<EngineResult<void>> {
  return c.lock.run(id, async (): Promise<EngineResult<void>> => {
    const row = await getConversationForPrompt(c.d.db, accountId, id);
    const turn = await getTurn(c.d.db, turnId);
    // Started already, cancelled or ended meanwhile: nothing to do.
    if (!row || !turn || turn.conversationId !== id || turn.status !== 'pending') return accept(undefined);
    const conv = row.conversation;
    const fail = async (reason: string) => {
      await failAdmittedTurn(c, id, turn, reason);
      c.freed();
      return accept(undefined);
    };
    if (conv.status === 'terminated' || conv.status === 'failed') return fail(`the conversation is ${conv.status}`);
    if (!conv.agentId) return fail("the conversation's agent was deleted");
    // Named this node's before it is live here, so the ownership check never lets go of it.
    if (!(await claimAdmittedTurn(c.d.db, turn.id, c.nodeId))) return accept(undefined);
    const awake = await p.provisioner.ensureAwake(row);
    if (!awake.ok) return fail(awake.error.message);
    await p.turns.start(awake.value, turn, {
      turnCount: conv.turnCount + 1,
      ...(conv.firstPrompt ? {} : { firstPrompt: turn.prompt }),
    });
    return accept(undefined);
  });
}
