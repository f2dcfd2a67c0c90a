/**
 * A conversation's checkpoints: taken once a conversation is quiet after a completed turn (coalesced,
 * off the turn's path) and restored into a new sandbox when the old one is gone; blobs in the blob store,
 * rows in `checkpoints`, the newest few kept per conversation.
 */
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { describeError, type Handle, type SandboxAdapter } from '../../sandbox/index.ts';
import { type EngineDb, rowsOf } from '../store/engine-db.ts';
import type { BlobStore } from './blobs.ts';
import { collectBlobs } from './collect.ts';
import { QuietWait } from './quiet.ts';
import { captureArchive, type CheckpointSpec, DEFAULT_SPEC, restoreArchive } from './sandbox-archive.ts';

export interface CheckpointTarget {
  readonly conversationId: string;
  readonly accountId: string;
  readonly adapter: SandboxAdapter;
  readonly handle: Handle;
  /** The sandbox path of the runtime's HOME. */
  readonly home: string;
  /** The runtime's cwd (sandbox path) and, for a runtime filing sessions by its real path, how they move. */
  readonly cwd?: string;
  readonly relocateSessions?: ((fromCwd: string, toCwd: string) => string) | undefined;
}

export interface CheckpointRow {
  readonly id: string;
  readonly turnId: string | null;
  readonly digest: string;
  readonly size: number;
  readonly createdAt: Date;
  /** The runtime's ACP session the sandbox ran when it was taken (null for rows older than this field). */
  readonly sessionId: string | null;
  /** The cwd's real path where it was taken (a runner's sandbox directory), when it was recorded. */
  readonly hostCwd: string | null;
}

export type TakeOutcome =
  | { readonly ok: true; readonly row: CheckpointRow }
  | { readonly ok: false; readonly message: string };

export type RestoreOutcome =
  | { readonly ok: true; readonly restored: CheckpointRow | null }
  | { readonly ok: false; readonly message: string };

/** What the engine asks of checkpoints (a narrow port, so the engine knows no blob or archive). */
export interface ConversationCheckpoints {
  /** After a completed turn: schedules a checkpoint for when the conversation is quiet; returns at once. */
  afterTurn(target: CheckpointTarget, turnId: string): void;
  /** Now, awaited (before a sandbox is parked by destroying it, or moved). */
  take(target: CheckpointTarget, turnId: string | null): Promise<TakeOutcome>;
  /**
   * As the sandbox parks, its agent stopped (so what it writes at exit is in): after the one being
   * taken, one more, named after the conversation's newest completed turn.
   */
  atPark(target: CheckpointTarget): Promise<void>;
  /**
   * Before the sandbox is destroyed (terminate): what waits for quiet is taken now, or dropped when the
   * conversation is being deleted, and the one being taken is finished (its archive reads the sandbox).
   */
  beforeDestroy(conversationId: string, o: { readonly keep: boolean }): Promise<void>;
  /** The newest checkpoint of the conversation unpacked into the new sandbox; null when it has none. */
  restore(target: CheckpointTarget): Promise<RestoreOutcome>;
  /** The newest checkpoint of the conversation, or null. */
  latest(conversationId: string): Promise<CheckpointRow | null>;
  /** The newest checkpoint taken after that turn, or null (never taken, or pruned). */
  forTurn(conversationId: string, turnId: string): Promise<CheckpointRow | null>;
  /** The turns the conversation's kept checkpoints were taken after. */
  turnsKept(conversationId: string): Promise<Set<string>>;
  /** A row of another conversation naming the same blob (a fork starts from its parent's checkpoint). */
  copy(row: CheckpointRow, to: { conversationId: string; accountId: string; turnId: string }): Promise<void>;
  /**
   * Deletes a conversation through `remove` (its checkpoint rows cascade with it), then the blobs no
   * other checkpoint names: a deleted conversation's memory does not wait for the hourly collection.
   */
  removeWith(conversationId: string, remove: () => Promise<void>): Promise<void>;
  /** Takes the checkpoints waiting for quiet now and waits for every one being taken (shutdown, tests). */
  settled(): Promise<void>;
}

