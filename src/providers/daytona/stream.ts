/**
 * Follows one Daytona session command by polling the shim's journal from byte zero, fetching only
 * the bytes not yet read (the follow WebSocket is not trusted), and ends it with the shim's exit
 * sentinel, the API field only as a fallback.
 */
import type { FrameSink, SandboxError, SandboxResult } from '../../sandbox/index.ts';
import { ok, sandboxError } from '../../sandbox/index.ts';
import type { Toolbox } from './client.ts';
import { parseJournal } from './journal.ts';

export interface PollerOptions {
  readonly ref: string;
  readonly owner: FrameSink;
  /** The current toolbox; re-resolved after `invalidate`, because a start may move the proxy. */
  readonly toolbox: () => Promise<SandboxResult<Toolbox>>;
  readonly invalidate: () => void;
  readonly sessionId: string;
  readonly cmdId: string;
  readonly stateDir: string;
  readonly intervalMs: number;
  /** Consecutive failed polls before the stream ends with `error`. */
  readonly maxFailures: number;
  /**
   * Whether the shim process is still alive (`false` = gone without a sentinel). Daytona may never
   * record an exit code, so a shim killed before it wrote the sentinel is only noticed this way.
   */
  readonly shimAlive: () => Promise<SandboxResult<boolean>>;
  /** Called once, after the terminal frame. */
  readonly onEnd: (how: 'exit' | 'error') => void;
}

type Journal =
  | { readonly kind: 'bytes'; readonly bytes: Uint8Array; readonly complete: boolean }
  | { readonly kind: 'gone' };

/** Ticks after the sentinel appears to let Daytona's line labelers drain into the journal. */
const DRAIN_STABLE_TICKS = 2;
const DRAIN_MAX_TICKS = 10;
/** Ticks the API claims an exit without a sentinel before the API field is believed. */
const FALLBACK_TICKS = 3;
/** Every this many quiet ticks the shim's liveness is probed (one extra exec). */
const LIVENESS_EVERY = 10;

export class JournalPoller {
  readonly #o: PollerOptions;
  #offset = 0;
  #stopped = false;
  #ended = false;
  #failures = 0;
  #timer: NodeJS.Timeout | undefined;
  #wake: (() => void) | undefined;

  constructor(opts: PollerOptions) {
    this.#o = opts;
  }

  get ended(): boolean {
    return this.#ended;
  }

