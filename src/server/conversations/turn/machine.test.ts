import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  heldAsk,
  TIMERS,
  transition,
  TURN_KINDS,
  type Ask,
  type TimerName,
  type TurnEffect,
  type TurnEvent,
  type TurnEventType,
  type TurnKind,
  type TurnState,
} from './machine.ts';

const ask: Ask = { requestId: 'r1', acpId: 7, options: [{ optionId: 'allow', name: 'Allow', kind: 'allow_once' }] };
const other: Ask = { requestId: 'r2', acpId: 8, options: ask.options };

/** One state of each kind. */
const STATES: Record<TurnKind, TurnState> = {
  queued: { kind: 'queued' },
  sending: { kind: 'sending' },
  running: { kind: 'running', promptId: 3 },
  asking: { kind: 'asking', promptId: 3, ask },
  recovering: { kind: 'recovering', promptId: 3, resend: false, ask, deadline: 10_000, windowMs: 5_000 },
  interrupting: { kind: 'interrupting', promptId: 3, ask: null },
  ended: { kind: 'ended' },
  detached: { kind: 'detached' },
};

/** One event of each type. */
const EVENTS: Record<TurnEventType, TurnEvent> = {
  admitted: { type: 'admitted' },
  expired: { type: 'expired', waitedMs: 3_600_000 },
  marked: { type: 'marked' },
  prompt_written: { type: 'prompt_written', promptId: 3 },
  replied: { type: 'replied', outcome: { ok: true, stopReason: 'end_turn' } },
  failed: { type: 'failed', error: 'the agent process is not running' },
  terminate: { type: 'terminate' },
  interrupt: { type: 'interrupt', hasProcess: true },
  asked: { type: 'asked', ask: other, timeoutMs: 1_000 },
  answered: { type: 'answered', requestId: 'r1', optionId: 'allow' },
  ask_due: { type: 'ask_due', requestId: 'r1' },
  runner_lost: { type: 'runner_lost', reason: 'socket closed', now: 1_000, windowMs: 5_000, resendAs: null },
  retry_due: { type: 'retry_due', now: 2_000 },
  reattach_waits: { type: 'reattach_waits' },
  reattached: { type: 'reattached', ask: null, askRemainingMs: 0 },
  recovery_failed: { type: 'recovery_failed', failure: 'attach_failed', detail: 'no such session' },
  boundary_due: { type: 'boundary_due', boundarySeen: false, timeoutMs: 100 },
  silence_due: { type: 'silence_due', quietMs: 2_000, limitMs: 1_000, toolRunning: false, stderrTail: '' },
  grace_due: { type: 'grace_due' },
  detach: { type: 'detach' },
};

type Next = TurnKind | 'ignored';
/** Every state an agent may hold the turn in (not `queued`: no agent has a queued turn). */
const ALL_LIVE = (to: TurnKind): Record<TurnKind, Next> => ({
  queued: 'ignored',
  sending: to,
  running: to,
  asking: to,
  recovering: to,
  interrupting: to,
  ended: 'ignored',
  detached: 'ignored',
});
const ONLY = (from: TurnKind, to: TurnKind): Record<TurnKind, Next> => ({
  queued: 'ignored',
  sending: 'ignored',
  running: 'ignored',
  asking: 'ignored',
  recovering: 'ignored',
  interrupting: 'ignored',
  ended: 'ignored',
  detached: 'ignored',
  [from]: to,
});

/**
 * Every (state, event) pair and where it leads; `ignored`: the pair cannot happen or comes too late,
 * and the state stays as it is with nothing done. The type makes a missing pair a compile error.
 */
