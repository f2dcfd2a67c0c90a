/**
 * A conversation's checkpoints: taken after a completed turn (coalesced per conversation, off the
 * turn's path) and restored into a new sandbox when the old one is gone; blobs in the blob store,
 * rows in `checkpoints`, the newest few kept per conversation.
 */
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { describeError, type Handle, type SandboxAdapter } from '../../sandbox/index.ts';
import { type EngineDb, rowsOf } from '../store/engine-db.ts';
import type { BlobStore } from './blobs.ts';
import { collectBlobs } from './collect.ts';
import { captureArchive, type CheckpointSpec, DEFAULT_SPEC, restoreArchive } from './sandbox-archive.ts';

export interface CheckpointTarget {
  readonly conversationId: string;
  readonly accountId: string;
  readonly adapter: SandboxAdapter;
  readonly handle: Handle;
  /** The sandbox path of the runtime's HOME. */
  readonly home: string;
  /** The runtime's cwd (sandbox path) and, for a runtime filing sessions by its real path, where they go. */
  readonly cwd?: string;
  readonly sessionsOfCwd?: ((hostCwd: string) => string) | undefined;
}

export interface CheckpointRow {
  readonly id: string;
  readonly turnId: string | null;
  readonly digest: string;
  readonly size: number;
  readonly createdAt: Date;
  /** The cwd's real path where it was taken (a runner's sandbox directory), when it was recorded. */
  readonly hostCwd: string | null;
}

export type RestoreOutcome =
  | { readonly ok: true; readonly restored: CheckpointRow | null }
  | { readonly ok: false; readonly message: string };

/** What the engine asks of checkpoints (a narrow port, so the engine knows no blob or archive). */
export interface ConversationCheckpoints {
  /** After a completed turn: schedules a checkpoint; returns at once. */
  afterTurn(target: CheckpointTarget, turnId: string): void;
  /** Now, awaited (before a sandbox is parked by destroying it). */
  take(target: CheckpointTarget, turnId: string | null): Promise<void>;
  /**
   * As the sandbox parks, its agent stopped (so what it writes at exit is in): after the one being
   * taken, one more, named after the conversation's newest completed turn.
   */
  atPark(target: CheckpointTarget): Promise<void>;
  /** The newest checkpoint of the conversation unpacked into the new sandbox; null when it has none. */
  restore(target: CheckpointTarget): Promise<RestoreOutcome>;
  /** Waits for the checkpoints being taken (shutdown, tests). */
  settled(): Promise<void>;
}

