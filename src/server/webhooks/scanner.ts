/**
 * Turns what happened into deliveries by reading the store, not by hooks in the engine: stage events
 * after a cursor and newly created conversations. Each scan looks back over a window below its cursor,
 * so a row that committed late (another node's slower transaction) is still seen; queuing is idempotent.
 */
import type { EngineDb } from '../store/engine-db.ts';
import {
  enqueueCreatedConversations,
  enqueueStageEvents,
  maxEventId,
  readScanPosition,
  type ScanPosition,
  saveScanPosition,
} from './store.ts';

interface Mark {
  readonly at: number;
  readonly high: number;
  readonly startedAt: Date;
}

export class Scanner {
  readonly #db: EngineDb;
  readonly #lookBackMs: number;
  /** Where scans stood when this node started (the stored, already lagged, position). */
  #start: ScanPosition | null = null;
  /** Recent scans, oldest first: the newest one older than the look-back is where the next scan starts. */
  #marks: Mark[] = [];
  /** The position last written. */
  #saved: ScanPosition | null = null;

  constructor(db: EngineDb, lookBackMs: number) {
    this.#db = db;
    this.#lookBackMs = lookBackMs;
  }

  /**
   * One scan; how many deliveries it queued. Without endpoints it only moves its position (an endpoint
   * added later hears what happens after it, so nothing before is worth reading).
   */
  async scan(now = Date.now(), endpoints = true): Promise<number> {
    this.#start ??= await readScanPosition(this.#db);
    const startedAt = new Date(now);
    const high = await maxEventId(this.#db);
    const cutoff = now - this.#lookBackMs;
    while (this.#marks.length > 1 && this.#marks[1]!.at <= cutoff) this.#marks.shift();
    const base = this.#marks[0] && this.#marks[0].at <= cutoff ? this.#marks[0] : null;
    const low = base ? base.high : this.#start.eventCursor;
    const since = base
      ? new Date(base.startedAt.getTime() - this.#lookBackMs)
      : new Date(this.#start.conversationsSince.getTime() - this.#lookBackMs);
    const queued = !endpoints
      ? 0
      : (high > low ? await enqueueStageEvents(this.#db, low, high) : 0) +
        (await enqueueCreatedConversations(this.#db, since));
    this.#marks.push({ at: now, high, startedAt });
    // What a restart resumes from: the lagged position, so the window below it is scanned again. Written
    // only when it moved: an idle server does not write a row every tick.
    const position = { eventCursor: low, conversationsSince: base ? base.startedAt : this.#start.conversationsSince };
    if (
      position.eventCursor !== this.#saved?.eventCursor ||
      position.conversationsSince.getTime() !== this.#saved.conversationsSince.getTime()
    ) {
      await saveScanPosition(this.#db, position);
      this.#saved = position;
    }
    return queued;
  }
}
