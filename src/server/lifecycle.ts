/**
 * The start/stop stack of the composition root: each component, once started, pushes what stops it;
 * stopping pops in reverse start order, so the stop order is written once, by the start order.
 */
import type { Logger } from 'pino';

export class StopStack {
  readonly #stops: Array<{ readonly name: string; readonly stop: () => unknown }> = [];
  #stopping: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  /** Registers what undoes a component that just started. */
  push(name: string, stop: () => unknown): void {
    this.#stops.push({ name, stop });
  }

  /** Stops everything pushed, last first; a failing stop is logged and the rest still run. Safe to call twice. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      for (let s = this.#stops.pop(); s; s = this.#stops.pop()) {
        try {
          await s.stop();
        } catch (e) {
          this.log.warn(
            { err: e instanceof Error ? e.message : String(e), component: s.name },
            'stopping a component failed',
          );
        }
      }
    })();
    return this.#stopping;
  }
}