const TABLE: Record<TurnEventType, Record<TurnKind, Next>> = {
  admitted: ONLY('queued', 'sending'),
  expired: ONLY('queued', 'ended'),
  marked: { ...ONLY('sending', 'sending'), interrupting: 'ended' },
  prompt_written: {
    ...ONLY('sending', 'running'),
    asking: 'asking',
    interrupting: 'interrupting',
  },
  replied: { ...ALL_LIVE('ended'), recovering: 'ignored' },
  failed: { ...ALL_LIVE('ended'), queued: 'ended' },
  terminate: { ...ALL_LIVE('ended'), queued: 'ended' },
  interrupt: { ...ALL_LIVE('interrupting'), interrupting: 'ignored', queued: 'ended' },
  asked: {
    ...ALL_LIVE('asking'),
    recovering: 'ignored',
    interrupting: 'interrupting',
  },
  answered: ONLY('asking', 'running'),
  ask_due: ONLY('asking', 'running'),
  runner_lost: { ...ONLY('running', 'recovering'), asking: 'recovering' },
  retry_due: ONLY('recovering', 'recovering'),
  reattach_waits: ONLY('recovering', 'recovering'),
  reattached: ONLY('recovering', 'running'),
  recovery_failed: ALL_LIVE('ended'),
  boundary_due: { ...ONLY('running', 'ended'), asking: 'ended', interrupting: 'ended' },
  silence_due: {
    ...ALL_LIVE('ended'),
    asking: 'asking',
    recovering: 'recovering',
    interrupting: 'interrupting',
  },
  grace_due: ONLY('interrupting', 'ended'),
  detach: { ...ALL_LIVE('detached'), queued: 'detached' },
};

const types = (fx: readonly TurnEffect[]) =>
  fx.map((f) => (f.type === 'arm' || f.type === 'disarm' ? `${f.type}:${f.timer}` : f.type));

