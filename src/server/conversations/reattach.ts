/**
 * Turn recovery at run time: a turn whose runner dropped waits, reattaches to
 * the same agent process over its journal, and restores its held ask; lost nodes' open work is adopted.
 */
import type { KnownProvider, SandboxError } from '../../sandbox/index.ts';
import { describeError, isTransient } from '../../sandbox/index.ts';
import type { Conversation, Turn } from '../store/conversation-schema.ts';
import type { Adopter, Loss } from '../cluster/ownership.ts';
import { AgentProcess } from './agent-process.ts';
import { storedOutputSeqs } from './events-store.ts';
import { newLive, type ActiveTurn, type EngineCore, type EngineParts, type Live } from './live.ts';
import type { TurnEffect } from './turn/machine.ts';
import { pickSession, type RecoveryFailure } from './recovery.ts';
import { getConversationById, getTurn, openTurns, settleRunningConversation, updateConversation } from './store.ts';
import { endUndrivenTurn } from './turn/rows.ts';

export class TurnRecovery {
  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  /** a dropped connection on the turn's own process (the turn's state decides whether it recovers). */
  recoverable(live: Live, turn: ActiveTurn, proc: AgentProcess, error: SandboxError): boolean {
    return this.c.d.placement.connectionLost(live.adapter.provider, error) && turn.driver === proc && !this.c.stopped;
  }

  /**
   * → recovering. The turn stays busy while the runner is away: its prompt's process keeps running (and
   * journaling) on the daemon. Synchronous up to the first retry, so a reply the old client fails afterwards is ignored.
   */
  enter(live: Live, turn: ActiveTurn, reason: string, proc: AgentProcess | null = null): void {
    if (this.c.stopped) return;
    // A prompt not yet issued when the link dropped is sent under the id it would have had.
    const resendAs = proc?.repeatsWritesOnce ? (turn.prompt?.id ?? proc.client.nextRequestId) : null;
    void this.p.turns
      .dispatch(live, turn, {
        type: 'runner_lost',
        reason,
        now: Date.now(),
        windowMs: this.c.d.config.recoveryWindowMs,
        resendAs,
      })
      .catch((e) => this.c.log.error({ err: e, conversation: live.conversationId }, 'entering recovery failed'));
  }

  /** The `recovery_started` effect: the turn waits for its runner. */
  started(live: Live, turn: ActiveTurn, reason: string, windowMs: number): void {
    this.c.log.info({ conversation: live.conversationId, turn: turn.id, reason }, 'turn waits for its runner');
    this.c.events.stage(live.conversationId, turn.id, 'connection', 'started', {
      reason,
      turn_id: turn.id,
      timeout_ms: windowMs,
    });
  }

  /** The `reattach` effect: one attempt, under the conversation's lock; its result is the turn's next event. */
  async attempt(live: Live, turn: ActiveTurn): Promise<void> {
    const state = turn.state;
    if (state.kind !== 'recovering') return;
    // An attempt belongs to one recovery: once the turn has left it (interrupt, end), its results are dropped.
    const current = () => turn.state === state && live.turn === turn && !this.c.stopped;
    if (!current()) return;
    const r = await this.c.lock.run(live.conversationId, () => this.#reattach(live, turn, state.promptId, current));
    if (r === 'attached' || !current()) return;
    await this.p.turns.dispatch(
      live,
      turn,
      r === 'wait' ? { type: 'reattach_waits' } : { type: 'recovery_failed', failure: r.failure, detail: r.detail },
    );
  }

  /** find the conversation's agent session, attach with stdin, continue the sent prompt over the replay. */
  async #reattach(
    live: Live,
    turn: ActiveTurn,
    promptId: number,
    current: () => boolean,
  ): Promise<'attached' | 'wait' | { failure: RecoveryFailure; detail: string }> {
    const { adapter, handle } = live;
    const waitOr = (e: SandboxError, failure: RecoveryFailure) =>
      this.c.d.placement.hostAway(e) || isTransient(e) ? ('wait' as const) : { failure, detail: describeError(e) };
    const list = await adapter.processes.listSessions(handle);
    if (!current()) return 'wait';
    if (!list.ok) return waitOr(list.error, 'list_sessions_failed');
    // A prompt to resend is built by the turn's start; until it is, the attempt waits.
    const resend = turn.state.kind === 'recovering' && turn.state.resend;
    if (resend && !turn.prompt) return 'wait';
    const row = await getConversationById(this.c.d.db, live.conversationId);
    const turnRow = await getTurn(this.c.d.db, turn.id);
    if (!row || !turnRow) return { failure: 'no_active_session', detail: 'the turn is gone' };
    const sessionId = row.conversation.runtimeSessionId;
    if (!sessionId) return { failure: 'acp_session_unknown', detail: 'the ACP session id was never stored' };
    const picked = pickSession(list.value, live.conversationId, row.sandbox?.agentSessionId ?? null);
    if (!picked)
      return { failure: 'no_active_session', detail: 'the runner has no agent session for this conversation' };
    for (const s of picked.superseded) await this.p.launcher.reapSession(adapter, handle, s.id);

    // Everything stored so far is skipped in the replay, so each line of output is stored exactly once.
    await this.c.events.flush();
    const through = await storedOutputSeqs(this.c.d.db, turn.id);
    if (!current()) return 'wait';
    const pending = turnRow.pendingPermission;
    const re = await AgentProcess.reattach(
      adapter,
      handle,
      {
        sessionId: picked.session.id,
        acp: {
          sessionId,
          promptId,
          replayThrough: through.lines,
          ...(pending && pending.acp_id !== null ? { pendingPermissionId: pending.acp_id } : {}),
        },
      },
      this.p.launcher.hooks(live, through.stderr),
      this.c.log.child({ conversation: live.conversationId }),
    );
    if (!re.ok) {
      const e = re.error;
      if (!('message' in e)) return waitOr(e, 'attach_failed');
      return { failure: 'attach_failed', detail: e.message };
    }
    const { proc, prompt } = re.value;
    if (!current()) {
      await proc.release('recovery was cancelled');
      return 'wait';
    }
    if (proc.command?.replayFrom) {
      await proc.release('the journal no longer starts at byte zero');
      return {
        failure: 'runner_replay_truncated',
        detail: `the runner's journal lost its first ${proc.command.replayFrom} bytes`,
      };
    }
    live.proc = proc;
    const restored = this.p.asks.restored(pending);
    await this.p.turns.reattached(live, turn, proc, restored?.ask ?? null, restored?.remainingMs ?? 0);
    this.c.events.stage(live.conversationId, turn.id, 'reattach', 'done', {
      outcome: 'session_attached',
      matched_by: picked.matchedBy,
      session_id: picked.session.id,
      turn_id: turn.id,
      turn_number: turn.number,
      acp_prompt_id: promptId,
    });
    this.c.events.stage(live.conversationId, turn.id, 'connection', 'done', {
      reason: 'runner_reconnect',
      outcome: 'session_attached',
    });
    this.p.turns.watchReply(live, turn, proc, prompt);
    if (resend) await this.p.turns.resend(live, turn, proc);
    return 'attached';
  }

