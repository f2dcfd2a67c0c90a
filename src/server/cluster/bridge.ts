/**
 * What crosses server nodes: the event bus bridged through PostgreSQL LISTEN/NOTIFY (runner presence,
 * team and schedule changes, "events were stored" announcements), so an SSE client on one node hears
 * what happened on another. PGlite is one process; there the bus stays in-process.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { EventRow } from '../store/conversation-schema.ts';
import { busEventSchema, CLUSTER_TOPIC, EVENTS_TOPIC, type BusEvent, type EventBus } from './bus.ts';
import type { PgNotify } from './notify.ts';

/** NOTIFY payloads must stay under 8000 bytes; announcements are split into chunks of this many ids. */
const IDS_PER_NOTIFY = 100;

const envelopeSchema = z.object({ n: z.string(), t: z.string().max(200), e: busEventSchema });

/** The NOTIFY channel of one database schema (identifiers are limited to 63 bytes, schema names are not short). */
export function busChannel(schema: string | undefined): string {
  return `fountain_bus_${createHash('sha256')
    .update(schema ?? 'public')
    .digest('hex')
    .slice(0, 16)}`;
}

/**
 * Tells the bus (and through it the other nodes) which conversations got new stored events, at most
 * once per turn of the event loop. Returns the unsubscribe function.
 */
export function announceEvents(
  events: { subscribeAll(fn: (row: EventRow) => void): () => void },
  bus: EventBus,
  node: string,
): () => void {
  let pending: Set<string> | null = null;
  return events.subscribeAll((row) => {
    if (pending) {
      pending.add(row.conversationId);
      return;
    }
    pending = new Set([row.conversationId]);
    setImmediate(() => {
      const ids = [...pending!];
      pending = null;
      for (let i = 0; i < ids.length; i += IDS_PER_NOTIFY) {
        bus.publish(EVENTS_TOPIC, { type: 'events_appended', node, conversationIds: ids.slice(i, i + IDS_PER_NOTIFY) });
      }
    });
  });
}

export interface PgBusBridgeOptions {
  /** This node's identity; a notification it sent itself is not delivered twice. */
  readonly nodeId: string;
  /** The node's one notification connection. */
  readonly notify: PgNotify;
  readonly schema?: string | undefined;
  readonly bus: EventBus;
  readonly logger: Logger;
}

/** Forwards what this node publishes to the other nodes (NOTIFY) and delivers what they publish here. */
export class PgBusBridge {
  readonly node: string;
  readonly channel: string;
  readonly #o: PgBusBridgeOptions;
  readonly #log: Logger;
  #stopped = false;
  #unreconnect: () => void = () => undefined;
  /** NOTIFYs go out one at a time, in publish order. */
  #sending: Promise<unknown> = Promise.resolve();

  private constructor(o: PgBusBridgeOptions) {
    this.#o = o;
    this.node = o.nodeId;
    this.channel = busChannel(o.schema);
    this.#log = o.logger.child({ component: 'bus-bridge' });
  }

  /** LISTENs before returning, so nothing published after start is missed. */
  static async start(o: PgBusBridgeOptions): Promise<PgBusBridge> {
    const bridge = new PgBusBridge(o);
    await o.notify.listen(bridge.channel, (payload) => bridge.#receive(payload));
    // What other nodes published while the connection was down is gone: subscribers re-read the store.
    bridge.#unreconnect = o.notify.onReconnect(() => o.bus.deliver(CLUSTER_TOPIC, { type: 'reconnected' }));
    o.bus.setForwarder((topic, event) => bridge.#send(topic, event));
    return bridge;
  }

  #receive(payload: string): void {
    let raw: unknown;
    try {
      raw = JSON.parse(payload);
    } catch {
      this.#log.warn('bus notification is not JSON; ignored');
      return;
    }
    // PostgreSQL echoes this node's own NOTIFYs (one per batch of stored events): dropped before the
    // schema check, which cost more than the rest of receiving them (issue 21).
    if (typeof raw === 'object' && raw !== null && (raw as { n?: unknown }).n === this.node) return;
    const parsed = envelopeSchema.safeParse(raw);
    if (!parsed.success) {
      this.#log.warn({ issue: parsed.error.issues[0]?.message }, 'bus notification malformed; ignored');
      return;
    }
    if (parsed.data.n === this.node) return;
    this.#o.bus.deliver(parsed.data.t, parsed.data.e);
  }

  /** Resolves once this event's NOTIFY was sent (or failed, logged). */
  #send(topic: string, event: BusEvent): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const payload = JSON.stringify({ n: this.node, t: topic, e: event });
    const sent = this.#sending
      .then(() => this.#o.notify.notify(this.channel, payload))
      .then(
        () => undefined,
        (err: unknown) => this.#log.warn({ err, topic }, 'bus NOTIFY failed'),
      );
    this.#sending = sent;
    return sent;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unreconnect();
    this.#o.bus.setForwarder(null);
    await this.#sending;
  }
}
