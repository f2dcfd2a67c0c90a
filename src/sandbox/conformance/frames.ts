/**
 * A frame collector for the conformance suite: an owner sink that records every frame and
 * lets a test wait for the next matching one, and check the one-terminal-frame rule.
 */
import assert from 'node:assert/strict';
import type { FrameSink, StreamFrame } from '../types.ts';

export type FramePredicate = (frame: StreamFrame) => boolean;
export type TerminalFrame = Extract<StreamFrame, { type: 'exit' } | { type: 'error' }>;

export const isTerminal = (f: StreamFrame): f is TerminalFrame => f.type === 'exit' || f.type === 'error';

/** Quiet period used to assert that nothing more arrives (50 ms). */
export const SETTLE_MS = 50;

interface Waiter {
  readonly predicate: FramePredicate;
  readonly resolve: (f: StreamFrame) => void;
}

const concat = (chunks: readonly Uint8Array[]): Uint8Array => {
  const total = chunks.reduce((n, c) => n + c.byteLength, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
};

const describeFrame = (f: StreamFrame): string => {
  switch (f.type) {
    case 'stdout':
    case 'stderr':
      return `${f.type}(${f.ref}, ${JSON.stringify(new TextDecoder().decode(f.data))})`;
    case 'exit':
      return `exit(${f.ref}, ${f.code})`;
    case 'error':
      return `error(${f.ref}, ${f.error?.code}${f.error?.detail ? `: ${f.error.detail}` : ''})`;
  }
};

export class FrameCollector {
  readonly frames: StreamFrame[] = [];
  #cursor = 0;
  #waiters: Waiter[] = [];
  #listeners: Array<() => void> = [];

  /** Pass this as `owner`; it never throws back into the adapter. */
  readonly sink: FrameSink = (frame) => {
    this.frames.push(frame);
    this.#drain();
    for (const l of this.#listeners.slice()) l();
  };

  /**
   * The next not-yet-consumed frame matching `predicate`; consumes up to and including it.
   * Rejects (with every frame seen so far) if none arrives within `timeoutMs`.
   */
  next(predicate: FramePredicate, timeoutMs: number, what = 'a matching frame'): Promise<StreamFrame> {
    const found = this.#take(predicate);
    if (found) return Promise.resolve(found);
    return new Promise<StreamFrame>((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(
          new assert.AssertionError({ message: `no ${what} within ${timeoutMs} ms; frames so far: ${this.dump()}` }),
        );
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  /** The next stdout frame of `ref`. */
  nextStdout(ref: string, timeoutMs: number): Promise<Extract<StreamFrame, { type: 'stdout' }>> {
    return this.next((f) => f.ref === ref && f.type === 'stdout', timeoutMs, `stdout for ${ref}`) as Promise<
      Extract<StreamFrame, { type: 'stdout' }>
    >;
  }

  /** The terminal frame of `ref` (it must come after everything consumed so far). */
  terminal(ref: string, timeoutMs: number): Promise<TerminalFrame> {
    return this.next(
      (f) => f.ref === ref && isTerminal(f),
      timeoutMs,
      `terminal frame for ${ref}`,
    ) as Promise<TerminalFrame>;
  }

  /** All bytes of one stream of `ref` seen so far, concatenated in arrival order. */
  bytes(ref: string, type: 'stdout' | 'stderr' = 'stdout'): Uint8Array {
    return concat(
      this.frames
        .filter((f): f is Extract<StreamFrame, { type: 'stdout' | 'stderr' }> => f.ref === ref && f.type === type)
        .map((f) => f.data),
    );
  }

  text(ref: string, type: 'stdout' | 'stderr' = 'stdout'): string {
    return new TextDecoder().decode(this.bytes(ref, type));
  }

  /** Resolves once `ref`'s concatenated output satisfies `check` (chunking-agnostic). */
  waitForOutput(
    ref: string,
    check: (bytes: Uint8Array) => boolean,
    timeoutMs: number,
    what: string,
    type: 'stdout' | 'stderr' = 'stdout',
  ): Promise<Uint8Array> {
    const now = this.bytes(ref, type);
    if (check(now)) return Promise.resolve(now);
    return new Promise<Uint8Array>((resolve, reject) => {
      const listener = () => {
        const b = this.bytes(ref, type);
        if (!check(b)) return;
        clearTimeout(timer);
        this.#listeners = this.#listeners.filter((l) => l !== listener);
        resolve(b);
      };
      const timer = setTimeout(() => {
        this.#listeners = this.#listeners.filter((l) => l !== listener);
        reject(
          new assert.AssertionError({
            message: `${what}: not seen within ${timeoutMs} ms; frames so far: ${this.dump()}`,
          }),
        );
      }, timeoutMs);
      this.#listeners.push(listener);
    });
  }

  /** Waits until `ref`'s stdout contains `needle`. */
  waitForText(ref: string, needle: string, timeoutMs: number, type: 'stdout' | 'stderr' = 'stdout'): Promise<string> {
    return this.waitForOutput(
      ref,
      (b) => new TextDecoder().decode(b).includes(needle),
      timeoutMs,
      `${type} containing ${JSON.stringify(needle)} for ${ref}`,
      type,
    ).then((b) => new TextDecoder().decode(b));
  }

  /**
   * Waits the quiet period, then asserts `ref` got exactly one terminal frame, that nothing
   * followed it, and (when given) that no frame matching `forbidden` arrived at all.
   */
  async expectSettled(ref: string, forbidden?: FramePredicate, what = 'a forbidden frame'): Promise<void> {
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    this.assertWellFormed(ref);
    const own = this.frames.filter((f) => f.ref === ref);
    assert.equal(own.filter(isTerminal).length, 1, `exactly one terminal frame for ${ref}; got ${this.dump(ref)}`);
    if (forbidden) assert.ok(!own.some(forbidden), `${what} for ${ref}; got ${this.dump(ref)}`);
  }

  /** At most one terminal frame for `ref`, and no frame of `ref` after it. */
  assertWellFormed(ref: string): void {
    const own = this.frames.filter((f) => f.ref === ref);
    const at = own.findIndex(isTerminal);
    if (at >= 0) assert.equal(at, own.length - 1, `frames after the terminal frame of ${ref}: ${this.dump(ref)}`);
  }

  dump(ref?: string): string {
    const list = ref === undefined ? this.frames : this.frames.filter((f) => f.ref === ref);
    return list.length ? list.map(describeFrame).join(', ') : '(none)';
  }

  #take(predicate: FramePredicate): StreamFrame | undefined {
    for (let i = this.#cursor; i < this.frames.length; i++) {
      const f = this.frames[i]!;
      if (predicate(f)) {
        this.#cursor = i + 1;
        return f;
      }
    }
    return undefined;
  }

  #drain(): void {
    for (const w of this.#waiters.slice()) {
      const f = this.#take(w.predicate);
      if (!f) continue;
      this.#waiters = this.#waiters.filter((x) => x !== w);
      w.resolve(f);
    }
  }
}
