/**
 * What every part of the in-memory fake shares: the unreachable switch, sandbox lookup, and the
 * session machinery (frames, replay, the one place a session ends).
 */

import { fail, sandboxError } from '../../sandbox/errors.ts';
import type { SandboxError, SandboxResult } from '../../sandbox/errors.ts';
import type { Private } from '../../sandbox/private.ts';
import { ok } from '../../sandbox/result.ts';
import type { Command, FrameSink, Handle, StreamFrame } from '../../sandbox/types.ts';
import { type Instruction } from './script.ts';
import { registry, type FakeSandbox, type FakeSession } from './state.ts';

export interface FakeAdapterOptions {
  /**
   * Simulates a backend that cannot be reached (endpoint down): every operation answers
   * `unavailable(fake_unreachable)` — never `not_found` — except `stopCommand`, which is always ok.
   */
  readonly unreachable?: boolean;
}

export const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/;
export const TERMINATE_KEYS = new Set(['timeoutMs', 'mode']);
export const enc = new TextEncoder();
export const CLOSED_BEFORE_EXIT = (): SandboxError => sandboxError('closed_before_exit');

export const deliver = (sink: FrameSink, frame: StreamFrame): void => {
  try {
    sink(frame);
  } catch {
    // An owner that throws must not take the fake (or its other subscribers) down.
  }
};

export const validName = (name: unknown): name is string =>
  typeof name === 'string' && name.length > 0 && name.length <= 256 && !name.includes('/') && !name.includes('\u0000');

export class FakeCore {
  readonly provider = 'fake' as const;

  readonly unreachable: boolean;

  constructor(opts: FakeAdapterOptions = {}) {
    this.unreachable = opts.unreachable ?? false;
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'fake', name } : { provider: 'fake', name, private: priv };
  }

  find(handle: Handle): SandboxResult<FakeSandbox> {
    if (this.unreachable) return down();
    const sb = typeof handle?.name === 'string' ? registry.sandboxes.get(handle.name) : undefined;
    return sb ? ok(sb) : fail('not_found');
  }

  handleFor(sb: FakeSandbox): Handle {
    return sb.instanceId === undefined
      ? this.buildHandle(sb.name)
      : { provider: 'fake', name: sb.name, instanceId: sb.instanceId };
  }
}

export const down = (): SandboxResult<never> => fail('unavailable', 'fake_unreachable');

export const newSandbox = (name: string, instanceId: string | undefined): FakeSandbox => ({
  name,
  status: 'running',
  instanceId,
  files: new Map(),
  policy: undefined,
  sessions: new Map(),
});

/** Alive, and this ref still subscribed (a detached or stopped ref is no longer connected). */
export const connected = (command: Command): FakeSession | undefined => {
  const s = typeof command?.ref === 'string' ? registry.refs.get(command.ref) : undefined;
  return s && s.state === 'running' && s.subscribers.has(command.ref) ? s : undefined;
};

export const validTermination = (sessionId: unknown, opts: unknown): boolean => {
  if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId)) return false;
  if (typeof opts !== 'object' || opts === null) return false;
  const o = opts as Record<string, unknown>;
  if (!Object.keys(o).every((k) => TERMINATE_KEYS.has(k))) return false;
  if (
    o.timeoutMs !== undefined &&
    !(Number.isInteger(o.timeoutMs) && (o.timeoutMs as number) >= 1 && (o.timeoutMs as number) <= 30_000)
  )
    return false;
  return o.mode === undefined || o.mode === 'graceful' || o.mode === 'force';
};

export const emit = (s: FakeSession, type: 'stdout' | 'stderr', data: Uint8Array): void => {
  if (s.state !== 'running') return;
  s.chunks.push({ type, data });
  s.lastActivityAt = new Date();
  for (const [ref, sub] of s.subscribers) if (sub.ready) deliver(sub.sink, { type, ref, data });
};

/** The single place a session ends, so no subscriber ever sees two terminal frames. */
export const finish = (
  s: FakeSession,
  end: { kind: 'exit'; code: number } | { kind: 'error'; error: SandboxError },
): void => {
  if (s.state !== 'running') return;
  if (end.kind === 'exit') {
    s.state = 'exited';
    s.exitCode = end.code;
  } else {
    s.state = 'errored';
    s.error = end.error;
  }
  s.lastActivityAt = new Date();
  for (const [ref, sub] of s.subscribers) {
    // Subscribers still awaiting their replay get the terminal frame from it.
    if (!sub.ready) continue;
    deliver(
      sub.sink,
      end.kind === 'exit' ? { type: 'exit', ref, code: end.code } : { type: 'error', ref, error: end.error },
    );
    s.subscribers.delete(ref);
  }
};

export const run = (s: FakeSession, script: readonly Instruction[]): void => {
  for (const ins of script) {
    if (s.state !== 'running') return;
    switch (ins.kind) {
      case 'out':
        emit(s, 'stdout', enc.encode(ins.data));
        break;
      case 'err':
        emit(s, 'stderr', enc.encode(ins.data));
        break;
      case 'exit':
        finish(s, { kind: 'exit', code: ins.code });
        return;
      case 'drop':
        finish(s, { kind: 'error', error: CLOSED_BEFORE_EXIT() });
        return;
      case 'stay':
        s.reading = true;
        pump(s);
        return;
    }
  }
  finish(s, { kind: 'exit', code: 0 });
};

/** A `stay` process reading its stdin: echo each write, exit 0 at EOF. */
export const pump = (s: FakeSession): void => {
  if (!s.reading || s.state !== 'running') return;
  for (let chunk = s.stdin.shift(); chunk; chunk = s.stdin.shift()) {
    const out = new Uint8Array(5 + chunk.byteLength);
    out.set(enc.encode('echo:'));
    out.set(chunk, 5);
    emit(s, 'stdout', out);
  }
  if (s.eof) finish(s, { kind: 'exit', code: 0 });
};
