/**
 * The event bus: topics such as `runners:<account id>` carry small typed events (runner presence,
 * team and schedule changes, event-log appends). With a forwarder set (PostgreSQL NOTIFY), every
 * publish also reaches the other server nodes, which `deliver` it to their own subscribers.
 */
import { z } from 'zod';

export const busEventSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('runner_online'), accountId: z.string(), runnerId: z.string(), name: z.string() }),
  z.object({
    type: z.literal('runner_offline'),
    accountId: z.string(),
    runnerId: z.string(),
    name: z.string(),
    /** When the connection that ended began: with the runner id, names this one going offline on every node. */
    connectedAt: z.string().optional(),
  }),
  /** The roster changed (add, remove, rename, rotate, a replacement conversation). */
  z.object({ type: z.literal('team_changed'), accountId: z.string() }),
  /** A conversation of the account was created, retitled, read, deleted or finished (lists re-read). */
  z.object({ type: z.literal('conversations_changed'), accountId: z.string() }),
  /** A schedule was created, updated, deleted or fired. */
  z.object({ type: z.literal('schedule_changed'), accountId: z.string(), scheduleId: z.string() }),
  /** Events of these conversations were stored by `node` (feeds on other nodes read them from the store). */
  z.object({ type: z.literal('events_appended'), node: z.string().optional(), conversationIds: z.array(z.string()) }),
  /** An API key or account row changed on `node`: every other node forgets the keys it remembers. */
  z.object({ type: z.literal('keys_changed'), node: z.string() }),
  /** This node's notification connection came back: what other nodes published meanwhile is lost, re-read. */
  z.object({ type: z.literal('reconnected') }),
]);
export type BusEvent = z.infer<typeof busEventSchema>;

export type BusListener = (event: BusEvent) => void;
/** Resolves once the event is on its way to the other nodes. */
export type BusForwarder = (topic: string, event: BusEvent) => Promise<void> | void;

export const runnersTopic = (accountId: string): string => `runners:${accountId}`;
export const teamTopic = (accountId: string): string => `team:${accountId}`;
export const conversationsTopic = (accountId: string): string => `conversations:${accountId}`;
export const EVENTS_TOPIC = 'events';
export const KEYS_TOPIC = 'keys';
/** Local signals about the node's link to the others (never forwarded). */
export const CLUSTER_TOPIC = 'cluster';

export class EventBus {
  readonly #topics = new Map<string, Set<BusListener>>();
  readonly #everything = new Set<(topic: string, event: BusEvent) => void>();
  #forward: BusForwarder | null = null;

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

  /** Every event of every topic delivered on this node (webhooks watch all accounts' runners). */
  subscribeAll(listener: (topic: string, event: BusEvent) => void): () => void {
    this.#everything.add(listener);
    return () => {
      this.#everything.delete(listener);
    };
  }

  /**
   * Delivers here synchronously and hands the event to the forwarder (other nodes), if any. The
   * promise, which never rejects, is for a writer that must know the others were told before it answers.
   */
  publish(topic: string, event: BusEvent): Promise<void> {
    this.deliver(topic, event);
    if (!this.#forward) return Promise.resolve();
    try {
      // Forwarding is best effort; this node's subscribers already have the event.
      return Promise.resolve(this.#forward(topic, event)).catch(() => undefined);
    } catch {
      return Promise.resolve();
    }
  }

  /** Local subscribers only: what a bridge calls for an event another node published. */
  deliver(topic: string, event: BusEvent): void {
    for (const listener of [...(this.#topics.get(topic) ?? [])]) {
      try {
        listener(event);
      } catch {
        // A subscriber's bug is its own; presence must still reach the rest.
      }
    }
    for (const listener of this.#everything) {
      try {
        listener(topic, event);
      } catch {
        // As above.
      }
    }
  }

  setForwarder(forward: BusForwarder | null): void {
    this.#forward = forward;
  }
}
