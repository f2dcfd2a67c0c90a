/**
 * The turn's state machine: what a turn can be (TurnState), what can happen to it (TurnEvent), and the
 * one pure function that decides, for every pair, the next state and what the engine must do about it.
 *
 * Nothing here touches a clock, a timer, the database or a process: `transition` returns effects and
 * the turn driver (driver.ts) carries them out. A pair that cannot happen, or that comes too late (a
 * timer or a reply racing the turn's end), leaves the state as it is, does nothing, and says why in
 * `ignored`; the driver logs that reason at debug level. No pair throws: the events come from timers,
 * sockets and processes, and a late one must never take the engine down.
 *
 * Over 400 lines because every (state, event) pair is decided here, in one place, queued turns included.
 */
import type { PermissionOption } from '@agentclientprotocol/sdk';
import type { JsonRpcId, PromptUsage } from '../../../acp/index.ts';
import type { RecoveryFailure } from '../recovery.ts';

/** A permission request held for a person to answer. */
export interface Ask {
  readonly requestId: string;
  readonly acpId: JsonRpcId;
  readonly options: readonly PermissionOption[];
}

/** How a turn ended, as the agent's reply (or its absence) says. */
export type TurnOutcome =
  | { ok: true; stopReason: string; usage?: PromptUsage | undefined }
  | { ok: false; error: string; code?: string };

/**
 * The five timers a turn can have running. Each is armed and disarmed only through effects:
 * `silence` the silence guard, `ask` a held permission's deadline, `retry` the next reattach attempt of a
 * recovery (the recovery window is its deadline), `boundary` the replay boundary of a reattach, `grace`
 * how long an interrupted agent gets before its process is stopped.
 */
export type TimerName = 'silence' | 'ask' | 'retry' | 'boundary' | 'grace';
export const TIMERS: readonly TimerName[] = ['silence', 'ask', 'retry', 'boundary', 'grace'];

export type TurnState =
  /** The turn waits in its account's capacity queue: nothing of it reached a sandbox. */
  | { readonly kind: 'queued' }
  /** The turn is this conversation's; its prompt has not reached the agent's stdin yet. */
  | { readonly kind: 'sending' }
  /** The prompt reached the agent (its JSON-RPC id is known): the reply ends the turn. */
  | { readonly kind: 'running'; readonly promptId: number }
  /** A permission request is held; `promptId` is null when the agent asked before its prompt's write was confirmed. */
  | { readonly kind: 'asking'; readonly promptId: number | null; readonly ask: Ask }
  /** The runner dropped: the turn waits for it until `deadline`, reattaching to the same agent process. */
  | {
      readonly kind: 'recovering';
      readonly promptId: number;
      /**
       * The prompt's write was not confirmed when the runner dropped (it may or may not have reached the
       * agent): the reattach writes it again under its write id, which the runner delivers at most once.
       */
      readonly resend: boolean;
      /** The ask held when the runner dropped; it comes back from the stored row, with its first deadline. */
      readonly ask: Ask | null;
      readonly deadline: number;
      readonly windowMs: number;
    }
  /** session/cancel was sent: the reply, or the grace timer, ends the turn as interrupted. */
  | { readonly kind: 'interrupting'; readonly promptId: number | null; readonly ask: Ask | null }
  /** The turn's end is recorded (or being recorded): nothing changes it any more. */
  | { readonly kind: 'ended' }
  /** This node let go of the turn without ending it (shutdown, another node adopted it). */
  | { readonly kind: 'detached' };

export type TurnKind = TurnState['kind'];
export const TURN_KINDS: readonly TurnKind[] = [
  'queued',
  'sending',
  'running',
  'asking',
  'recovering',
  'interrupting',
  'ended',
  'detached',
];

export type AskResolution = 'timeout' | 'cancelled' | { readonly optionId: string };

