/**
 * The event log's write side: a FIFO queue flushed as one multi-row INSERT every few ms (or every
 * N events), so chunked agent output costs no database round trip per chunk; after each flush the
 * stored rows go to in-process subscribers in id order (the SSE tail).
 */
import type { Logger } from 'pino';
import type { EventRow, NewEvent, StageState } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { insertEvents } from './events-store.ts';

export type EventListener = (row: EventRow) => void;

export interface EventLogOptions {
  readonly flushMs: number;
  readonly flushMax: number;
}

export class EventLog {
  readonly #db: EngineDb;
  readonly #log: Logger;
  readonly #opts: EventLogOptions;
  #queue: NewEvent[] = [];
  #timer: NodeJS.Timeout | null = null;
  /** The running flush; flushes never overlap, which keeps ids in queue order. */
  #flushing: Promise<void> = Promise.resolve();
  readonly #subs = new Map<string, Set<EventListener>>();
  /** Listeners for every conversation's events (account-wide streams, cluster announcements). */
  readonly #all = new Set<EventListener>();
  /** Events appended and events stored (or dropped) so far, for `stored()`. */
  #appended = 0;
  #settled = 0;
  #barriers: Array<{ upTo: number; resolve: () => void }> = [];

  constructor(db: EngineDb, logger: Logger, opts: EventLogOptions) {
    this.#db = db;
    this.#log = logger;
    this.#opts = opts;
  }

  append(ev: NewEvent): void {
    // PostgreSQL's text holds no NUL byte; a row carrying one was refused and lost. It is stored as the
    // JSON escape \u0000 instead: shown as such in plain output, and an ACP line reads back as the agent meant it.
    const data = ev.data?.includes('\0') ? ev.data.replaceAll('\0', '\\u0000') : ev.data;
    this.#queue.push({ ...ev, ...(data === undefined ? {} : { data }), ts: ev.ts ?? new Date() });
    this.#appended++;
    if (this.#queue.length >= this.#opts.flushMax) this.#schedule(0);
    else this.#schedule(this.#opts.flushMs);
  }

  /** A stage event: `data` is its JSON metadata. */
  stage(
    conversationId: string,
    turnId: string | null,
    stage: string,
    state: StageState,
    data: Record<string, unknown> = {},
    durationMs?: number,
  ): void {
    this.append(this.stageEvent(conversationId, turnId, stage, state, data, durationMs));
  }

  /** A stage event's row, not appended (for `storeWith`). */
  stageEvent(
    conversationId: string,
    turnId: string | null,
    stage: string,
    state: StageState,
    data: Record<string, unknown> = {},
    durationMs?: number,
  ): NewEvent {
    return {
      conversationId,
      turnId,
      kind: 'stage',
      stream: '',
      stage,
      state,
      data: JSON.stringify(data),
      ts: new Date(),
      ...(durationMs === undefined ? {} : { durationMs: Math.round(durationMs) }),
    };
  }

  output(
    conversationId: string,
    turnId: string | null,
    stream: 'stdout' | 'stderr' | 'acp',
    data: string,
    seq?: number,
  ): void {
    this.append({ conversationId, turnId, kind: 'output', stream, data, ...(seq === undefined ? {} : { seq }) });
  }

  /** Stores and publishes what is queued without waiting out the batching delay (for events clients wait on). */
  flushSoon(): void {
    this.#schedule(0);
  }

  /**
   * Resolves once every event appended before the call is stored and published, without waiting out
   * the batching delay; events appended later (other conversations') do not hold it up, unlike `flush`.
   */
  stored(): Promise<void> {
    const upTo = this.#appended;
    if (this.#settled >= upTo) return Promise.resolve();
    this.#schedule(0);
    return new Promise((resolve) => this.#barriers.push({ upTo, resolve }));
  }

  /**
   * Runs a statement that stores one event along with other rows (one commit), in the flush order:
   * after every event appended before the call is stored and published, and before any appended
   * later, so the row it returns is published with ids still in order. Rejects as the statement does;
   * the caller decides what a failure means for its rows (nothing was stored then).
   */
  storeWith(write: () => Promise<EventRow>): Promise<EventRow> {
    const upTo = this.#appended;
    const run = this.#flushing.then(async () => {
      await this.#drain(upTo);
      const row = await write();
      this.#publish(row);
      return row;
    });
    this.#flushing = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Resolves once everything appended so far is stored and published. */
  async flush(): Promise<void> {
    this.#schedule(0);
    // A flush may find more queued behind it; loop until the queue is empty.
    while (this.#queue.length > 0 || this.#timer) {
      await new Promise((r) => setImmediate(r));
      await this.#flushing;
    }
    await this.#flushing;
  }

  subscribe(conversationId: string, fn: EventListener): () => void {
    let set = this.#subs.get(conversationId);
    if (!set) this.#subs.set(conversationId, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0 && this.#subs.get(conversationId) === set) this.#subs.delete(conversationId);
    };
  }

  /** Every stored event of every conversation, in id order. Returns the unsubscribe function. */
  subscribeAll(fn: EventListener): () => void {
    this.#all.add(fn);
    return () => {
      this.#all.delete(fn);
    };
  }

  async close(): Promise<void> {
    await this.flush();
  }

  #schedule(ms: number): void {
    if (this.#timer && ms > 0) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#flushing = this.#flushing.then(() => this.#drain());
    }, ms);
  }

  /** Stores what is queued; with `upTo`, only until that many appended events are settled. */
  async #drain(upTo = Number.POSITIVE_INFINITY): Promise<void> {
    while (this.#queue.length > 0 && this.#settled < upTo) {
      const batch = this.#queue.splice(0, this.#opts.flushMax);
      let rows: EventRow[];
      try {
        rows = await insertEvents(this.#db, batch);
      } catch (e) {
        // One bad row (say, its conversation was just deleted) must not lose its neighbours.
        rows = [];
        for (const ev of batch) {
          try {
            rows.push(...(await insertEvents(this.#db, [ev])));
          } catch (e2) {
            this.#log.warn(
              { err: e2 instanceof Error ? e2.message : String(e2), conversation: ev.conversationId },
              'event dropped',
            );
          }
        }
        this.#log.debug({ err: e instanceof Error ? e.message : String(e) }, 'event batch retried row by row');
      }
      for (const row of rows) this.#publish(row);
      this.#settled += batch.length;
      const open = this.#barriers.filter((b) => b.upTo > this.#settled);
      for (const b of this.#barriers) if (b.upTo <= this.#settled) b.resolve();
      this.#barriers = open;
    }
  }

  #publish(row: EventRow): void {
    for (const fn of [...(this.#subs.get(row.conversationId) ?? []), ...this.#all]) {
      try {
        fn(row);
      } catch (e) {
        this.#log.warn({ err: e instanceof Error ? e.message : String(e) }, 'event subscriber threw');
      }
    }
  }
}
