/**
 * The turn driver: starts a turn, feeds every event of a turn to the state machine (machine.ts), and
 * carries out the effects it returns, owning the turn's timers. The only writer of a turn's state.
 */
import { imageBlocks } from '../image-blobs.ts';
import { noImagesWords, turnImagesView } from '../prompt-images.ts';
import type { PromptReply } from '../../../acp/index.ts';
import type { Turn } from '../../store/conversation-schema.ts';
import { promptFailureReason } from '../../runtimes/table.ts';
import type { AgentProcess } from '../agent-process.ts';
import { newActiveTurn, type ActiveTurn, type EngineCore, type EngineParts, type Live } from '../live.ts';
import { markConversationRunning, setTurnPromptId, updateTurn, type RunningMark } from '../store.ts';
import { endTurn } from './end.ts';
import {
  heldAsk,
  initialState,
  transition,
  type Ask,
  type Step,
  type TimerName,
  type TurnEffect,
  type TurnEvent,
} from './machine.ts';

/** The turn still needs its prompt built: it is to be written, or a dropped runner's reattach is to write it. */
const awaitsPrompt = (turn: ActiveTurn): boolean =>
  turn.state.kind === 'sending' || (turn.state.kind === 'recovering' && turn.state.resend);

/** Interrupt: how long the agent gets to answer the cancelled prompt before its process is stopped. */
const INTERRUPT_GRACE_MS = 10_000;

export class TurnDriver {
  /** Dispatches started by a timer, still carrying out their effects; stop() waits for them. */
  readonly #fired = new Set<Promise<unknown>>();

  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  /** Resolves once no timer-started dispatch is running. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#fired]);
  }

  /**
   * The one way a turn changes: the machine decides, the state is set, then the effects run in order
   * (those that need no I/O synchronously, before this returns its promise). Resolves with the step
   * once every effect is done.
   */
  async dispatch(live: Live, turn: ActiveTurn, event: TurnEvent): Promise<Step> {
    const step = transition(turn.state, event);
    if (step.ignored) {
      this.c.log.debug(
        {
          conversation: live.conversationId,
          turn: turn.id,
          state: turn.state.kind,
          event: event.type,
          why: step.ignored,
        },
        'turn event ignored',
      );
      return step;
    }
    turn.state = step.state;
    // The process the effects act on is the one there when the event happened.
    const proc = live.proc;
    for (const fx of step.effects) {
      const pending = this.#effect(live, turn, fx, proc);
      if (pending) await pending;
    }
    return step;
  }

