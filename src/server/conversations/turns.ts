/**
 * The turn state machine: a turn is sent, runs, may ask (a held permission), may recover (its runner
 * dropped) or be interrupted, and ends exactly once as completed, failed or interrupted.
 */
import type { Turn } from '../store/conversation-schema.ts';
import type { PromptReply, PromptUsage } from '../../acp/index.ts';
import {
  endTurnRows,
  endTurnRowsWithEvent,
  markConversationRunning,
  setTurnPromptId,
  updateTurn,
  type RunningMark,
  type TurnEnd,
} from './store.ts';
import { turnUsage } from './usage.ts';
import { ACP_AUTH_REQUIRED, promptFailureReason } from '../agents/runtimes.ts';
import type { AgentProcess } from './agent-process.ts';
import {
  newActiveTurn,
  stopTurnTimers,
  type ActiveTurn,
  type EngineCore,
  type EngineParts,
  type Live,
} from './live.ts';

/**
 * The phases of an active turn, read from its fields:
 *   sending → running (the prompt reached the agent) → ended
 *   running ⇄ asking (a permission request is held; answer, timeout or interrupt resolve it)
 *   running/asking → recovering (the runner dropped; reattach returns to running, failure ends it)
 *   any → interrupting (session/cancel sent; the reply, or the grace timeout, ends it)
 */
export type TurnPhase = 'sending' | 'running' | 'asking' | 'recovering' | 'interrupting';

export function phaseOf(t: ActiveTurn): TurnPhase {
  if (t.interrupted) return 'interrupting';
  if (t.recovery) return 'recovering';
  if (t.ask) return 'asking';
  if (t.acpPromptId === null) return 'sending';
  return 'running';
}

/** How a turn ended, as the agent's reply (or its absence) says. */
export type TurnOutcome =
  | { ok: true; stopReason: string; usage?: PromptUsage | undefined }
  | { ok: false; error: string; code?: string };

/** What the agent's stderr says when a model API refused its credential. */
const AUTH_FAILURE =
  /\b(401|403|unauthori[sz]ed|authentication|invalid[ _-]?api[ _-]?key|api[ _-]?key (is )?(missing|invalid|not set))/i;

/** Why a silent turn was abandoned; the credential is blamed only when the agent's own stderr says so. */
export function silenceReason(quietMs: number, stderrTail: string): string {
  const base = `the agent sent nothing for ${Math.round(quietMs / 1000)} s with no tool call running; the turn was abandoned`;
  if (AUTH_FAILURE.test(stderrTail)) {
    return `${base} (its stderr reports an authentication failure: check the runtime's model credential): ${stderrTail.trim().slice(-300)}`;
  }
  return `${base} (the agent may be stuck, or its model API unreachable; FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS sets how long it may be silent)`;
}

/** Interrupt: how long the agent gets to answer the cancelled prompt before its process is stopped. */
const INTERRUPT_GRACE_MS = 10_000;

