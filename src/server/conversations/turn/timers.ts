/**
 * The timers of one turn, by name: the turn driver arms and disarms them as the state machine's effects
 * say, and nothing else holds a turn's timer, so a turn that leaves a state leaves no timer behind.
 */
import type { TimerName } from './machine.ts';

export class TurnTimers {
  readonly #armed = new Map<TimerName, NodeJS.Timeout>();

  /** Starts `name` (stopping it first if it runs); `unref`: the timer does not keep the process alive. */
  arm(name: TimerName, ms: number, fire: () => void, unref = false): void {
    this.disarm(name);
    const t = setTimeout(() => {
      if (this.#armed.get(name) === t) this.#armed.delete(name);
      fire();
    }, ms);
    if (unref) t.unref();
    this.#armed.set(name, t);
  }

  disarm(name: TimerName): void {
    const t = this.#armed.get(name);
    if (!t) return;
    clearTimeout(t);
    this.#armed.delete(name);
  }

  /** The timers running now. */
  armed(): TimerName[] {
    return [...this.#armed.keys()];
  }
}