  #effect(live: Live, turn: ActiveTurn, fx: TurnEffect, proc: AgentProcess | null): Promise<unknown> | undefined {
    switch (fx.type) {
      case 'arm':
        this.#arm(live, turn, fx.timer, fx.ms);
        return undefined;
      case 'disarm':
        turn.timers.disarm(fx.timer);
        return undefined;
      case 'disown':
        turn.driver = null;
        return undefined;
      case 'settle_ask':
        return this.p.asks.settle(live, turn, fx.ask, fx.how);
      case 'cancel_agent':
        return proc?.client.cancel();
      case 'stop_agent':
        return proc?.stop();
      case 'release_agent': {
        const current = live.proc;
        live.proc = null;
        return current?.release(fx.why);
      }
      case 'recovery_started':
        this.p.recovery.started(live, turn, fx.reason, fx.windowMs);
        return undefined;
      case 'recovery_ended':
        this.p.recovery.ended(live, turn, fx);
        return undefined;
      case 'reattach':
        return this.p.recovery.attempt(live, turn);
      case 'end':
        return endTurn(this.c, live, turn, fx);
    }
  }

  /** Arms a timer for `ms`, or for its configured length; its firing is an event like any other. */
  #arm(live: Live, turn: ActiveTurn, timer: TimerName, ms: number | undefined): void {
    const cfg = this.c.d.config;
    switch (timer) {
      case 'silence':
        // Off when configured so; a stopping engine starts no new watch.
        if (cfg.turnSilenceTimeoutMs <= 0 || this.c.stopped) return;
        turn.timers.arm(timer, ms ?? cfg.turnSilenceTimeoutMs, () =>
          this.#fire(live, turn, {
            type: 'silence_due',
            quietMs: Date.now() - turn.lastHeardAt,
            limitMs: cfg.turnSilenceTimeoutMs,
            toolRunning: live.tools.anyRunning(),
            stderrTail: turn.stderrTail,
          }),
        );
        return;
      case 'ask': {
        const requestId = heldAsk(turn.state)?.requestId;
        if (requestId === undefined) return;
        turn.timers.arm(timer, ms ?? cfg.askTimeoutMs, () => this.#fire(live, turn, { type: 'ask_due', requestId }));
        return;
      }
      case 'retry':
        turn.timers.arm(
          timer,
          ms ?? cfg.recoveryRetryMs,
          () => {
            // A stopping engine leaves the turn to whichever node adopts it.
            if (!this.c.stopped) this.#fire(live, turn, { type: 'retry_due', now: Date.now() });
          },
          true,
        );
        return;
      case 'boundary':
        turn.timers.arm(
          timer,
          ms ?? cfg.replayBoundaryTimeoutMs,
          () =>
            this.#fire(live, turn, {
              type: 'boundary_due',
              boundarySeen: turn.driver?.client.boundarySeen ?? true,
              timeoutMs: cfg.replayBoundaryTimeoutMs,
            }),
          true,
        );
        return;
      case 'grace':
        turn.timers.arm(timer, ms ?? INTERRUPT_GRACE_MS, () => this.#fire(live, turn, { type: 'grace_due' }));
        return;
    }
  }

  #fire(live: Live, turn: ActiveTurn, event: TurnEvent): void {
    const run = this.dispatch(live, turn, event).catch((e) =>
      this.c.log.error({ err: e, conversation: live.conversationId, event: event.type }, 'a turn timer failed'),
    );
    this.#fired.add(run);
    void run.finally(() => this.#fired.delete(run));
  }

  /** Sends the prompt; its reply ends the turn asynchronously. */
  async start(live: Live, row: Turn, mark: RunningMark = {}): Promise<void> {
    const proc = live.proc;
    const startedAt = row.status === 'running' && row.startedAt ? row.startedAt : new Date();
    const turn = newActiveTurn(row, startedAt.getTime(), proc, initialState(null));
    live.turn = turn;
    // Tool calls are judged within their turn; an agent may reuse ids in a later session.
    live.tools.clear();
    // The prompt's POST is answered before this: its reply leaves before the writes below take the
    // event loop (PGlite runs each statement on this thread).
    await new Promise((r) => setImmediate(r));
    // Both marks are independent writes: issued together, they cost one wait before the prompt goes out.
    try {
      await Promise.all([
        row.status === 'running' && row.model === live.model
          ? null
          : updateTurn(this.c.d.db, row.id, { status: 'running', startedAt, model: live.model, nodeId: this.c.nodeId }),
        markConversationRunning(this.c.d.db, live.conversationId, startedAt, mark),
      ]);
    } catch (e) {
      // The prompt was already answered "queued": the turn ends failed instead of staying open.
      await this.dispatch(live, turn, {
        type: 'failed',
        error: `the turn could not be marked running: ${e instanceof Error ? e.message : String(e)}`,
      });
      return;
    }
    this.c.events.stage(live.conversationId, row.id, 'turn', 'started', {
      turn_id: row.id,
      turn_number: row.turnNumber,
      mode: 'prompt',
      // References only: the bytes are fetched from each url with the reader's key.
      ...(row.images.length > 0 ? { images: turnImagesView(live.conversationId, row.id, row.images) } : {}),
    });
    // The prompt's POST is answered before this point: the turn may have been interrupted or ended meanwhile.
    await this.dispatch(live, turn, { type: 'marked' });
    if (!awaitsPrompt(turn)) return;
    if (!proc) {
      await this.dispatch(live, turn, { type: 'failed', error: 'the agent process is not running' });
      return;
    }
    let content = this.p.launcher.promptFor(live, row.prompt);
    if (row.images.length > 0) {
      // The live agent's own answer decides: a runtime that did not advertise images gets none.
      if (proc.client.agentCapabilities?.promptCapabilities?.image !== true) {
        await this.dispatch(live, turn, { type: 'failed', error: noImagesWords(live.runtime) });
        return;
      }
      const blocks = await imageBlocks(this.c.d.images, row.images);
      if (!blocks.ok) {
        await this.dispatch(live, turn, { type: 'failed', error: blocks.message });
        return;
      }
      if (!awaitsPrompt(turn)) return; // interrupted while the images were read
      content = [
        ...(typeof content === 'string' ? [{ type: 'text' as const, text: content }] : content),
        ...blocks.value,
      ];
    }
    turn.prompt = { content, id: null };
    // The runner dropped before the write began: the reattach writes the prompt (TurnRecovery, resend below).
    if (turn.state.kind !== 'sending' || turn.driver !== proc) return;
    const call = proc.client.prompt(content);
    if (!call.ok) {
      await this.dispatch(live, turn, { type: 'failed', error: call.error.message });
      return;
    }
    turn.prompt = { content, id: call.value.id };
    const sent = await call.value.sent;
    // A runner lost during the write handed the turn to recovery: the write's outcome is its business now.
    if (turn.driver !== proc) return;
    // The state changes before any await: from here on a dropped runner socket means recovery, not failure.
    await this.dispatch(live, turn, { type: 'prompt_written', promptId: sent.ok ? call.value.id : null });
    if (sent.ok) await setTurnPromptId(this.c.d.db, row.id, call.value.id);
    this.watchReply(live, turn, proc, call.value.done);
  }

  /**
   * After a reattach, writes again the prompt whose write the dropped runner left unconfirmed, under its
   * first write id: a runner that took the first write acknowledges this one without delivering it twice.
   * Its reply is already watched (the reattach's); a failed write fails that reply, which ends the turn.
   */
  async resend(live: Live, turn: ActiveTurn, proc: AgentProcess): Promise<void> {
    const state = turn.state;
    const prompt = turn.prompt;
    if ((state.kind !== 'sending' && state.kind !== 'asking') || !prompt) return;
    const id = proc.client.attachedPromptId;
    if (id === null) return;
    turn.prompt = { content: prompt.content, id };
    const sent = await proc.client.repeatPrompt(prompt.content);
    if (turn.driver !== proc) return;
    await this.dispatch(live, turn, { type: 'prompt_written', promptId: sent.ok ? id : null });
    if (sent.ok) await setTurnPromptId(this.c.d.db, turn.id, id);
  }

  /** Makes a turn a lost node left running (its prompt sent) this conversation's active turn. */
  adopt(live: Live, row: Turn): ActiveTurn {
    const turn = newActiveTurn(
      row,
      (row.startedAt ?? new Date()).getTime(),
      null,
      initialState(row.acpPromptId),
      Date.now(),
    );
    live.turn = turn;
    return turn;
  }

  /** A reattach took over `proc`: it drives the turn from now on, with the held ask restored. */
  reattached(live: Live, turn: ActiveTurn, proc: AgentProcess, ask: Ask | null, askRemainingMs: number): Promise<Step> {
    turn.driver = proc;
    return this.dispatch(live, turn, { type: 'reattached', ask, askRemainingMs });
  }

  /** The prompt's reply is an event of the turn, unless another process has taken the turn over meanwhile. */
  watchReply(
    live: Live,
    turn: ActiveTurn,
    proc: AgentProcess,
    done: Promise<{ ok: true; value: PromptReply } | { ok: false; error: { code: string; message: string } }>,
  ): void {
    void done
      .then((r) => {
        if (turn.driver !== proc) return undefined;
        if (!r.ok && r.error.code === 'runner_replay_line_too_large')
          return this.dispatch(live, turn, {
            type: 'recovery_failed',
            failure: 'runner_replay_line_too_large',
            detail: r.error.message,
          });
        return this.dispatch(live, turn, {
          type: 'replied',
          outcome: r.ok
            ? { ok: true, stopReason: r.value.stopReason, usage: r.value.usage }
            : { ok: false, error: promptFailureReason(live.runtime, r.error, live.model) },
        });
      })
      .catch((e) => this.c.log.error({ err: e, conversation: live.conversationId }, 'finishing a turn failed'));
  }

  /** A client interrupts: session/cancel, and the agent's process stopped after a grace if it does not answer. */
  async interrupt(live: Live, turn: ActiveTurn): Promise<void> {
    await this.dispatch(live, turn, { type: 'interrupt', hasProcess: live.proc !== null });
  }

  // What the agent says during a turn is recorded on it (not state: the silence guard and the end read it).

  /** A line from the agent: it is not silent, and it may say the model API refused the credential. */
  heard(live: Live, message: unknown): void {
    const turn = live.turn;
    if (!turn) return;
    turn.lastHeardAt = Date.now();
    turn.refusal.observe(message);
  }

  /** What a `usage_update` said (context window, cost). */
  usage(live: Live, reported: ActiveTurn['reported']): void {
    if (live.turn) live.turn.reported = reported;
  }

  /** The end of the agent's stderr during the turn. */
  stderr(live: Live, text: string): void {
    if (live.turn) live.turn.stderrTail = (live.turn.stderrTail + text).slice(-2000);
  }
}