export type TurnEvent =
  /** Capacity freed for a queued turn: it leaves the queue and starts like a new prompt. */
  | { readonly type: 'admitted' }
  /** A queued turn waited longer than the queue's expiry. */
  | { readonly type: 'expired'; readonly waitedMs: number }
  /** The turn's running marks are stored (the prompt is about to be written). */
  | { readonly type: 'marked' }
  /** The prompt's write finished: its id when the agent's stdin took it, null when the write failed. */
  | { readonly type: 'prompt_written'; readonly promptId: number | null }
  /** The driving process answered the prompt (or its client failed it). */
  | { readonly type: 'replied'; readonly outcome: TurnOutcome }
  /** The engine gives the turn up: its marks failed, no agent process, the sandbox's lifetime ran out. */
  | { readonly type: 'failed'; readonly error: string; readonly code?: string }
  /** The conversation is terminated. */
  | { readonly type: 'terminate' }
  /** A client interrupts; `hasProcess` says whether an agent process is there to cancel. */
  | { readonly type: 'interrupt'; readonly hasProcess: boolean }
  /** The agent asks a permission the policy leaves to a person. */
  | { readonly type: 'asked'; readonly ask: Ask; readonly timeoutMs: number }
  /** A person answered the held request. */
  | { readonly type: 'answered'; readonly requestId: string; readonly optionId: string }
  /** The held request's deadline passed. */
  | { readonly type: 'ask_due'; readonly requestId: string }
  /** The connection to the runner of the driving process dropped, recoverably (see TurnRecovery.recoverable). */
  | {
      readonly type: 'runner_lost';
      readonly reason: string;
      readonly now: number;
      readonly windowMs: number;
      /**
       * The JSON-RPC id the turn's prompt is (or was to be) written under, when its write is unconfirmed and
       * the runner writes a repeated write id once: the prompt can then be sent again after the reconnect.
       * Null when it cannot (an older runner): an unconfirmed prompt's turn fails, as a repeat could deliver it twice.
       */
      readonly resendAs: number | null;
    }
  /** The recovery's retry timer fired. */
  | { readonly type: 'retry_due'; readonly now: number }
  /** A reattach attempt found the runner still away: try again later. */
  | { readonly type: 'reattach_waits' }
  /** A reattach took over the agent process; `ask` is the held request restored from the stored row. */
  | { readonly type: 'reattached'; readonly ask: Ask | null; readonly askRemainingMs: number }
  /** Recovery cannot continue (or a reattached replay broke). */
  | { readonly type: 'recovery_failed'; readonly failure: RecoveryFailure; readonly detail: string }
  /** The replay-boundary timer of a reattach fired; `boundarySeen` says whether the replay reached it. */
  | { readonly type: 'boundary_due'; readonly boundarySeen: boolean; readonly timeoutMs: number }
  /** The silence timer fired: how long the agent has been quiet, and whether a tool call is still running. */
  | {
      readonly type: 'silence_due';
      readonly quietMs: number;
      readonly limitMs: number;
      readonly toolRunning: boolean;
      readonly stderrTail: string;
    }
  /** The interrupt's grace ran out without the agent answering the cancelled prompt. */
  | { readonly type: 'grace_due' }
  /** This node lets go of the turn without ending it. */
  | { readonly type: 'detach' };

export type TurnEventType = TurnEvent['type'];

export type TurnEffect =
  /** Starts (or restarts) a timer; without `ms`, for the timer's configured length. */
  | { readonly type: 'arm'; readonly timer: TimerName; readonly ms?: number }
  | { readonly type: 'disarm'; readonly timer: TimerName }
  /** The driving process's reply no longer ends the turn. */
  | { readonly type: 'disown' }
  /** Records the held ask's resolution and, unless cancelled, answers the agent. */
  | { readonly type: 'settle_ask'; readonly ask: Ask; readonly how: AskResolution }
  /** Sends session/cancel to the agent. */
  | { readonly type: 'cancel_agent' }
  /** Stops the agent process (stdin closed). */
  | { readonly type: 'stop_agent' }
  /** Lets go of the agent process without ending it. */
  | { readonly type: 'release_agent'; readonly why: string }
  /** Announces that the turn waits for its runner. */
  | { readonly type: 'recovery_started'; readonly reason: string; readonly windowMs: number }
  /** Records how a recovery ended; `waiting` says whether the turn was waiting for its runner then. */
  | {
      readonly type: 'recovery_ended';
      readonly outcome: 'cancelled' | 'failed';
      readonly waiting: boolean;
      readonly failure?: RecoveryFailure;
      readonly detail?: string;
    }
  /** One reattach attempt (its result comes back as reattach_waits, reattached or recovery_failed). */
  | { readonly type: 'reattach' }
  /** Records the turn's end: its rows, its stage event, the held ask closed as `turn_ended`. */
  | { readonly type: 'end'; readonly outcome: TurnOutcome; readonly interrupted: boolean; readonly ask: Ask | null };

export interface Step {
  readonly state: TurnState;
  readonly effects: readonly TurnEffect[];
  /** Set when the pair changes nothing because it cannot happen or comes too late; why, for the log. */
  readonly ignored?: string;
}

