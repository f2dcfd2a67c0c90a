/**
 * One live spawned or attached command, seen through its journal replayer: turns the replayer's
 * envd events into contract frames, holds them until the caller has the Command, and guarantees
 * exactly one terminal frame after all output.
 */
import type { FrameSink, SandboxError, StreamFrame } from '../../sandbox/index.ts';
import { sandboxError } from '../../sandbox/index.ts';
import type { EndEvent, ProcessEventSink, ProcessStream, StreamClose } from './envd.ts';

/** Go's names for the signals a process most often dies of, as envd reports them in `status`. */
const SIGNALS: Readonly<Record<string, number>> = {
  hangup: 1,
  interrupt: 2,
  quit: 3,
  aborted: 6,
  killed: 9,
  'user defined signal 1': 10,
  'user defined signal 2': 12,
  'broken pipe': 13,
  terminated: 15,
};

/** The contract's own code for a stream that closed without a verdict (transient for retry). */
export const closedBeforeExit = (why?: string): SandboxError => sandboxError('closed_before_exit', why);

/**
 * The exit code an `end` event proves. proto3 JSON omits a zero, so an absent `exitCode` is 0
 * only when `exited` says the process exited normally; a signal death is 128 + signal.
 * `undefined` when the event proves nothing.
 */
export function exitCodeOf(e: EndEvent): number | undefined {
  if (e.exited) return e.exitCode ?? 0;
  const m = /^signal: (.+)$/.exec(e.status);
  const sig = m?.[1] ? SIGNALS[m[1]] : undefined;
  return sig === undefined ? undefined : 128 + sig;
}

export interface LiveCommandInit {
  readonly ref: string;
  readonly owner: FrameSink;
  /** The envd tag stdin goes to (the session's shim); null when stdin was not asked for. */
  readonly stdinTag: string | null;
  /** Called once when the command ends locally (terminal frame sent, or stopped). */
  readonly onDone: () => void;
  /** Ends the replayer process once nobody reads it (it would otherwise tail until the session ends). */
  readonly onAbandon: (pid: number) => Promise<void>;
}

export class LiveCommand implements ProcessEventSink {
  readonly ref: string;
  readonly stdinTag: string | null;
  readonly #owner: FrameSink;
  readonly #onDone: () => void;
  readonly #onAbandon: (pid: number) => Promise<void>;
  #held: StreamFrame[] | null = [];
  #terminal = false;
  #stopped = false;
  #stream: ProcessStream | null = null;
  #pid: number | null = null;
  #ack: { resolve: (r: { ok: true; pid: number } | { ok: false; error: SandboxError }) => void } | null = null;
  readonly acked: Promise<{ ok: true; pid: number } | { ok: false; error: SandboxError }>;

  constructor(init: LiveCommandInit) {
    this.ref = init.ref;
    this.stdinTag = init.stdinTag;
    this.#owner = init.owner;
    this.#onDone = init.onDone;
    this.#onAbandon = init.onAbandon;
    this.acked = new Promise((resolve) => {
      this.#ack = { resolve };
    });
  }

  /** Whether stdin writes can still reach the process as far as this end knows. */
  get live(): boolean {
    return !this.#terminal && !this.#stopped;
  }

  attachStream(s: ProcessStream): void {
    this.#stream = s;
    if (this.#stopped) s.abort();
  }

  /** Spawn has returned: release held frames in order, then deliver live. */
  release(): void {
    const held = this.#held ?? [];
    this.#held = null;
    for (const f of held) this.#deliver(f);
  }

  /**
   * The stream is going away under us (the sandbox is about to pause): close it now, so envd
   * sees the close before the snapshot, and end the command as a close without exit.
   */
  drop(why: string): Promise<void> {
    if (this.#stopped || this.#terminal) return Promise.resolve();
    this.#stream?.abort();
    this.#emit({ type: 'error', ref: this.ref, error: closedBeforeExit(why) });
    return this.#abandon();
  }

  /**
   * Tears down the local end only: the session's command keeps running, the replayer that read
   * it for this Command is ended. Sends no more frames.
   */
  stop(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#stopped = true;
    this.#stream?.abort();
    this.#settleAck({ ok: false, error: sandboxError('unavailable', 'stopped before start') });
    const wasLive = !this.#terminal;
    if (wasLive) this.#onDone();
    return wasLive ? this.#abandon() : Promise.resolve();
  }

  #abandon(): Promise<void> {
    const pid = this.#pid;
    return pid === null ? Promise.resolve() : this.#onAbandon(pid).catch(() => undefined);
  }

  #settleAck(r: { ok: true; pid: number } | { ok: false; error: SandboxError }): void {
    const a = this.#ack;
    this.#ack = null;
    a?.resolve(r);
  }

  #deliver(f: StreamFrame): void {
    if (this.#stopped) return;
    try {
      this.#owner(f);
    } catch {
      // A throwing owner must not take the stream down with it.
    }
  }

  #emit(f: StreamFrame): void {
    if (this.#terminal || this.#stopped) return;
    if (f.type === 'exit' || f.type === 'error') {
      this.#terminal = true;
      this.#onDone();
    }
    if (this.#held) this.#held.push(f);
    else this.#deliver(f);
  }

  start(pid: number): void {
    this.#pid = pid;
    this.#settleAck({ ok: true, pid });
  }

  stdout(data: Buffer): void {
    if (data.length) this.#emit({ type: 'stdout', ref: this.ref, data: new Uint8Array(data) });
  }

  stderr(data: Buffer): void {
    if (data.length) this.#emit({ type: 'stderr', ref: this.ref, data: new Uint8Array(data) });
  }

  end(e: EndEvent): void {
    const code = exitCodeOf(e);
    // The replayer kills itself when the journal holds no verdict: that is a close without exit.
    if (code !== undefined && e.exited) this.#emit({ type: 'exit', ref: this.ref, code });
    else this.#emit({ type: 'error', ref: this.ref, error: closedBeforeExit(e.status || e.error || 'no exit code') });
  }

  closed(how: StreamClose): void {
    if (this.#pid === null) {
      const error =
        how.kind === 'end_stream' && how.error
          ? how.error
          : closedBeforeExit(how.kind === 'dropped' ? how.detail : 'before start');
      this.#settleAck({ ok: false, error });
      this.#terminal = true;
      return;
    }
    if (this.#terminal || this.#stopped) return;
    const why = how.kind === 'dropped' ? how.detail : (how.error?.detail ?? 'end-stream without end');
    // A replay that stopped early never implies the rest: no exit code is recovered here.
    this.#emit({ type: 'error', ref: this.ref, error: closedBeforeExit(why) });
  }
}