type Raw = {
  id: string;
  turn_id: string | null;
  digest: string;
  size: string | number;
  created_at: Date | string;
  session_id: string | null;
  host_cwd: string | null;
};
const COLUMNS = sql.raw(
  `id, turn_id, digest, size, created_at, holds->>'session_id' AS session_id, holds->>'host_cwd' AS host_cwd`,
);
const rowOf = (r: Raw): CheckpointRow => ({
  id: r.id,
  turnId: r.turn_id,
  digest: r.digest,
  size: Number(r.size),
  createdAt: new Date(r.created_at),
  sessionId: r.session_id,
  hostCwd: r.host_cwd,
});

export class CheckpointService implements ConversationCheckpoints {
  readonly #db: EngineDb;
  readonly #blobs: BlobStore;
  readonly #log: Logger;
  readonly #spec: Omit<CheckpointSpec, 'home'>;
  readonly #keep: number;
  /** Per conversation: the checkpoint waiting for the conversation to be quiet (a next turn's end restarts the wait). */
  readonly #quiet: QuietWait<{ target: CheckpointTarget; turnId: string }>;
  /** Per conversation: the checkpoint running, and whether another was asked for meanwhile. */
  readonly #running = new Map<
    string,
    { promise: Promise<void>; again: { target: CheckpointTarget; turnId: string } | null }
  >();

  constructor(deps: {
    db: EngineDb;
    blobs: BlobStore;
    logger: Logger;
    spec?: Partial<Omit<CheckpointSpec, 'home'>>;
    /** Checkpoints kept per conversation (default 3). */
    keep?: number;
    /**
     * How long after a turn's end the checkpoint waits for no other turn to end (default 1 s): a burst of
     * turns is archived once, after it, instead of archiving beside each turn and taking CPU from it.
     */
    quietMs?: number;
  }) {
    this.#db = deps.db;
    this.#blobs = deps.blobs;
    this.#log = deps.logger.child({ part: 'checkpoints' });
    this.#spec = { ...DEFAULT_SPEC, ...deps.spec };
    this.#keep = deps.keep ?? 3;
    this.#quiet = new QuietWait(deps.quietMs ?? 1_000, (_, w) => this.#schedule(w.target, w.turnId));
  }

  afterTurn(target: CheckpointTarget, turnId: string): void {
    this.#quiet.push(target.conversationId, { target, turnId });
  }

  #schedule(target: CheckpointTarget, turnId: string): void {
    const running = this.#running.get(target.conversationId);
    // Turns that end while one is being taken are covered by one more checkpoint after it, not one each.
    if (running) {
      running.again = { target, turnId };
      return;
    }
    const entry = { promise: Promise.resolve(), again: null as { target: CheckpointTarget; turnId: string } | null };
    entry.promise = (async () => {
      let next: { target: CheckpointTarget; turnId: string } | null = { target, turnId };
      while (next) {
        entry.again = null;
        await this.#take(next.target, next.turnId);
        next = entry.again;
      }
    })().finally(() => this.#running.delete(target.conversationId));
    this.#running.set(target.conversationId, entry);
  }