const ENDED: TurnState = { kind: 'ended' };
const DETACHED: TurnState = { kind: 'detached' };

type LiveState = Exclude<TurnState, { kind: 'ended' } | { kind: 'detached' }>;

const ignore = (state: TurnState, why: string): Step => ({ state, effects: [], ignored: why });
const arm = (timer: TimerName, ms?: number): TurnEffect =>
  ms === undefined ? { type: 'arm', timer } : { type: 'arm', timer, ms };
const disarm = (timer: TimerName): TurnEffect => ({ type: 'disarm', timer });
const stopAll: readonly TurnEffect[] = [...TIMERS.map(disarm), { type: 'disown' }];

const askOf = (s: LiveState): Ask | null =>
  s.kind === 'asking' || s.kind === 'recovering' || s.kind === 'interrupting' ? s.ask : null;
export const heldAsk = (s: TurnState): Ask | null =>
  s.kind === 'asking' || s.kind === 'recovering' || s.kind === 'interrupting' ? s.ask : null;
/** The JSON-RPC id of the turn's prompt, once the agent's stdin took it. */
export const promptIdOf = (s: TurnState): number | null =>
  s.kind === 'running' || s.kind === 'asking' || s.kind === 'recovering' || s.kind === 'interrupting'
    ? s.promptId
    : null;
const promptOf = (s: LiveState): number | null => (s.kind === 'sending' || s.kind === 'queued' ? null : s.promptId);

/** What the silence guard says about a turn it abandons; the credential is blamed only when the agent's own stderr says so. */
const AUTH_FAILURE =
  /\b(401|403|unauthori[sz]ed|authentication|invalid[ _-]?api[ _-]?key|api[ _-]?key (is )?(missing|invalid|not set))/i;

export function silenceReason(quietMs: number, stderrTail: string): string {
  const base = `the agent sent nothing for ${Math.round(quietMs / 1000)} s with no tool call running; the turn was abandoned`;
  if (AUTH_FAILURE.test(stderrTail)) {
    return `${base} (its stderr reports an authentication failure: check the runtime's model credential): ${stderrTail.trim().slice(-300)}`;
  }
  return `${base} (the agent may be stuck, or its model API unreachable; FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS sets how long it may be silent)`;
}

/** The one end of a turn: every timer stops, the driver is disowned, then `before`, the end, `after`. */
function end(
  s: LiveState,
  outcome: TurnOutcome,
  opts: {
    interrupted?: boolean;
    before?: readonly TurnEffect[];
    after?: readonly TurnEffect[];
    /** The ask the end closes as `turn_ended`; default the state's (null when `before` settled it). */
    ask?: Ask | null;
  } = {},
): Step {
  const interrupted = opts.interrupted ?? s.kind === 'interrupting';
  const ask = opts.ask === undefined ? askOf(s) : opts.ask;
  return {
    state: ENDED,
    effects: [...stopAll, ...(opts.before ?? []), { type: 'end', outcome, interrupted, ask }, ...(opts.after ?? [])],
  };
}

/** Recovery gives up (or a reattached replay broke): the reconnect is recorded failed, the process let go, the turn fails. */
function recoveryFails(s: LiveState, failure: RecoveryFailure, detail: string): Step {
  return end(
    s,
    { ok: false, error: `sandbox connection lost: ${failure}: ${detail}`, code: failure },
    {
      before: [
        { type: 'recovery_ended', outcome: 'failed', waiting: s.kind === 'recovering', failure, detail },
        { type: 'release_agent', why: 'turn recovery failed' },
      ],
    },
  );
}

/** A held ask resolved: asking goes back to what it was before the ask; interrupting keeps going. */
function settle(s: LiveState, requestId: string, how: AskResolution): Step {
  if (s.kind === 'recovering') return ignore(s, 'the runner is away: the held request keeps its deadline');
  if (s.kind !== 'asking' && s.kind !== 'interrupting') return ignore(s, 'no permission request is held');
  const ask = s.ask;
  if (!ask || ask.requestId !== requestId) return ignore(s, 'not the held permission request');
  const effects: TurnEffect[] = [disarm('ask'), { type: 'settle_ask', ask, how }];
  if (s.kind === 'interrupting') return { state: { ...s, ask: null }, effects };
  return { state: s.promptId === null ? { kind: 'sending' } : { kind: 'running', promptId: s.promptId }, effects };
}

