/**
 * Permission requests of a turn: the policy's verdict, the held ask (its state and
 * deadline are the turn machine's), the first answer winning, and a held ask restored after recovery.
 */
import { randomBytes } from 'node:crypto';
import type { RequestPermissionRequest } from '@agentclientprotocol/sdk';
import type { HeldPermission } from '../../acp/index.ts';
import type { PendingPermission } from '../store/conversation-schema.ts';
import type { AgentProcess } from './agent-process.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import { permissionWasAsked } from './events-store.ts';
import type { ActiveTurn, EngineCore, EngineParts, Live } from './live.ts';
import { heldAsk, type Ask, type AskResolution } from './turn/machine.ts';
import { allowOutcome, denyOutcome, verdictFor } from './policy.ts';
import { permissionRemainingMs, storedOptions } from './recovery.ts';
import { updateConversation, updateTurn } from './store.ts';

export class Permissions {
  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  /**
   * The agent asked: decide by policy, or hold the ask (running → asking) until answered or timed out.
   * The call is judged by what its updates said so far (Claude names its tool in the first `tool_call`
   * only) merged with what the request itself says.
   */
  async request(live: Live, proc: AgentProcess, held: HeldPermission): Promise<void> {
    const params = held.params as RequestPermissionRequest;
    const view = live.tools.apply({ ...params.toolCall, status: null });
    const title = params.toolCall.title || view.title || null;
    const kind = params.toolCall.kind ?? view.kind;
    const tool = { toolName: view.tool_name, title, kind };
    // Shown to people: the title says what runs (Claude's carries the command); the tool name is kept beside it.
    const named = title ?? view.tool_name ?? kind;
    let verdict = verdictFor(live.policy, tool);
    const requestId = `${String(held.id)}.${randomBytes(8).toString('hex')}`;
    const turn = live.turn;
    // An allow with no allow_once on offer is left to a person: an "always" answer would outlive the policy.
    const allowed = verdict === 'auto_allow' ? allowOutcome(params.options) : null;
    if (verdict === 'auto_allow' && !allowed) verdict = 'ask';
    // Held only where the turn's state can hold it (running → asking); otherwise answered as if no turn ran.
    const holding =
      verdict === 'ask' && turn
        ? !(
            await this.p.turns.dispatch(live, turn, {
              type: 'asked',
              ask: { requestId, acpId: held.id, options: params.options },
              timeoutMs: this.c.d.config.askTimeoutMs,
            })
          ).ignored
        : false;
    if (!holding || !turn) {
      const outcome = verdict === 'auto_allow' && allowed && turn ? allowed : denyOutcome(params.options);
      live.resolved.add(requestId);
      // Appended before the agent hears the answer, as a person's answer is: its reaction (even the end
      // of the turn, whose event the turn's end statement stores at once) must follow it in the log.
      this.c.events.stage(live.conversationId, turn?.id ?? null, 'permission', 'done', {
        request_id: requestId,
        tool: named,
        tool_name: view.tool_name,
        outcome: verdict === 'ask' ? 'turn_ended' : verdict,
        option_id: outcome.outcome === 'selected' ? outcome.optionId : null,
      });
      const sent = await proc.client.answerPermission(held.id, outcome);
      if (!sent.ok)
        this.c.log.warn(
          { conversation: live.conversationId, err: sent.error.message },
          'the automatic permission answer did not reach the agent',
        );
      return;
    }
    const askedAt = new Date();
    const pending: PendingPermission = {
      request_id: requestId,
      acp_id: held.id,
      tool: named ?? 'tool',
      kind,
      options: params.options.map((o) => ({ option_id: o.optionId, name: o.name, kind: o.kind })),
      asked_at: askedAt.toISOString(),
    };
    await updateTurn(this.c.d.db, turn.id, { pendingPermission: pending });
    this.c.events.stage(live.conversationId, turn.id, 'permission', 'started', {
      request_id: requestId,
      tool: pending.tool,
      tool_name: view.tool_name,
      kind,
      options: pending.options,
      timeout_ms: this.c.d.config.askTimeoutMs,
    });
  }

  /** A client's answer to the held ask of the conversation this node drives. */
  async answer(
    live: Live | undefined,
    conversationId: string,
    requestId: string,
    optionId: string,
  ): Promise<EngineResult<void>> {
    const turn = live?.turn;
    if (turn?.state.kind === 'recovering') {
      return refuse(
        'runner_offline',
        "The sandbox's runner is reconnecting; answer again once it is back (the request keeps its deadline).",
      );
    }
    const ask = turn ? heldAsk(turn.state) : null;
    if (!live || !turn || !ask || ask.requestId !== requestId) {
      if (live?.resolved.has(requestId) || (await permissionWasAsked(this.c.d.db, conversationId, requestId))) {
        return refuse(
          'permission_request_resolved',
          'the permission request was already answered, timed out, or its turn ended',
        );
      }
      return refuse('not_found', 'permission request not found');
    }
    if (!ask.options.some((o) => o.optionId === optionId)) {
      return refuse('unknown_option', `option_id must be one of: ${ask.options.map((o) => o.optionId).join(', ')}`);
    }
    const step = await this.p.turns.dispatch(live, turn, { type: 'answered', requestId, optionId });
    return step.ignored
      ? refuse('permission_request_resolved', 'the permission request was already resolved')
      : accept(undefined);
  }

  /**
   * The `settle_ask` effect (asking → running): records how the held ask ended — answered with an
   * option, timed out (denied), or cancelled by an interrupt — and, unless cancelled, answers the agent.
   */
  async settle(live: Live, turn: ActiveTurn, ask: Ask, how: AskResolution): Promise<void> {
    const requestId = ask.requestId;
    live.resolved.add(requestId);
    const outcome =
      typeof how === 'object'
        ? { outcome: 'selected' as const, optionId: how.optionId }
        : how === 'timeout'
          ? denyOutcome(ask.options)
          : { outcome: 'cancelled' as const };
    // Recorded before the agent hears the answer: its reaction (even the end of the turn) must follow
    // the permission's end in the event log, however fast the agent replies.
    await updateTurn(this.c.d.db, turn.id, { pendingPermission: null });
    this.c.events.stage(live.conversationId, turn.id, 'permission', 'done', {
      request_id: requestId,
      outcome: typeof how === 'object' ? 'answered' : how,
      option_id: outcome.outcome === 'selected' ? outcome.optionId : null,
    });
    if (how !== 'cancelled') {
      const sent = await live.proc?.client.answerPermission(ask.acpId, outcome);
      if (sent && !sent.ok)
        this.c.log.warn(
          { conversation: live.conversationId, err: sent.error.message },
          'the permission answer did not reach the agent',
        );
    }
    await updateConversation(this.c.d.db, live.conversationId, { lastActiveAt: new Date() });
  }

  /** the held request a reattach restores, with what is left of its ORIGINAL deadline (a reconnect never extends it). */
  restored(pending: PendingPermission | null): { ask: Ask; remainingMs: number } | null {
    if (!pending || pending.acp_id === null) return null;
    return {
      ask: { requestId: pending.request_id, acpId: pending.acp_id, options: storedOptions(pending) },
      remainingMs: permissionRemainingMs(pending, this.c.d.config.askTimeoutMs, Date.now()),
    };
  }
}
