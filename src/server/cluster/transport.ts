/**
 * Node-to-node messages over PostgreSQL LISTEN/NOTIFY: one channel per node plus a broadcast
 * channel; a body too large for a NOTIFY payload is parked in cluster_messages and only its id is sent.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type pg from 'pg';
import type { PgNotify } from './notify.ts';

/**
 * PostgreSQL refuses payloads of 8000 bytes or more. Below this a body goes inline (one round
 * trip, no table write); above it the row indirection costs an INSERT and a DELETE but has no limit
 * (exec output can be 40 MiB), so stream chunks (64 KiB live, up to 1 MiB in a replay) always take the row path.
 */
export const INLINE_LIMIT_BYTES = 7000;
/** Parked bodies nobody fetched (the addressee died) are swept after this. */
export const ORPHAN_MESSAGE_TTL_S = 600;

export interface TransportOptions {
  /** The node's one notification connection (shared with the bus bridge). */
  readonly notify: PgNotify;
  /** The schema the store lives in; channels are per database, so they are derived from it. */
  readonly schema: string | undefined;
  readonly nodeId: string;
  readonly logger: Logger;
  /** Called in arrival order, one at a time (a parked body is fetched before the next is handled). */
  readonly onMessage: (channel: 'node' | 'broadcast', body: string) => void;
}

export class NotifyTransport {
  readonly nodeId: string;
  readonly #prefix: string;
  /** Every write goes through its one ordered session, so NOTIFYs are delivered in the order sent. */
  readonly #pg: PgNotify;
  readonly #log: Logger;
  readonly #onMessage: TransportOptions['onMessage'];
  #inbox: Promise<void> = Promise.resolve();
  #outbox: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(opts: TransportOptions) {
    this.nodeId = opts.nodeId;
    this.#prefix = `fn_${createHash('sha256')
      .update(opts.schema ?? '')
      .digest('hex')
      .slice(0, 12)}`;
    this.#pg = opts.notify;
    this.#log = opts.logger;
    this.#onMessage = opts.onMessage;
  }

  static async open(opts: TransportOptions): Promise<NotifyTransport> {
    const t = new NotifyTransport(opts);
    const own = t.channelOf(opts.nodeId);
    await opts.notify.listen(own, (payload) => t.#receive(own, payload));
    await opts.notify.listen(t.#broadcast, (payload) => t.#receive(t.#broadcast, payload));
    return t;
  }

  channelOf(nodeId: string): string {
    return `${this.#prefix}_n${nodeId}`;
  }

  get #broadcast(): string {
    return `${this.#prefix}_all`;
  }

  /** Sends to one node (or every node, this one included); rejects when the database is unreachable. */
  async send(to: string | 'broadcast', body: string): Promise<void> {
    if (this.#closed) throw new Error('cluster transport closed');
    const channel = to === 'broadcast' ? this.#broadcast : this.channelOf(to);
    const inline = Buffer.byteLength(body, 'utf8') <= INLINE_LIMIT_BYTES;
    // A parked body is taken by its first reader, so a broadcast must always fit a payload.
    if (!inline && to === 'broadcast') throw new Error('a broadcast cluster message must fit in one NOTIFY payload');
    if (inline) {
      await this.#serial(() => this.#pg.notify(channel, `I${body}`));
      return;
    }
    // One statement: the row and the notification commit together.
    await this.#serial(() =>
      this.#pg.query(
        "WITH m AS (INSERT INTO cluster_messages (body) VALUES ($1) RETURNING id) SELECT pg_notify($2, 'R' || id) FROM m",
        [body, channel],
      ),
    );
  }

  /** One statement at a time on the write session, in call order (pg deprecates overlapping queries). */
  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#outbox.then(fn, fn);
    this.#outbox = run.catch(() => undefined);
    return run;
  }

  /** A query on the ordered write session (registrations), so it stays in order with the sends. */
  query<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<pg.QueryResult<T>> {
    if (this.#closed) return Promise.reject(new Error('cluster transport closed'));
    return this.#serial(() => this.#pg.query<T>(text, params));
  }

  #receive(channel: string, payload: string): void {
    const kind = channel === this.#broadcast ? 'broadcast' : 'node';
    this.#inbox = this.#inbox.then(async () => {
      try {
        let body: string | undefined;
        if (payload.startsWith('I')) body = payload.slice(1);
        else if (/^R\d+$/.test(payload)) {
          const r = await this.#pg.query<{ body: string }>(
            'DELETE FROM cluster_messages WHERE id = $1 RETURNING body',
            [payload.slice(1)],
          );
          body = r.rows[0]?.body;
          if (body === undefined) this.#log.warn({ channel }, 'parked cluster message already taken');
        } else this.#log.warn({ channel, payload: payload.slice(0, 80) }, 'ignoring a malformed cluster notification');
        if (body !== undefined) this.#onMessage(kind, body);
      } catch (e) {
        this.#log.error({ err: e instanceof Error ? e.message : String(e) }, 'cluster message handling failed');
      }
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#inbox;
    await this.#outbox;
  }
}