function interrupt(s: LiveState, hasProcess: boolean): Step {
  if (s.kind === 'interrupting') return ignore(s, 'the turn is already being interrupted');
  const effects: TurnEffect[] = [];
  // Interrupt cancels recovery: the detached agent is reaped at the next launch.
  if (s.kind === 'recovering')
    effects.push(
      disarm('retry'),
      disarm('boundary'),
      { type: 'disown' },
      { type: 'recovery_ended', outcome: 'cancelled', waiting: true },
    );
  const ask = askOf(s);
  if (ask) effects.push(disarm('ask'), { type: 'settle_ask', ask, how: 'cancelled' });
  if (!hasProcess)
    return end(s, { ok: false, error: 'interrupted' }, { interrupted: true, before: effects, ask: null });
  // session/cancel answers every held permission `cancelled` too.
  effects.push({ type: 'cancel_agent' }, arm('grace'));
  return { state: { kind: 'interrupting', promptId: promptOf(s), ask: null }, effects };
}

/** What a queued turn's failure says: how long it waited, and what to do about it. */
export function queueExpiredReason(waitedMs: number): string {
  const minutes = Math.max(1, Math.round(waitedMs / 60_000));
  return `the prompt waited ${minutes} min in the queue for capacity (the account's limit of running turns or sandboxes was reached) and expired without starting; send it again, or raise the account's limits`;
}

/** A queued turn: it starts, expires, is cancelled or terminated; nothing else reaches it, since no agent has it. */
function fromQueue(s: Extract<TurnState, { kind: 'queued' }>, e: TurnEvent): Step {
  switch (e.type) {
    case 'admitted':
      return { state: { kind: 'sending' }, effects: [] };
    case 'expired':
      return end(s, { ok: false, error: queueExpiredReason(e.waitedMs), code: 'queue_expired' });
    case 'interrupt':
      return end(s, { ok: false, error: 'cancelled while queued; it never started' }, { interrupted: true });
    case 'terminate':
      return end(s, { ok: false, error: 'terminated' }, { interrupted: true });
    case 'failed':
      return end(s, e.code === undefined ? { ok: false, error: e.error } : { ok: false, error: e.error, code: e.code });
    case 'detach':
      return { state: DETACHED, effects: stopAll };
    default:
      return ignore(s, 'the turn is queued: no agent has it yet');
  }
}