  /** The `recovery_ended` effect (a failed reconnect included): records how the reconnect ended. */
  ended(live: Live, turn: ActiveTurn, fx: Extract<TurnEffect, { type: 'recovery_ended' }>): void {
    if (fx.outcome === 'failed')
      this.c.log.warn(
        { conversation: live.conversationId, turn: turn.id, failure: fx.failure, detail: fx.detail },
        'turn recovery failed',
      );
    if (fx.waiting || fx.outcome === 'failed') {
      this.c.events.stage(live.conversationId, turn.id, 'connection', 'done', {
        reason: 'runner_reconnect',
        outcome: fx.outcome,
        ...(fx.failure ? { error: fx.failure } : {}),
      });
    }
    if (fx.outcome === 'failed' && fx.waiting) {
      this.c.events.stage(live.conversationId, turn.id, 'reattach', 'failed', {
        turn_id: turn.id,
        error: fx.failure ?? null,
        retryable: false,
      });
    }
  }

  /**
   * Boot trigger: a turn a lost node (a previous process of this server, or another node of the
   * cluster) left running on a detachable provider, its prompt sent, waits for its host like a live drop.
   * The runner may be connected to any node: the reattach goes through the runner host.
   */
  async #recoverAtBoot(c: Conversation, t: Turn, reason: string): Promise<boolean> {
    if (t.status !== 'running' || t.acpPromptId === null) return false;
    const row = await getConversationById(this.c.d.db, c.id);
    const s = row?.sandbox;
    if (!s || s.status !== 'ready' || !this.c.d.placement.detachable(s.provider)) return false;
    const provider = s.provider as KnownProvider;
    if (!this.c.d.registry.isRegistered(provider)) return false;
    const adapter = this.c.d.registry.adapterFor(provider);
    const live = newLive(c, s.id, adapter, adapter.buildHandle(s.name), t.model ?? '');
    const turn = this.p.turns.adopt(live, t);
    // A process this node still holds for the conversation belongs to an earlier turn; the adopted turn's replaces it.
    const stale = this.c.live.get(c.id);
    if (stale) await this.p.launcher.detach(stale, 'a lost node ran a later turn');
    this.c.live.set(c.id, live);
    this.enter(live, turn, reason);
    return true;
  }

  /** What this node does with the open work of lost nodes once it has claimed it (ownership.ts). */
  adopter(): Adopter {
    return {
      provisioning: (c, loss) => this.c.lock.run(c.id, () => this.#failOpen(c, loss)),
      turn: (c, t, loss) =>
        this.c.lock.run(c.id, async () => {
          if (!(await this.#recoverAtBoot(c, t, loss.recoveryReason))) await this.#failOpen(c, loss, t);
        }),
      driving: () => [...this.c.live.values()].flatMap((l) => (l.turn ? [l.turn.id] : [])),
      release: async (turnId) => {
        const live = [...this.c.live.values()].find((l) => l.turn?.id === turnId);
        if (live) await this.p.launcher.detach(live, 'another node adopted the turn');
      },
    };
  }

  /** Fails the open turns a lost node left (just `only`, when given), then the provisioning or the running mark. */
  async #failOpen(c: Conversation, loss: Loss, only?: Turn): Promise<void> {
    const db = this.c.d.db;
    for (const t of only ? [only] : await openTurns(db, c.id)) {
      await endUndrivenTurn(db, t.id, 'failed', loss.turnReason);
      this.c.events.stage(c.id, t.id, 'turn', 'failed', {
        turn_id: t.id,
        turn_number: t.turnNumber,
        reason: loss.turnReason,
      });
    }
    if (c.status === 'pending') {
      await updateConversation(db, c.id, { status: 'failed', failureReason: loss.provisioningReason });
      this.c.changed(c.accountId);
      this.c.events.stage(c.id, null, 'provision', 'failed', { reason: loss.provisioningReason });
    } else if (!this.c.live.get(c.id)?.turn) {
      await settleRunningConversation(db, c.id, {});
    }
  }
}
