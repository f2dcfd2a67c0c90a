/**
 * The in-process event bus: topics such as `runners:<account id>` carry small typed events
 * (runner presence now; the team stream and SSE subscribe to it later).
 */
export type BusEvent =
  | { type: 'runner_online'; accountId: string; runnerId: string; name: string }
  | { type: 'runner_offline'; accountId: string; runnerId: string; name: string };

export type BusListener = (event: BusEvent) => void;

export const runnersTopic = (accountId: string): string => `runners:${accountId}`;

export class EventBus {
  readonly #topics = new Map<string, Set<BusListener>>();

  /** Returns the unsubscribe function. */
  subscribe(topic: string, listener: BusListener): () => void {
    let set = this.#topics.get(topic);
    if (!set) this.#topics.set(topic, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#topics.get(topic) === set) this.#topics.delete(topic);
    };
  }

  /** Delivers synchronously; a throwing listener never stops the others or the publisher. */
  publish(topic: string, event: BusEvent): void {
    for (const listener of [...(this.#topics.get(topic) ?? [])]) {
      try {
        listener(event);
      } catch {
        // A subscriber's bug is its own; presence must still reach the rest.
      }
    }
  }
}