export class TurnMachine {
  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  /** Sends the prompt; its reply ends the turn asynchronously. */
  async start(live: Live, turn: Turn, mark: RunningMark = {}): Promise<void> {
    const proc = live.proc;
    const startedAt = turn.status === 'running' && turn.startedAt ? turn.startedAt : new Date();
    const active = newActiveTurn(turn, startedAt.getTime(), proc);
    active.acpPromptId = null;
    live.turn = active;
    // Tool calls are judged within their turn; an agent may reuse ids in a later session.
    live.tools.clear();
    // The prompt's POST is answered before this: its reply leaves before the writes below take the
    // event loop (PGlite runs each statement on this thread).
    await new Promise((r) => setImmediate(r));
    // Both marks are independent writes: issued together, they cost one wait before the prompt goes out.
    try {
      await Promise.all([
        turn.status === 'running' && turn.model === live.model
          ? null
          : updateTurn(this.c.d.db, turn.id, { status: 'running', startedAt, model: live.model }),
        markConversationRunning(this.c.d.db, live.conversationId, startedAt, mark),
      ]);
    } catch (e) {
      // The prompt was already answered "queued": the turn ends failed instead of staying open.
      await this.finish(live, active, {
        ok: false,
        error: `the turn could not be marked running: ${e instanceof Error ? e.message : String(e)}`,
      });
      return;
    }
    this.c.events.stage(live.conversationId, turn.id, 'turn', 'started', {
      turn_id: turn.id,
      turn_number: turn.turnNumber,
      mode: 'prompt',
    });
    // The prompt's POST is answered before this point: the turn may have been interrupted or ended meanwhile.
    if (live.turn !== active) return;
    if (active.interrupted) {
      await this.finish(live, active, { ok: false, error: 'interrupted' });
      return;
    }
    if (!proc) {
      await this.finish(live, active, { ok: false, error: 'the agent process is not running' });
      return;
    }
    const call = proc.client.prompt(this.p.launcher.promptFor(live, turn.prompt));
    if (!call.ok) {
      await this.finish(live, active, { ok: false, error: call.error.message });
      return;
    }
    const sent = await call.value.sent;
    if (sent.ok) {
      // Set before any await: from here on a dropped runner socket means recovery, not failure.
      active.acpPromptId = call.value.id;
      await setTurnPromptId(this.c.d.db, turn.id, call.value.id);
    }
    this.watchSilence(live, active, this.c.d.config.turnSilenceTimeoutMs);
    this.endOnReply(live, active, proc, call.value.done);
  }

  /** Ends the turn with the prompt's reply, unless another process has taken the turn over meanwhile. */
  endOnReply(
    live: Live,
    turn: ActiveTurn,
    proc: AgentProcess,
    done: Promise<{ ok: true; value: PromptReply } | { ok: false; error: { code: string; message: string } }>,
  ): void {
    void done
      .then((r) => {
        if (turn.driver !== proc) return undefined;
        if (!r.ok && r.error.code === 'runner_replay_line_too_large')
          return this.p.recovery.fail(live, turn, 'runner_replay_line_too_large', r.error.message);
        return this.finish(
          live,
          turn,
          r.ok
            ? { ok: true, stopReason: r.value.stopReason, usage: r.value.usage }
            : { ok: false, error: promptFailureReason(live.runtime, r.error, live.model) },
        );
      })
      .catch((e) => this.c.log.error({ err: e, conversation: live.conversationId }, 'finishing a turn failed'));
  }

  /**
   * An agent that sends nothing for the silence timeout (an adapter stuck retrying an unreachable
   * model API, say) would hold the turn forever: the turn fails with the reason and the process is
   * stopped, so the next prompt starts a fresh one. A held permission request has its own timeout, and
   * a tool call still running is not silence (Claude sends nothing while a long command runs).
   */
  watchSilence(live: Live, turn: ActiveTurn, delayMs: number): void {
    const limit = this.c.d.config.turnSilenceTimeoutMs;
    if (limit <= 0 || this.c.stopped) return;
    turn.silenceTimer = setTimeout(() => {
      turn.silenceTimer = null;
      if (live.turn !== turn) return;
      const quiet = Date.now() - turn.lastHeardAt;
      const phase = phaseOf(turn);
      // A held permission, a runner recovery and an interrupt have their own deadlines; silence restarts after them.
      const ownDeadline = phase === 'asking' || phase === 'recovering' || phase === 'interrupting';
      const working = live.tools.anyRunning();
      if (ownDeadline || working || quiet < limit) {
        this.watchSilence(live, turn, ownDeadline || working ? limit : limit - quiet);
        return;
      }
      const proc = live.proc;
      void this.finish(live, turn, { ok: false, error: silenceReason(quiet, turn.stderrTail), code: 'agent_silent' })
        .then(async () => {
          if (proc) {
            await proc.client.cancel();
            await proc.stop();
          }
        })
        .catch((e) =>
          this.c.log.error({ err: e, conversation: live.conversationId }, 'abandoning a silent turn failed'),
        );
    }, delayMs);
  }