export class CheckpointService implements ConversationCheckpoints {
  readonly #db: EngineDb;
  readonly #blobs: BlobStore;
  readonly #log: Logger;
  readonly #spec: Omit<CheckpointSpec, 'home'>;
  readonly #keep: number;
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
  }) {
    this.#db = deps.db;
    this.#blobs = deps.blobs;
    this.#log = deps.logger.child({ part: 'checkpoints' });
    this.#spec = { ...DEFAULT_SPEC, ...deps.spec };
    this.#keep = deps.keep ?? 3;
  }

  afterTurn(target: CheckpointTarget, turnId: string): void {
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
        await this.take(next.target, next.turnId);
        next = entry.again;
      }
    })().finally(() => this.#running.delete(target.conversationId));
    this.#running.set(target.conversationId, entry);
  }

  async atPark(target: CheckpointTarget): Promise<void> {
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

  async take(target: CheckpointTarget, turnId: string | null): Promise<void> {
    const t0 = Date.now();
    const archive = await captureArchive(target.adapter, target.handle, { ...this.#spec, home: target.home });
    if (!archive.ok) {
      this.#log.warn({ conversation: target.conversationId, reason: archive.error.message }, 'checkpoint not taken');
      return;
    }
    const hostCwd = await this.#hostCwd(target);
    const blob = await this.#blobs.put(archive.value);
    if (!blob.ok) {
      this.#log.warn({ conversation: target.conversationId, reason: blob.error.message }, 'checkpoint not stored');
      return;
    }
    try {
      await this.#db.execute(sql`
        INSERT INTO checkpoints (account_id, conversation_id, turn_id, digest, size, holds)
        SELECT ${target.accountId}, ${target.conversationId}, ${turnId}, ${blob.value.digest}, ${blob.value.size},
          ${JSON.stringify({ home: target.home, kind: 'home_archive', ...(hostCwd ? { host_cwd: hostCwd } : {}) })}::jsonb
        WHERE EXISTS (SELECT 1 FROM conversations WHERE id = ${target.conversationId})`);
      await this.#prune(target.conversationId);
      this.#log.debug(
        { conversation: target.conversationId, bytes: blob.value.size, ms: Date.now() - t0 },
        'checkpoint taken',
      );
    } catch (e) {
      this.#log.warn({ conversation: target.conversationId, err: (e as Error).message }, 'checkpoint row not stored');
    }
  }

  async latest(conversationId: string): Promise<CheckpointRow | null> {
    const [r] = rowsOf<{
      id: string;
      turn_id: string | null;
      digest: string;
      size: string | number;
      created_at: Date | string;
      holds: { host_cwd?: unknown } | string | null;
    }>(
      await this.#db.execute(sql`
        SELECT id, turn_id, digest, size, created_at, holds FROM checkpoints
        WHERE conversation_id = ${conversationId} ORDER BY created_at DESC, id DESC LIMIT 1`),
    );
    if (!r) return null;
    const holds = typeof r.holds === 'string' ? JSON.parse(r.holds) : r.holds;
    const hostCwd = typeof holds?.host_cwd === 'string' ? holds.host_cwd : null;
    return {
      id: r.id,
      turnId: r.turn_id,
      digest: r.digest,
      size: Number(r.size),
      createdAt: new Date(r.created_at),
      hostCwd,
    };
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
    if (!target.sessionsOfCwd || !oldCwd || !now || now === oldCwd) return null;
    const from = target.sessionsOfCwd(oldCwd);
    const to = target.sessionsOfCwd(now);
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const r = await target.adapter.processes.exec(
      target.handle,
      'sh',
      [
        '-c',
        `set -eu; if [ -d ${q(from)} ]; then mkdir -p ${q(to)}; cp -a ${q(from)}/. ${q(to)}/; rm -rf ${q(from)}; fi`,
      ],
      { dir: target.home, stderrToStdout: true },
    );
    if (!r.ok) return `moving the agent's sessions failed: ${describeError(r.error)}`;
    if (r.value.exitCode !== 0)
      return `moving the agent's sessions failed (exit ${r.value.exitCode}): ${Buffer.from(r.value.output).toString('utf8').slice(-300)}`;
    return null;
  }

  async settled(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running.values()].map((r) => r.promise));
  }

  /** Keeps the newest few rows of the conversation; blobs no row names go at the next collection. */
  async #prune(conversationId: string): Promise<void> {
    await this.#db.execute(sql`
      DELETE FROM checkpoints WHERE conversation_id = ${conversationId} AND id NOT IN (
        SELECT id FROM checkpoints WHERE conversation_id = ${conversationId} ORDER BY created_at DESC, id DESC LIMIT ${this.#keep})`);
  }

  /** Removes blobs no checkpoint names (a deleted conversation's, pruned ones) older than `graceMs`. */
  async collect(graceMs = 10 * 60_000): Promise<number> {
    const referenced = new Set(
      rowsOf<{ digest: string }>(await this.#db.execute(sql`SELECT DISTINCT digest FROM checkpoints`)).map(
        (r) => r.digest,
      ),
    );
    const r = await collectBlobs(this.#blobs, referenced, { graceMs });
    for (const e of r.errors) this.#log.warn({ err: e }, 'could not remove a checkpoint blob');
    return r.removed.length;
  }
}
