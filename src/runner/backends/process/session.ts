/**
 * One spawned command of the process backend: its process group, its on-disk journal, and the
 * single "attached" connection that receives live output after a replay from byte zero.
 */
import type { ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import { outputFrame } from '../../../wire/index.ts';
import type { StreamFrame } from '../../../wire/index.ts';
import type { SessionInfo, StreamOut } from '../../backend.ts';
import { stopGroup } from './groups.ts';
import type { Journal, JournalRecord } from './journal.ts';

/**
 * Output is journaled and framed in chunks of at most this size: node's pipe reads are 64 KiB, so
 * a read is one frame and one journal record (32 KiB, the reference daemon's read size, cost a
 * fifth more CPU per MB streamed).
 */
export const OUTPUT_CHUNK = 64 * 1024;
/** How long an exited session's pipes may keep delivering before the exit frame is written. */
const DRAIN_MS = 250;
/** Below this many unread journal bytes a replay finishes synchronously and hands over. */
const SYNC_TAIL = 256 * 1024;
/** A replay waits for the transport to flush after this many bytes. */
const FLUSH_EVERY = 1024 * 1024;
/**
 * Consecutive journal records of one stream travel together in replay frames of up to this many
 * output bytes: the per-frame work on both ends (framing, parsing, one delivery per frame) then
 * counts per MiB rather than per record. Far below the wire's 64 MiB frame limit.
 */
const REPLAY_FRAME_BYTES = 1024 * 1024;

/** How many write ids a session remembers; a retry repeats only the pieces of the write cut short. */
const REMEMBERED_WRITES = 256;

export const SIGNAL_EXIT = 137;
export const START_FAILURE_EXIT = 127;

export class Session {
  readonly id: string;
  readonly sandbox: string;
  readonly command: string;
  readonly createdAt = new Date();
  lastActivityAt: Date | null = null;
  exitCode: number | undefined;
  readonly journal: Journal;
  readonly #log: Logger;
  #child: ChildProcess | null = null;
  #out: StreamOut | null = null;
  #attached = false;
  /** Bumped by every attach and detach, so an older replay stops quietly. */
  #generation = 0;
  #exited!: Promise<void>;
  #markExited!: () => void;
  /** The outcomes of the latest writes that carried a write id, oldest first. */
  readonly #writes = new Map<string, Promise<Error | null>>();

  constructor(id: string, sandbox: string, command: string, journal: Journal, logger: Logger) {
    this.id = id;
    this.sandbox = sandbox;
    this.command = command;
    this.journal = journal;
    this.#log = logger;
    this.#exited = new Promise((r) => (this.#markExited = r));
  }

  get live(): boolean {
    return this.exitCode === undefined;
  }
  get attached(): boolean {
    return this.#attached;
  }
  get exited(): Promise<void> {
    return this.#exited;
  }
  get child(): ChildProcess | null {
    return this.#child;
  }

  /** Wires a started child: output and exit go through record(), which journals and emits. */
  adopt(child: ChildProcess): void {
    this.#child = child;
    const pending: Promise<void>[] = [];
    for (const stream of ['stdout', 'stderr'] as const) {
      const s = child[stream];
      if (!s) continue;
      s.on('data', (buf: Buffer) => {
        for (let i = 0; i < buf.length; i += OUTPUT_CHUNK) this.record(stream, buf.subarray(i, i + OUTPUT_CHUNK));
      });
      s.on('error', (e) => this.#log.debug({ session: this.id, err: e }, 'runner: session output error'));
      pending.push(new Promise((r) => s.once('close', () => r())));
    }
    child.stdin?.on('error', (e) => this.#log.debug({ session: this.id, err: e }, 'runner: session stdin error'));
    const streamsClosed = Promise.all(pending);
    let done = false;
    const finish = (code: number) => {
      if (done) return;
      done = true;
      // Output may still sit in the pipes after the leader exits; wait briefly, never forever
      // (a background child that kept the pipe open must not hold the exit frame back).
      const timer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        this.#end(code);
      }, DRAIN_MS);
      void streamsClosed.then(() => {
        clearTimeout(timer);
        this.#end(code);
      });
    };
    child.once('exit', (code, signal) => finish(signal !== null ? SIGNAL_EXIT : (code ?? 1)));
    child.once('error', (e) => {
      this.#log.warn({ session: this.id, err: e }, 'runner: session process error');
      finish(1);
    });
  }

  /** A command that never started: a finished session telling why, with exit 127. */
  failStart(message: string): void {
    this.record('stdout', Buffer.from(`fountain runner: ${message}\n`));
    this.#end(START_FAILURE_EXIT);
  }

  /** Journal first, then the wire, in one synchronous step, so journal order is wire order. */
  record(kind: 'stdout' | 'stderr', data: Buffer): void {
    if (data.length === 0) return;
    this.lastActivityAt = new Date();
    this.journal.append(kind, data);
    this.#emit(outputFrame(kind, this.id, data));
  }

  #end(code: number): void {
    if (this.exitCode !== undefined) return;
    this.exitCode = code;
    const payload = Buffer.allocUnsafe(4);
    payload.writeInt32BE(code, 0);
    this.journal.append('exit', payload);
    this.journal.seal();
    this.#emit({ stream: 'exit', session_id: this.id, code });
    try {
      this.#child?.stdin?.destroy();
    } catch {
      // already closed
    }
    this.#markExited();
  }

  #emit(frame: StreamFrame): void {
    if (this.#attached && this.#out?.open) this.#out.send(frame);
  }

  /**
   * Writes to stdin once per write id: a repeat (the server retrying after its connection dropped before
   * the reply) gets the first write's outcome, awaited if still under way, and writes nothing.
   */
  writeStdinOnce(writeId: string, data: Buffer): Promise<Error | null> {
    const known = this.#writes.get(writeId);
    if (known) return known;
    const write = this.writeStdin(data);
    this.#writes.set(writeId, write);
    // Only the latest writes can be retried: the server retries one write at a time, in order.
    if (this.#writes.size > REMEMBERED_WRITES) {
      const oldest = this.#writes.keys().next().value;
      if (oldest !== undefined) this.#writes.delete(oldest);
    }
    return write;
  }

  /** Writes to stdin; resolves with the write error, if any. */
  writeStdin(data: Buffer): Promise<Error | null> {
    const stdin = this.#child?.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) return Promise.resolve(new Error('stdin is closed'));
    this.lastActivityAt = new Date();
    return new Promise((resolve) => {
      try {
        stdin.write(data, (e) => resolve(e ?? null));
      } catch (e) {
        resolve(e instanceof Error ? e : new Error(String(e)));
      }
    });
  }

  get hasStdin(): boolean {
    return this.#child?.stdin != null;
  }

  closeStdin(): void {
    const stdin = this.#child?.stdin;
    if (stdin && !stdin.writableEnded) stdin.end();
  }

  /** The connection no longer listens: live output is journaled only. */
  detach(): void {
    this.#generation++;
    this.#attached = false;
    this.#out = null;
  }

  /**
   * Replays the journal from its oldest byte to `out` with `replay_for`, then makes `out` the
   * live receiver. Live output produced meanwhile is journaled and reaches `out` through the
   * replay, and the hand-over happens in one synchronous step, so nothing is lost or repeated.
   */
  beginReplay(out: StreamOut, requestId: number): void {
    const gen = ++this.#generation;
    this.#attached = false;
    this.#out = null;
    let reader;
    try {
      reader = this.journal.reader();
    } catch (e) {
      this.#log.warn({ session: this.id, err: e }, 'runner: journal unreadable; attaching without replay');
      this.#out = out;
      this.#attached = true;
      return;
    }
    const send = (records: readonly JournalRecord[]): number => {
      let bytes = 0;
      for (const run of replayRuns(records, REPLAY_FRAME_BYTES)) {
        const first = run[0]!;
        if (first.kind === 'exit')
          out.send({ stream: 'exit', session_id: this.id, code: first.payload.readInt32BE(0), replay_for: requestId });
        else
          out.send(
            outputFrame(
              first.kind,
              this.id,
              run.map((r) => r.payload),
              requestId,
            ),
          );
        for (const r of run) bytes += r.payload.length;
      }
      return bytes;
    };
    const current = () => gen === this.#generation && out.open;
    // Records read into a reused buffer are gone by the next read: only for a sink that copies them at once.
    const reuse = out.copiesOnSend === true;
    void (async () => {
      try {
        let sinceFlush = 0;
        while (current() && reader.pending() > SYNC_TAIL) {
          sinceFlush += send(await reader.next(reuse));
          if (sinceFlush >= FLUSH_EVERY) {
            sinceFlush = 0;
            await out.drained();
          }
        }
        if (!current()) return;
        send(reader.rest());
        if (reader.gap)
          this.#log.warn({ session: this.id }, 'runner: replay skipped a journal segment pruned while it was read');
        this.#out = out;
        this.#attached = true;
      } catch (e) {
        this.#log.warn({ session: this.id, err: e }, 'runner: replay failed');
      } finally {
        reader.close();
      }
    })();
  }

  /** Ends a live session's process group: SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs: number, afterKillMs?: number): Promise<void> {
    const pid = this.#child?.pid;
    if (!this.live || pid === undefined) return;
    await stopGroup(pid, this.#exited, graceMs, afterKillMs);
  }

  info(): SessionInfo {
    const base = {
      id: this.id,
      command: this.command,
      created_at: this.createdAt.toISOString(),
      last_activity_at: this.lastActivityAt?.toISOString() ?? null,
      tty: false as const,
    };
    return this.exitCode === undefined ? base : { ...base, exit_code: this.exitCode };
  }
}

/** Groups records into the runs one replay frame carries: same-stream output up to `max` bytes, an exit alone. */
export function replayRuns(records: readonly JournalRecord[], max: number): JournalRecord[][] {
  const runs: JournalRecord[][] = [];
  let run: JournalRecord[] = [];
  let size = 0;
  for (const r of records) {
    if (run.length > 0 && (r.kind === 'exit' || run[0]!.kind !== r.kind || size + r.payload.length > max)) {
      runs.push(run);
      run = [];
      size = 0;
    }
    run.push(r);
    size += r.payload.length;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}