  /** The one end of a turn: rows settle, then the stage event is published. A second call does nothing. */
  async finish(live: Live, turn: ActiveTurn, r: TurnOutcome): Promise<void> {
    if (live.turn !== turn) return;
    const refused = r.ok ? turn.refusal.failure : null;
    if (refused)
      r = {
        ok: false,
        error: promptFailureReason(live.runtime, { message: refused, rpc: { code: ACP_AUTH_REQUIRED } }, live.model),
      };
    stopTurnTimers(turn);
    if (turn.ask) {
      clearTimeout(turn.ask.timer);
      live.resolved.add(turn.ask.requestId);
      this.c.events.stage(live.conversationId, turn.id, 'permission', 'done', {
        request_id: turn.ask.requestId,
        outcome: 'turn_ended',
        option_id: null,
      });
      turn.ask = null;
    }
    live.turn = null;
    const endedAt = new Date();
    const base = { turn_id: turn.id, turn_number: turn.number };
    const duration = endedAt.getTime() - turn.startedAt;
    let state: 'interrupted' | 'done' | 'failed';
    let data: Record<string, unknown>;
    let patch: Partial<Turn>;
    if (turn.interrupted) {
      state = 'interrupted';
      data = { ...base, ...(r.ok ? { stop_reason: r.stopReason } : {}) };
      patch = { status: 'interrupted', stopReason: r.ok ? r.stopReason : null };
    } else if (r.ok && r.stopReason !== 'refusal' && r.stopReason !== 'cancelled') {
      state = 'done';
      data = { ...base, stop_reason: r.stopReason };
      patch = { status: 'completed', stopReason: r.stopReason };
    } else {
      const reason = r.ok ? `stop reason ${r.stopReason}` : r.error;
      state = 'failed';
      data = { ...base, reason, ...(!r.ok && r.code ? { error: r.code } : {}) };
      patch = { status: 'failed', stopReason: r.ok ? r.stopReason : null, reason };
    }
    const usage = turnUsage(r.ok ? r.usage : undefined, turn.reported);
    if (usage) data.usage = usage;
    // The turn's events are stored before its row says it ended, so a client polling the turn reads
    // the whole answer; the rows settle with the stage event in one statement, so a client acting on
    // the event reads them settled, and it skips the batching delay, since clients wait for it.
    const end: TurnEnd = {
      turnId: turn.id,
      patch: { ...patch, endedAt, pendingPermission: null, ...(usage ? { usage } : {}) },
      conversationId: live.conversationId,
      settle: { lastActiveAt: endedAt, acpNextId: live.proc?.client.nextRequestId ?? null },
      usage: usage ?? null,
    };
    const event = this.c.events.stageEvent(live.conversationId, turn.id, 'turn', state, data, duration);
    try {
      await this.c.events.storeWith(() => endTurnRowsWithEvent(this.c.d.db, end, event));
    } catch (e) {
      // Nothing of that statement was stored: the rows end alone, and the event takes the log's way
      // (a row it cannot store is dropped there, as any event's, instead of keeping the turn open).
      this.c.log.warn(
        { err: e instanceof Error ? e.message : String(e), conversation: live.conversationId },
        'turn end with its event failed; stored apart',
      );
      await endTurnRows(this.c.d.db, end);
      this.c.events.append(event);
      this.c.events.flushSoon();
    }
    if (!live.proc?.alive && this.c.live.get(live.conversationId) === live) this.c.live.delete(live.conversationId);
  }

  /** → interrupting: cancels recovery and the held ask, sends session/cancel, stops the agent after a grace. */
  async interrupt(live: Live, turn: ActiveTurn): Promise<void> {
    if (turn.interrupted) return;
    turn.interrupted = true;
    if (turn.recovery) {
      // Interrupt cancels recovery: the turn ends now; the detached agent is reaped at the next launch.
      this.p.recovery.cancel(live, turn, 'cancelled');
    }
    if (turn.ask) await this.p.asks.resolve(live, turn.ask.requestId, 'cancelled');
    const proc = live.proc;
    if (!proc) {
      await this.finish(live, turn, { ok: false, error: 'interrupted' });
      return;
    }
    // session/cancel, and every held permission answered `cancelled` (acp.md §5).
    await proc.client.cancel();
    turn.interruptTimer = setTimeout(() => {
      // The agent ignored the cancel: stop its process, which ends the turn.
      if (live.turn === turn) void proc.stop().then(() => this.finish(live, turn, { ok: false, error: 'interrupted' }));
    }, INTERRUPT_GRACE_MS);
  }
}