describe('the turn state machine', () => {
  it('has a row for every (state, event) pair, and each pair does what the table says', () => {
    let pairs = 0;
    for (const [type, row] of Object.entries(TABLE) as [TurnEventType, Record<TurnKind, Next>][]) {
      for (const kind of TURN_KINDS) {
        pairs++;
        const from = STATES[kind];
        const step = transition(from, EVENTS[type]);
        const want = row[kind];
        const where = `${kind} + ${type}`;
        if (want === 'ignored') {
          assert.ok(step.ignored, `${where} is ignored with a reason`);
          assert.equal(step.state, from, `${where} leaves the state as it is`);
          assert.deepEqual(step.effects, [], `${where} does nothing`);
        } else {
          assert.equal(step.ignored, undefined, `${where} is not ignored: ${step.ignored}`);
          assert.equal(step.state.kind, want, where);
        }
      }
    }
    assert.equal(pairs, TURN_KINDS.length * Object.keys(EVENTS).length);
  });

  it('ends a turn exactly through one `end` effect, after every timer is stopped and the driver disowned', () => {
    for (const kind of TURN_KINDS)
      for (const event of Object.values(EVENTS)) {
        const step = transition(STATES[kind], event);
        const ends = step.effects.filter((f) => f.type === 'end').length;
        assert.equal(ends, step.state.kind === 'ended' && !step.ignored ? 1 : 0, `${kind} + ${event.type}`);
        if (step.ignored || (step.state.kind !== 'ended' && step.state.kind !== 'detached')) continue;
        const t = types(step.effects);
        for (const timer of TIMERS) assert.ok(t.includes(`disarm:${timer}`), `${kind} + ${event.type} stops ${timer}`);
        assert.ok(t.includes('disown'), `${kind} + ${event.type} disowns its driver`);
      }
  });

  it('an interrupt cancels the recovery and the held ask, then cancels the agent with a grace', () => {
    const step = transition(STATES.recovering, EVENTS.interrupt);
    assert.deepEqual(step.state, { kind: 'interrupting', promptId: 3, ask: null });
    assert.deepEqual(types(step.effects), [
      'disarm:retry',
      'disarm:boundary',
      'disown',
      'recovery_ended',
      'disarm:ask',
      'settle_ask',
      'cancel_agent',
      'arm:grace',
    ]);
    assert.deepEqual(step.effects[5], { type: 'settle_ask', ask, how: 'cancelled' });
  });

  it('an interrupt with no agent process ends the turn as interrupted, its ask settled first and not closed twice', () => {
    const step = transition(STATES.asking, { type: 'interrupt', hasProcess: false });
    assert.equal(step.state.kind, 'ended');
    const end = step.effects.find((f) => f.type === 'end');
    assert.deepEqual(end, { type: 'end', outcome: { ok: false, error: 'interrupted' }, interrupted: true, ask: null });
    assert.ok(types(step.effects).indexOf('settle_ask') < types(step.effects).indexOf('end'));
  });

  it('an end while interrupting or on terminate is recorded as interrupted; otherwise as its outcome says', () => {
    const ended = (s: TurnState, e: TurnEvent) => step(s, e).effects.find((f) => f.type === 'end');
    const step = transition;
    assert.deepEqual(ended(STATES.interrupting, EVENTS.replied), {
      type: 'end',
      outcome: { ok: true, stopReason: 'end_turn' },
      interrupted: true,
      ask: null,
    });
    assert.equal((ended(STATES.running, EVENTS.terminate) as { interrupted: boolean }).interrupted, true);
    assert.deepEqual(ended(STATES.asking, EVENTS.replied), {
      type: 'end',
      outcome: { ok: true, stopReason: 'end_turn' },
      interrupted: false,
      ask,
    });
  });

  it('the silence guard waits out asks, recoveries, interrupts and running tools, and measures from the last line', () => {
    const due = (quietMs: number, toolRunning = false): TurnEvent => ({
      type: 'silence_due',
      quietMs,
      limitMs: 1_000,
      toolRunning,
      stderrTail: 'HTTP 401 Unauthorized',
    });
    assert.deepEqual(transition(STATES.running, due(400)).effects, [{ type: 'arm', timer: 'silence', ms: 600 }]);
    assert.deepEqual(transition(STATES.running, due(5_000, true)).effects, [
      { type: 'arm', timer: 'silence', ms: 1_000 },
    ]);
    assert.deepEqual(transition(STATES.asking, due(5_000)).effects, [{ type: 'arm', timer: 'silence', ms: 1_000 }]);
    const silent = transition(STATES.running, due(5_000));
    assert.deepEqual(types(silent.effects).slice(-3), ['end', 'cancel_agent', 'stop_agent']);
    const end = silent.effects.find((f) => f.type === 'end');
    assert.ok(
      end && !end.outcome.ok && end.outcome.code === 'agent_silent' && /authentication/.test(end.outcome.error),
    );
  });

  it('a recovery waits for its runner until its deadline, and a reattach restores the held ask with what is left of it', () => {
    const lost = transition(STATES.asking, EVENTS.runner_lost);
    assert.deepEqual(lost.state, {
      kind: 'recovering',
      promptId: 3,
      resend: false,
      ask,
      deadline: 6_000,
      windowMs: 5_000,
    });
    assert.deepEqual(types(lost.effects), ['disown', 'disarm:boundary', 'disarm:ask', 'recovery_started', 'arm:retry']);
    assert.deepEqual(transition(lost.state, { type: 'retry_due', now: 5_999 }).effects, [{ type: 'reattach' }]);
    const late = transition(lost.state, { type: 'retry_due', now: 6_000 });
    const end = late.effects.find((f) => f.type === 'end');
    assert.ok(end && !end.outcome.ok && end.outcome.code === 'runner_reconnect_timeout');
    assert.equal(end.ask, ask, 'the ask held through the recovery is closed with the turn');
    const back = transition(lost.state, { type: 'reattached', ask: other, askRemainingMs: 250 });
    assert.deepEqual(back.state, { kind: 'asking', promptId: 3, ask: other });
    assert.deepEqual(back.effects, [
      { type: 'disarm', timer: 'ask' },
      { type: 'arm', timer: 'ask', ms: 250 },
      { type: 'arm', timer: 'boundary' },
    ]);
  });

  it('a runner lost while the prompt is written: recovered to resend it where the runner writes a repeat once, else the turn is left to fail', () => {
    const resendable = { ...EVENTS.runner_lost, resendAs: 5 } as const;
    const lost = transition(STATES.sending, resendable);
    assert.deepEqual(lost.state, {
      kind: 'recovering',
      promptId: 5,
      resend: true,
      ask: null,
      deadline: 6_000,
      windowMs: 5_000,
    });
    assert.deepEqual(types(lost.effects), ['disown', 'disarm:boundary', 'disarm:ask', 'recovery_started', 'arm:retry']);
    // The old write's failure and its client's closed reply come after, and change nothing.
    assert.ok(transition(lost.state, { type: 'prompt_written', promptId: null }).ignored);
    assert.ok(transition(lost.state, EVENTS.replied).ignored);
    assert.ok(transition(lost.state, EVENTS.marked).ignored);
    // Reattached, the turn is back to its write (the reattached process writes the prompt again), then runs.
    const back = transition(lost.state, EVENTS.reattached);
    assert.deepEqual(back.state, { kind: 'sending' });
    assert.deepEqual(types(back.effects), ['disarm:ask', 'arm:boundary']);
    assert.deepEqual(transition(back.state, { type: 'prompt_written', promptId: 5 }).state, {
      kind: 'running',
      promptId: 5,
    });
    // Dropped again during that write, it recovers again, as often as the window allows.
    assert.equal(transition(back.state, resendable).state.kind, 'recovering');
    // The same window as a running turn's: past it the turn fails with the reason.
    const late = transition(lost.state, { type: 'retry_due', now: 6_000 });
    const end = late.effects.find((f) => f.type === 'end');
    assert.ok(end && !end.outcome.ok && end.outcome.code === 'runner_reconnect_timeout', JSON.stringify(end));
    assert.equal(late.state.kind, 'ended');

    // An ask before the write was confirmed: the agent has the prompt; a resend is a repeat the runner drops.
    const asked = transition(STATES.sending, EVENTS.asked).state;
    const askLost = transition(asked, resendable);
    assert.deepEqual(askLost.state, {
      kind: 'recovering',
      promptId: 5,
      resend: true,
      ask: other,
      deadline: 6_000,
      windowMs: 5_000,
    });
    assert.deepEqual(transition(askLost.state, { type: 'reattached', ask: other, askRemainingMs: 10 }).state, {
      kind: 'asking',
      promptId: null,
      ask: other,
    });

    // A runner that would write a repeat again: the turn is not recovered, its failed reply ends it.
    assert.ok(transition(STATES.sending, EVENTS.runner_lost).ignored);
    assert.ok(transition(asked, EVENTS.runner_lost).ignored);
    // A confirmed prompt is never resent.
    assert.equal((transition(STATES.running, resendable).state as { resend: boolean }).resend, false);
    assert.equal((transition(STATES.running, resendable).state as { promptId: number }).promptId, 3);
  });

  it('a replay that reached its boundary changes nothing; one that did not fails the turn', () => {
    const seen = transition(STATES.running, { type: 'boundary_due', boundarySeen: true, timeoutMs: 100 });
    assert.deepEqual(seen, { state: STATES.running, effects: [] });
    const missing = transition(STATES.running, EVENTS.boundary_due).effects.find((f) => f.type === 'end');
    assert.ok(missing && !missing.outcome.ok && /reply to request 2 within 100 ms/.test(missing.outcome.error));
  });

  it('only the held request is answered; an ask before the prompt is confirmed goes back to sending', () => {
    assert.ok(transition(STATES.asking, { type: 'answered', requestId: 'r2', optionId: 'allow' }).ignored);
    const early = transition(STATES.sending, EVENTS.asked);
    assert.deepEqual(early.state, { kind: 'asking', promptId: null, ask: other });
    const written = transition(early.state, EVENTS.prompt_written);
    assert.deepEqual(written.state, { kind: 'asking', promptId: 3, ask: other });
    assert.deepEqual(transition(early.state, { type: 'ask_due', requestId: 'r2' }).state, { kind: 'sending' });
  });

  it('a queued turn leaves the queue by admission (to sending, nothing to undo), expiry or cancel (ended in words, no agent touched)', () => {
    const admitted = transition(STATES.queued, EVENTS.admitted);
    assert.deepEqual(admitted, { state: { kind: 'sending' }, effects: [] });
    const expired = transition(STATES.queued, EVENTS.expired);
    const end = expired.effects.find((f) => f.type === 'end');
    assert.ok(end && end.type === 'end' && !end.outcome.ok && !end.interrupted);
    assert.equal(end.outcome.ok ? null : end.outcome.code, 'queue_expired');
    assert.match(end.outcome.ok ? '' : end.outcome.error, /waited 60 min in the queue .* expired without starting/);
    for (const hasProcess of [true, false]) {
      const cancelled = transition(STATES.queued, { type: 'interrupt', hasProcess });
      assert.deepEqual(
        types(cancelled.effects).filter((t) => !t.startsWith('disarm') && t !== 'disown'),
        ['end'],
        'a cancel sends nothing to an agent',
      );
      const fx = cancelled.effects.find((f) => f.type === 'end');
      assert.ok(fx && fx.type === 'end' && fx.interrupted);
    }
    // What only an agent's turn sees is ignored, in words.
    assert.match(transition(STATES.queued, EVENTS.replied).ignored ?? '', /queued/);
    assert.match(transition(STATES.running, EVENTS.admitted).ignored ?? '', /left the queue/);
  });

  it('keeps its timers consistent with its state over long random runs (no timer outlives the state that armed it)', () => {
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const FIRES: Partial<Record<TimerName, (s: TurnState) => TurnEvent>> = {
      silence: () => ({
        type: 'silence_due',
        quietMs: rand(2_000),
        limitMs: 1_000,
        toolRunning: rand(2) === 0,
        stderrTail: '',
      }),
      ask: (s) => ({ type: 'ask_due', requestId: heldAsk(s)?.requestId ?? 'none' }),
      retry: () => ({ type: 'retry_due', now: rand(8_000) }),
      boundary: () => ({ type: 'boundary_due', boundarySeen: rand(2) === 0, timeoutMs: 100 }),
      grace: () => ({ type: 'grace_due' }),
    };
    const outside: TurnEvent[] = [
      ...Object.values(EVENTS).filter(
        (e) => !['silence_due', 'ask_due', 'retry_due', 'boundary_due', 'grace_due'].includes(e.type),
      ),
      // A runner that writes a repeated write id once: a prompt still being written is recovered too.
      { ...EVENTS.runner_lost, resendAs: 3 } as TurnEvent,
    ];
    for (let walk = 0; walk < 2_000; walk++) {
      let state: TurnState = rand(3) === 0 ? STATES.running : STATES.sending;
      const armed = new Set<TimerName>();
      for (let i = 0; i < 30 && state.kind !== 'ended' && state.kind !== 'detached'; i++) {
        const firing = [...armed];
        let event: TurnEvent;
        if (firing.length && rand(2) === 0) {
          const timer = firing[rand(firing.length)]!;
          armed.delete(timer);
          event = FIRES[timer]!(state);
        } else {
          event = outside[rand(outside.length)]!;
          if (event.type === 'asked') event = { ...event, ask: { ...other, requestId: `a${i}` } };
          if (event.type === 'answered') event = { ...event, requestId: heldAsk(state)?.requestId ?? 'none' };
          if (event.type === 'reattached' && rand(2) === 0) event = { ...event, ask, askRemainingMs: 10 };
          if (event.type === 'interrupt') event = { type: 'interrupt', hasProcess: rand(4) !== 0 };
        }
        const step = transition(state, event);
        for (const f of step.effects)
          if (f.type === 'arm') armed.add(f.timer);
          else if (f.type === 'disarm') armed.delete(f.timer);
        state = step.state;
        const at = `walk ${walk}, step ${i}: ${event.type} → ${state.kind} with [${[...armed]}]`;
        if (state.kind === 'ended' || state.kind === 'detached') assert.deepEqual([...armed], [], at);
        if (state.kind === 'asking') assert.ok(armed.has('ask'), at);
        if (armed.has('ask')) assert.ok(heldAsk(state) && state.kind !== 'recovering', at);
        if (armed.has('retry')) assert.equal(state.kind, 'recovering', at);
        if (armed.has('grace')) assert.equal(state.kind, 'interrupting', at);
        if (armed.has('boundary')) assert.ok(['running', 'asking', 'interrupting'].includes(state.kind), at);
      }
    }
  });
});