  async atPark(target: CheckpointTarget): Promise<void> {
    this.#quiet.cancel(target.conversationId);
    const running = this.#running.get(target.conversationId);
    if (running) {
      // The park's checkpoint covers what a queued one would have.
      running.again = null;
      await running.promise;
    }
    const [turn] = rowsOf<{ id: string }>(
      await this.#db.execute(sql`
        SELECT id FROM turns WHERE conversation_id = ${target.conversationId} AND status = 'completed'
        ORDER BY turn_number DESC LIMIT 1`),
    );
    await this.take(target, turn?.id ?? null);
  }

  async beforeDestroy(conversationId: string, o: { readonly keep: boolean }): Promise<void> {
    if (o.keep) this.#quiet.runNow(conversationId);
    else this.#quiet.cancel(conversationId);
    const running = this.#running.get(conversationId);
    if (!running) return;
    if (!o.keep) running.again = null;
    await running.promise;
  }

  async take(target: CheckpointTarget, turnId: string | null): Promise<TakeOutcome> {
    this.#quiet.cancel(target.conversationId);
    // One archive at a time per sandbox (they share a work file there): after the one being taken.
    await this.#running.get(target.conversationId)?.promise;
    return this.#take(target, turnId);
  }

  async #take(target: CheckpointTarget, turnId: string | null): Promise<TakeOutcome> {
    const t0 = Date.now();
    const failed = (message: string, what: string): TakeOutcome => {
      this.#log.warn({ conversation: target.conversationId, reason: message }, what);
      return { ok: false, message };
    };
    const archive = await captureArchive(target.adapter, target.handle, { ...this.#spec, home: target.home });
    if (!archive.ok) return failed(archive.error.message, 'checkpoint not taken');
    const hostCwd = await this.#hostCwd(target);
    const blob = await this.#blobs.put(archive.value);
    if (!blob.ok) return failed(blob.error.message, 'checkpoint not stored');
    try {
      // The session the sandbox runs now is what a fork from this checkpoint loads.
      const [r] = rowsOf<Raw>(
        await this.#db.execute(sql`
        INSERT INTO checkpoints (account_id, conversation_id, turn_id, digest, size, holds)
        SELECT ${target.accountId}, ${target.conversationId}, ${turnId}, ${blob.value.digest}, ${blob.value.size},
          jsonb_build_object('home', ${target.home}::text, 'kind', 'home_archive', 'session_id', c.runtime_session_id)
            || ${JSON.stringify(hostCwd ? { host_cwd: hostCwd } : {})}::jsonb
        FROM conversations c WHERE c.id = ${target.conversationId}
        RETURNING ${COLUMNS}`),
      );
      if (!r) return { ok: false, message: 'the conversation was deleted while its checkpoint was taken' };
      await this.#prune(target.conversationId);
      this.#log.debug(
        { conversation: target.conversationId, bytes: blob.value.size, ms: Date.now() - t0 },
        'checkpoint taken',
      );
      return { ok: true, row: rowOf(r) };
    } catch (e) {
      return failed((e as Error).message, 'checkpoint row not stored');
    }
  }

  async latest(conversationId: string): Promise<CheckpointRow | null> {
    const [r] = rowsOf<Raw>(
      await this.#db.execute(sql`
        SELECT ${COLUMNS} FROM checkpoints
        WHERE conversation_id = ${conversationId} ORDER BY created_at DESC, id DESC LIMIT 1`),
    );
    return r ? rowOf(r) : null;
  }

  async forTurn(conversationId: string, turnId: string): Promise<CheckpointRow | null> {
    const [r] = rowsOf<Raw>(
      await this.#db.execute(sql`
        SELECT ${COLUMNS} FROM checkpoints
        WHERE conversation_id = ${conversationId} AND turn_id = ${turnId} ORDER BY created_at DESC, id DESC LIMIT 1`),
    );
    return r ? rowOf(r) : null;
  }

  async turnsKept(conversationId: string): Promise<Set<string>> {
    const rows = rowsOf<{ turn_id: string }>(
      await this.#db.execute(
        sql`SELECT DISTINCT turn_id FROM checkpoints WHERE conversation_id = ${conversationId} AND turn_id IS NOT NULL`,
      ),
    );
    return new Set(rows.map((r) => r.turn_id));
  }

  async copy(row: CheckpointRow, to: { conversationId: string; accountId: string; turnId: string }): Promise<void> {
    await this.#db.execute(sql`
      INSERT INTO checkpoints (account_id, conversation_id, turn_id, digest, size, holds)
      SELECT ${to.accountId}, ${to.conversationId}, ${to.turnId}, digest, size, holds || jsonb_build_object('forked_from', id)
      FROM checkpoints WHERE id = ${row.id}`);
  }

  async restore(target: CheckpointTarget): Promise<RestoreOutcome> {
    const row = await this.latest(target.conversationId);
    if (!row) return { ok: true, restored: null };
    const blob = await this.#blobs.get(row.digest);
    if (!blob.ok)
      return {
        ok: false,
        message: `the checkpoint of ${row.createdAt.toISOString()} cannot be read: ${blob.error.message}`,
      };
    const r = await restoreArchive(target.adapter, target.handle, { ...this.#spec, home: target.home }, blob.value);
    if (!r.ok)
      return {
        ok: false,
        message: `restoring the checkpoint of ${row.createdAt.toISOString()} failed: ${r.error.message}`,
      };
    const moved = await this.#relocateSessions(target, row.hostCwd);
    if (moved)
      return { ok: false, message: `restoring the checkpoint of ${row.createdAt.toISOString()} failed: ${moved}` };
    return { ok: true, restored: row };
  }
  /** The cwd's real path in this sandbox (a runner maps it into its directory; elsewhere it is the path). */
  async #hostCwd(target: CheckpointTarget): Promise<string | null> {
    if (!target.cwd) return null;
    if (!target.adapter.files.hostPath) return target.cwd;
    const r = await target.adapter.files.hostPath(target.handle, target.cwd);
    return r.ok ? r.value : null;
  }

  /**
   * A runtime filing its sessions by the cwd's real path finds none when the new sandbox's path differs:
   * they are moved to where it looks. Null when done or not needed; else why it failed.
   */
  async #relocateSessions(target: CheckpointTarget, oldCwd: string | null): Promise<string | null> {
    const now = await this.#hostCwd(target);
    if (!target.relocateSessions || !oldCwd || !now || now === oldCwd) return null;
    const r = await target.adapter.processes.exec(target.handle, 'sh', ['-c', target.relocateSessions(oldCwd, now)], {
      dir: target.home,
      stderrToStdout: true,
    });
    if (!r.ok) return `moving the agent's sessions failed: ${describeError(r.error)}`;
    if (r.value.exitCode !== 0)
      return `moving the agent's sessions failed (exit ${r.value.exitCode}): ${Buffer.from(r.value.output).toString('utf8').slice(-300)}`;
    return null;
  }

  async removeWith(conversationId: string, remove: () => Promise<void>): Promise<void> {
    // Nothing is taken of a conversation being deleted.
    this.#quiet.cancel(conversationId);
    // A checkpoint being taken would otherwise store its blob after the digests below were read.
    await this.#running.get(conversationId)?.promise;
    const digests = rowsOf<{ digest: string }>(
      await this.#db.execute(sql`SELECT DISTINCT digest FROM checkpoints WHERE conversation_id = ${conversationId}`),
    ).map((r) => r.digest);
    await remove();
    for (const digest of digests) {
      // A fork's checkpoint names its parent's blob: that one stays while any row names it.
      const [named] = rowsOf<{ n: number }>(
        await this.#db.execute(sql`SELECT 1 AS n FROM checkpoints WHERE digest = ${digest} LIMIT 1`),
      );
      if (named) continue;
      const r = await this.#blobs.delete(digest);
      if (!r.ok)
        this.#log.warn({ conversation: conversationId, reason: r.error.message }, 'checkpoint blob not removed');
    }
  }

  /** Takes the checkpoints waiting for quiet now, then waits for every one being taken (shutdown, tests). */
  async settled(): Promise<void> {
    this.#quiet.flush();
    while (this.#running.size > 0) await Promise.all([...this.#running.values()].map((r) => r.promise));
  }

  /** Keeps the newest few rows of the conversation; blobs no row names go at the next collection. */
  async #prune(conversationId: string): Promise<void> {
    await this.#db.execute(sql`
      DELETE FROM checkpoints WHERE conversation_id = ${conversationId} AND id NOT IN (
        SELECT id FROM checkpoints WHERE conversation_id = ${conversationId} ORDER BY created_at DESC, id DESC LIMIT ${this.#keep})`);
  }

  /**
   * Removes blobs no checkpoint names (a deleted conversation's, pruned ones) older than `graceMs`; the
   * store is shared with prompt images, so a blob a turn names is kept too.
   */
  async collect(graceMs = 10 * 60_000): Promise<number> {
    const referenced = new Set(
      rowsOf<{ digest: string }>(
        await this.#db.execute(sql`SELECT digest FROM checkpoints
          UNION SELECT e->>'digest' FROM turns, jsonb_array_elements(images) e WHERE jsonb_array_length(images) > 0`),
      ).map((r) => r.digest),
    );
    const r = await collectBlobs(this.#blobs, referenced, { graceMs });
    for (const e of r.errors) this.#log.warn({ err: e }, 'could not remove a checkpoint blob');
    return r.removed.length;
  }
}