/** The next state of a turn and what to do, for every (state, event) pair. */
export function transition(s: TurnState, e: TurnEvent): Step {
  if (s.kind === 'ended' || s.kind === 'detached') return ignore(s, `the turn is ${s.kind}`);
  if (s.kind === 'queued') return fromQueue(s, e);
  switch (e.type) {
    case 'admitted':
    case 'expired':
      return ignore(s, 'the turn left the queue already');

    case 'marked':
      if (s.kind === 'sending') return { state: s, effects: [] };
      if (s.kind === 'interrupting') return end(s, { ok: false, error: 'interrupted' });
      return ignore(s, 'the running marks precede the prompt');

    case 'prompt_written':
      if (s.kind === 'sending')
        return {
          state: e.promptId === null ? s : { kind: 'running', promptId: e.promptId },
          effects: [arm('silence')],
        };
      if (s.kind === 'asking' || s.kind === 'interrupting')
        return { state: { ...s, promptId: e.promptId ?? s.promptId }, effects: [arm('silence')] };
      return ignore(s, 'a turn writes one prompt');

    case 'replied':
      if (s.kind === 'recovering') return ignore(s, 'the dropped process no longer drives the turn');
      return end(s, e.outcome);

    case 'failed':
      return end(s, e.code === undefined ? { ok: false, error: e.error } : { ok: false, error: e.error, code: e.code });

    case 'terminate':
      return end(s, { ok: false, error: 'terminated' }, { interrupted: true });

    case 'interrupt':
      return interrupt(s, e.hasProcess);

    case 'asked':
      if (s.kind === 'sending')
        return { state: { kind: 'asking', promptId: null, ask: e.ask }, effects: [arm('ask', e.timeoutMs)] };
      if (s.kind === 'running' || s.kind === 'asking')
        // A second request replaces the first: its deadline and its answer are the new one's.
        return { state: { kind: 'asking', promptId: s.promptId, ask: e.ask }, effects: [arm('ask', e.timeoutMs)] };
      if (s.kind === 'interrupting') return { state: { ...s, ask: e.ask }, effects: [arm('ask', e.timeoutMs)] };
      return ignore(s, 'no agent process is attached to ask');

    case 'answered':
      return settle(s, e.requestId, { optionId: e.optionId });

    case 'ask_due':
      return settle(s, e.requestId, 'timeout');

    case 'runner_lost': {
      if (s.kind === 'recovering') return ignore(s, 'the turn is already waiting for its runner');
      if (s.kind === 'interrupting') return ignore(s, 'an interrupted turn is not recovered: its failed reply ends it');
      // Not yet confirmed written, the prompt is recovered only where writing it again cannot deliver it twice.
      const resend = s.kind === 'sending' || s.promptId === null;
      const promptId = s.kind === 'sending' || s.promptId === null ? e.resendAs : s.promptId;
      if (promptId === null)
        return ignore(
          s,
          'the prompt may not have reached the agent and cannot be resent: its failed reply ends the turn',
        );
      return {
        state: {
          kind: 'recovering',
          promptId,
          resend,
          ask: askOf(s),
          deadline: e.now + e.windowMs,
          windowMs: e.windowMs,
        },
        // The held ask's timer is armed again on reattach, for what is left of its first deadline.
        effects: [
          { type: 'disown' },
          disarm('boundary'),
          disarm('ask'),
          { type: 'recovery_started', reason: e.reason, windowMs: e.windowMs },
          arm('retry'),
        ],
      };
    }

    case 'retry_due':
      if (s.kind !== 'recovering') return ignore(s, 'no recovery is waiting');
      if (e.now >= s.deadline)
        return recoveryFails(
          s,
          'runner_reconnect_timeout',
          `the runner did not reconnect within ${Math.round(s.windowMs / 1000)} s`,
        );
      return { state: s, effects: [{ type: 'reattach' }] };

    case 'reattach_waits':
      if (s.kind !== 'recovering') return ignore(s, 'no recovery is waiting');
      return { state: s, effects: [arm('retry')] };

    case 'reattached': {
      if (s.kind !== 'recovering') return ignore(s, 'no recovery is waiting');
      // A prompt to resend is written again by the reattached process: the turn is back to its write.
      const promptId = s.resend ? null : s.promptId;
      return {
        state: e.ask
          ? { kind: 'asking', promptId, ask: e.ask }
          : promptId === null
            ? { kind: 'sending' }
            : { kind: 'running', promptId },
        effects: [disarm('ask'), ...(e.ask ? [arm('ask', e.askRemainingMs)] : []), arm('boundary')],
      };
    }

    case 'recovery_failed':
      return recoveryFails(s, e.failure, e.detail);

    case 'boundary_due': {
      if (s.kind === 'sending' || s.kind === 'recovering') return ignore(s, 'no reattached replay is running');
      if (e.boundarySeen || s.promptId === null) return { state: s, effects: [] };
      return recoveryFails(
        s,
        'runner_replay_boundary_missing',
        `the replay did not reach the reply to request ${s.promptId - 1} within ${e.timeoutMs} ms`,
      );
    }

    case 'silence_due': {
      // A held permission, a runner recovery and an interrupt have their own deadlines; silence restarts after them.
      if (s.kind === 'asking' || s.kind === 'recovering' || s.kind === 'interrupting' || e.toolRunning)
        return { state: s, effects: [arm('silence', e.limitMs)] };
      if (e.quietMs < e.limitMs) return { state: s, effects: [arm('silence', e.limitMs - e.quietMs)] };
      return end(
        s,
        { ok: false, error: silenceReason(e.quietMs, e.stderrTail), code: 'agent_silent' },
        { after: [{ type: 'cancel_agent' }, { type: 'stop_agent' }] },
      );
    }

    case 'grace_due':
      if (s.kind !== 'interrupting') return ignore(s, 'no interrupt is waiting');
      // The agent ignored the cancel: its process is stopped, which ends the turn.
      return end(s, { ok: false, error: 'interrupted' }, { before: [{ type: 'stop_agent' }] });

    case 'detach':
      return { state: DETACHED, effects: stopAll };
  }
}

/** The state a turn starts in: a new prompt is sending; an adopted one (its prompt sent elsewhere) is running. A queued one starts `queued` (QUEUED). */
export function initialState(promptId: number | null): TurnState {
  return promptId === null ? { kind: 'sending' } : { kind: 'running', promptId };
}

/** The state of a turn row waiting in the capacity queue. */
export const QUEUED: TurnState = { kind: 'queued' };
