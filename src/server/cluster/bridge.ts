/**
 * What crosses server nodes: the event bus bridged through PostgreSQL LISTEN/NOTIFY (runner presence,
 * team and schedule changes, "events were stored" announcements), so an SSE client on one node hears
 * what happened on another. PGlite is one process; there the bus stays in-process.
 */
import { createHash, randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { EventLog } from '../conversations/event-log.ts';
import { busEventSchema, EVENTS_TOPIC, type BusEvent, type EventBus } from './bus.ts';

/** NOTIFY payloads must stay under 8000 bytes; announcements are split into chunks of this many ids. */
const IDS_PER_NOTIFY = 100;
const RECONNECT_MS = 1000;

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
export function announceEvents(events: EventLog, bus: EventBus): () => void {
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
        bus.publish(EVENTS_TOPIC, { type: 'events_appended', conversationIds: ids.slice(i, i + IDS_PER_NOTIFY) });
      }
    });
  });
}

export interface PgBusBridgeOptions {
  readonly url: string;
  readonly schema?: string | undefined;
  readonly bus: EventBus;
  readonly logger: Logger;
}

/** One dedicated connection that LISTENs for the other nodes and NOTIFYs what this node publishes. */
export class PgBusBridge {
  readonly node = randomUUID();
  readonly channel: string;
  readonly #o: PgBusBridgeOptions;
  readonly #log: Logger;
  #client: pg.Client | null = null;
  #stopped = false;
  #retry: NodeJS.Timeout | null = null;
  /** NOTIFYs go out one at a time, in publish order, on the one connection. */
  #sending: Promise<unknown> = Promise.resolve();

  private constructor(o: PgBusBridgeOptions) {
    this.#o = o;
    this.channel = busChannel(o.schema);
    this.#log = o.logger.child({ component: 'bus-bridge' });
  }

  /** Connects and LISTENs before returning, so nothing published after start is missed. */
  static async start(o: PgBusBridgeOptions): Promise<PgBusBridge> {
    const bridge = new PgBusBridge(o);
    await bridge.#connect();
    o.bus.setForwarder((topic, event) => bridge.#send(topic, event));
    return bridge;
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#o.url });
    client.on('notification', (msg) => {
      if (msg.channel !== this.channel || !msg.payload) return;
      let raw: unknown;
      try {
        raw = JSON.parse(msg.payload);
      } catch {
        this.#log.warn('bus notification is not JSON; ignored');
        return;
      }
      const parsed = envelopeSchema.safeParse(raw);
      if (!parsed.success) {
        this.#log.warn({ issue: parsed.error.issues[0]?.message }, 'bus notification malformed; ignored');
        return;
      }
      if (parsed.data.n === this.node) return;
      this.#o.bus.deliver(parsed.data.t, parsed.data.e);
    });
    let handled = false;
    const lost = (err?: unknown) => {
      if (handled) return;
      handled = true;
      if (this.#client === client) this.#client = null;
      client.end().catch(() => {});
      if (this.#stopped) return;
      this.#log.warn({ err }, 'bus bridge connection lost; reconnecting');
      this.#scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    try {
      await client.connect();
      await client.query(`LISTEN ${this.channel}`);
    } catch (e) {
      handled = true;
      await client.end().catch(() => {});
      throw e;
    }
    this.#client = client;
  }

  #scheduleReconnect(): void {
    if (this.#stopped || this.#retry) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.#connect().catch((err: unknown) => {
        this.#log.warn({ err }, 'bus bridge reconnect failed');
        this.#scheduleReconnect();
      });
    }, RECONNECT_MS);
    this.#retry.unref();
  }

  #send(topic: string, event: BusEvent): void {
    const client = this.#client;
    if (!client) {
      this.#log.debug({ topic, type: event.type }, 'bus bridge down; event stays on this node');
      return;
    }
    const payload = JSON.stringify({ n: this.node, t: topic, e: event });
    this.#sending = this.#sending
      .then(() => client.query('SELECT pg_notify($1, $2)', [this.channel, payload]))
      .catch((err: unknown) => this.#log.warn({ err, topic }, 'bus NOTIFY failed'));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#o.bus.setForwarder(null);
    if (this.#retry) clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = null;
    await this.#sending;
    await client?.end().catch(() => {});
  }
}