  start(): void {
    void this.#run().catch((cause: unknown) => {
      this.#terminal({
        kind: 'error',
        error: sandboxError('provider', `poller: ${String(cause)}`, { provider: 'daytona' }),
      });
    });
  }

  /** Stops delivering frames; the remote command keeps running. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#wake?.();
  }

  /**
   * What is new in the journal. The shim keeps its own (`<stateDir>/log`), read by byte range;
   * a session spawned before the shim did has only Daytona's, read whole and cut here.
   */
  async #read(toolbox: Toolbox): Promise<SandboxResult<Journal>> {
    const own = await toolbox.readFrom(`${this.#o.stateDir}/log`, this.#offset);
    if (!own.ok) return own;
    if (own.value.kind === 'bytes') return ok({ kind: 'bytes', bytes: own.value.bytes, complete: true });
    const logs = await toolbox.logs(this.#o.sessionId, this.#o.cmdId);
    if (!logs.ok) return logs;
    if (logs.value.kind === 'gone') return ok({ kind: 'gone' });
    return ok({
      kind: 'bytes',
      bytes: logs.value.bytes.subarray(Math.min(this.#offset, logs.value.bytes.length)),
      complete: false,
    });
  }

  async #run(): Promise<void> {
    let fallbackTicks = 0;
    let tick = 0;
    while (!this.#stopped) {
      tick++;
      const tb = await this.#o.toolbox();
      if (!tb.ok) {
        if (this.#failed(tb.error)) return;
        await this.#sleep();
        continue;
      }
      const toolbox = tb.value;
      const read = await this.#read(toolbox);
      if (!read.ok) {
        if (this.#failed(read.error)) return;
        await this.#sleep();
        continue;
      }
      if (read.value.kind === 'bytes') this.#emit(read.value.bytes, false);

      const sentinel = await readExitSentinel(toolbox, this.#o.stateDir);
      if (!sentinel.ok) {
        if (this.#failed(sentinel.error)) return;
        await this.#sleep();
        continue;
      }
      if (sentinel.value !== null) {
        await this.#drainThenExit(toolbox, sentinel.value);
        return;
      }
      const record = await toolbox.getCommand(this.#o.sessionId, this.#o.cmdId);
      if (read.value.kind === 'gone' || (!record.ok && record.error.code === 'not_found')) {
        // The session is gone (terminated, or the daemon restarted) and no sentinel was written:
        // the shim was killed. There is no honest exit code to report.
        this.#terminal({ kind: 'error', error: sandboxError('closed_before_exit', 'session_gone') });
        return;
      }
      if (record.ok && typeof record.value.exitCode === 'number' && record.value.exitCode >= 0) {
        // The API says it ended but the shim left no sentinel; give the shim a few ticks, then
        // fall back to the API's code, which is real data rather than an invention.
        if (++fallbackTicks >= FALLBACK_TICKS) {
          await this.#drainThenExit(toolbox, record.value.exitCode);
          return;
        }
      }
      if (tick % LIVENESS_EVERY === 0) {
        const alive = await this.#o.shimAlive();
        if (alive.ok && !alive.value) {
          // Re-read: the shim may have written the sentinel just before it went away.
          const last = await readExitSentinel(toolbox, this.#o.stateDir);
          if (last.ok && last.value !== null) {
            await this.#drainThenExit(toolbox, last.value);
            return;
          }
          if (last.ok) {
            const rest = await this.#read(toolbox);
            if (rest.ok && rest.value.kind === 'bytes') this.#emit(rest.value.bytes, true);
            this.#terminal({ kind: 'error', error: sandboxError('closed_before_exit', 'shim_gone_without_exit') });
            return;
          }
        }
      }
      this.#failures = 0;
      await this.#sleep();
    }
  }

  /**
   * After the exit is known, sends the rest of the journal and `exit`. The shim's own journal is
   * complete by then; Daytona's is written by labelers that may still be draining, so that one is
   * read until it stops growing.
   */
  async #drainThenExit(toolbox: Toolbox, code: number): Promise<void> {
    let stable = 0;
    for (let tick = 0; tick < DRAIN_MAX_TICKS && !this.#stopped; tick++) {
      const read = await this.#read(toolbox);
      if (read.ok && read.value.kind === 'bytes') {
        if (read.value.complete) {
          this.#emit(read.value.bytes, true);
          break;
        }
        const before = this.#offset;
        this.#emit(read.value.bytes, false);
        stable = this.#offset === before ? stable + 1 : 0;
        const record = await toolbox.getCommand(this.#o.sessionId, this.#o.cmdId);
        // Since daytona#4422 the daemon records the exit only after output drained.
        if ((record.ok && typeof record.value.exitCode === 'number') || stable >= DRAIN_STABLE_TICKS) {
          const last = await this.#read(toolbox);
          if (last.ok && last.value.kind === 'bytes') this.#emit(last.value.bytes, true);
          break;
        }
      } else if (read.ok && read.value.kind === 'gone') {
        break;
      }
      await this.#sleep();
    }
    this.#terminal({ kind: 'exit', code });
  }

  /** `chunk` starts at the current offset; only complete lines are consumed unless `final`. */
  #emit(chunk: Uint8Array, final: boolean): void {
    if (this.#stopped || this.#ended || chunk.length === 0) return;
    const parsed = parseJournal(chunk, final);
    this.#offset += parsed.consumed;
    for (const c of parsed.chunks) this.#o.owner({ type: c.stream, ref: this.#o.ref, data: c.data });
  }

  /** Counts a failed poll; true when the stream has ended because of it. */
  #failed(e: SandboxError): boolean {
    this.#o.invalidate();
    if (e.code !== 'unavailable' && e.code !== 'rate_limited' && e.code !== 'provider') {
      this.#terminal({ kind: 'error', error: e });
      return true;
    }
    if (++this.#failures >= this.#o.maxFailures) {
      this.#terminal({ kind: 'error', error: e });
      return true;
    }
    return false;
  }

  #terminal(t: { kind: 'exit'; code: number } | { kind: 'error'; error: SandboxError }): void {
    if (this.#ended) return;
    this.#ended = true;
    if (!this.#stopped) {
      if (t.kind === 'exit') this.#o.owner({ type: 'exit', ref: this.#o.ref, code: t.code });
      else this.#o.owner({ type: 'error', ref: this.#o.ref, error: t.error });
    }
    this.#o.onEnd(t.kind);
  }

  #sleep(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#timer = setTimeout(resolve, this.#o.intervalMs);
    });
  }
}

/** The shim's exit code, or null while the command runs. A garbled file counts as not yet written. */
export async function readExitSentinel(toolbox: Toolbox, stateDir: string): Promise<SandboxResult<number | null>> {
  const r = await toolbox.download(`${stateDir}/exit`);
  if (!r.ok) return r;
  if (r.value.kind === 'absent') return { ok: true, value: null };
  const t = Buffer.from(r.value.bytes).toString('utf8').trim();
  return { ok: true, value: /^\d{1,3}$/.test(t) ? Number(t) : null };
}
