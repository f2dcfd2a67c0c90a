/**
 * The node's one PostgreSQL notification connection: it LISTENs on every channel the cluster uses and
 * reconnects with backoff when PostgreSQL drops it, then tells its users to re-read what they may have missed.
 */
import pg from 'pg';
import type { Logger } from 'pino';

export interface PgNotifyOptions {
  readonly url: string;
  /** The store's schema: the write session's search_path (parked message bodies live there). */
  readonly schema?: string | undefined;
  readonly logger: Logger;
  /** The listening session's application_name, so an operator (or a test) can find it in pg_stat_activity. */
  readonly name?: string;
  /** First reconnect delay; it doubles up to `maxBackoffMs`. */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

type Handler = (payload: string) => void;

export class PgNotify {
  readonly #o: PgNotifyOptions;
  readonly #log: Logger;
  readonly #channels = new Map<string, Handler>();
  readonly #reconnected = new Set<() => void>();
  /**
   * Writes (NOTIFY and the cluster's own queries) go through a pool of one session: one statement at a
   * time in call order, so NOTIFYs arrive in the order sent, and a dropped session is replaced on the next write.
   */
  readonly #write: pg.Pool;
  #listen: pg.Client | null = null;
  #pid: number | null = null;
  #retry: NodeJS.Timeout | null = null;
  #backoff: number;
  #closed = false;

  private constructor(o: PgNotifyOptions) {
    this.#o = o;
    this.#log = o.logger.child({ component: 'pg-notify' });
    this.#backoff = o.minBackoffMs ?? 100;
    this.#write = new pg.Pool({
      connectionString: o.url,
      max: 1,
      ...(o.schema ? { options: `-c search_path=${o.schema}` } : {}),
    });
    this.#write.on('error', (e) =>
      this.#log.warn({ err: e.message }, 'cluster write session dropped; the next write opens another'),
    );
  }

  /** Connects the listening session before returning, so nothing notified after open is missed. */
  static async open(o: PgNotifyOptions): Promise<PgNotify> {
    const n = new PgNotify(o);
    try {
      await n.#connect();
    } catch (e) {
      await n.#write.end().catch(() => undefined);
      throw e;
    }
    return n;
  }

  /** The listening session's backend pid (what `pg_terminate_backend` takes); null while reconnecting. */
  get listenerPid(): number | null {
    return this.#pid;
  }

  get connected(): boolean {
    return this.#listen !== null;
  }

  /** Handles every notification on the channel, now and after each reconnect. One handler per channel. */
  async listen(channel: string, handler: Handler): Promise<void> {
    this.#channels.set(channel, handler);
    const client = this.#listen;
    if (client) await client.query(`LISTEN "${channel}"`);
  }

  /** Called after every reconnect: notifications sent while the session was down are gone, so re-read state. */
  onReconnect(fn: () => void): () => void {
    this.#reconnected.add(fn);
    return () => this.#reconnected.delete(fn);
  }

  notify(channel: string, payload: string): Promise<void> {
    return this.query('SELECT pg_notify($1, $2)', [channel, payload]).then(() => undefined);
  }

  /** A statement on the ordered write session. */
  query<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<pg.QueryResult<T>> {
    if (this.#closed) return Promise.reject(new Error('cluster connection closed'));
    return this.#write.query<T>(text, params);
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.#o.url,
      ...(this.#o.name ? { application_name: this.#o.name } : {}),
    });
    client.on('notification', (msg) => {
      const handler = this.#channels.get(msg.channel);
      if (!handler) return;
      try {
        handler(msg.payload ?? '');
      } catch (e) {
        this.#log.warn(
          { err: e instanceof Error ? e.message : String(e), channel: msg.channel },
          'notification handler threw',
        );
      }
    });
    let handled = false;
    const lost = (err?: unknown) => {
      if (handled) return;
      handled = true;
      if (this.#listen === client) {
        this.#listen = null;
        this.#pid = null;
      }
      client.end().catch(() => undefined);
      if (this.#closed) return;
      this.#log.warn({ err: err instanceof Error ? err.message : err }, 'notification connection lost; reconnecting');
      this.#schedule();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    try {
      await client.connect();
      const pid = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      for (const channel of this.#channels.keys()) await client.query(`LISTEN "${channel}"`);
      this.#pid = pid.rows[0]?.pid ?? null;
    } catch (e) {
      handled = true;
      await client.end().catch(() => undefined);
      throw e;
    }
    this.#listen = client;
    this.#backoff = this.#o.minBackoffMs ?? 100;
  }

  #schedule(): void {
    if (this.#closed || this.#retry) return;
    const delay = this.#backoff;
    this.#backoff = Math.min(delay * 2, this.#o.maxBackoffMs ?? 5_000);
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.#connect().then(
        () => {
          this.#log.info('notification connection back');
          for (const fn of [...this.#reconnected]) {
            try {
              fn();
            } catch (e) {
              this.#log.warn({ err: e instanceof Error ? e.message : String(e) }, 'reconnect hook threw');
            }
          }
        },
        (err: unknown) => {
          this.#log.warn({ err: err instanceof Error ? err.message : String(err) }, 'notification reconnect failed');
          this.#schedule();
        },
      );
    }, delay);
    this.#retry.unref();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    const client = this.#listen;
    this.#listen = null;
    await client?.end().catch(() => undefined);
    await this.#write.end().catch(() => undefined);
  }
}
