/**
 * The fake adapter's process-wide state: sandboxes, their files, policies and
 * sessions, plus `reset()` and the test accessors `policy(name)` and `file(name, path)`.
 */
import type { SandboxError } from '../../sandbox/errors.ts';
import type { FrameSink, NetworkPolicy } from '../../sandbox/types.ts';

export interface FakeFile {
  readonly data: Uint8Array;
  readonly mode: number | undefined;
}

export interface Subscriber {
  readonly sink: FrameSink;
  /** False while an attacher's replay is pending: live frames reach it only through the replay. */
  ready: boolean;
}

export interface FakeSession {
  readonly id: string;
  readonly sandbox: string;
  readonly command: string;
  readonly createdAt: Date;
  lastActivityAt: Date | null;
  /** Every emitted chunk in order: the replay buffer. */
  readonly chunks: Array<{ readonly type: 'stdout' | 'stderr'; readonly data: Uint8Array }>;
  state: 'running' | 'exited' | 'errored';
  exitCode?: number;
  error?: SandboxError;
  /** Reached `stay`: the process now reads stdin. */
  reading: boolean;
  /** Written but not yet read, like bytes sitting in a pipe. */
  readonly stdin: Uint8Array[];
  eof: boolean;
  readonly subscribers: Map<string, Subscriber>;
}

export interface FakeSandbox {
  readonly name: string;
  status: 'running' | 'suspended';
  readonly instanceId: string | undefined;
  readonly files: Map<string, FakeFile>;
  policy: NetworkPolicy | undefined;
  readonly sessions: Map<string, FakeSession>;
}

export const registry = {
  sandboxes: new Map<string, FakeSandbox>(),
  /** Command ref → the session it belongs to (kept after unsubscribe so late writes answer). */
  refs: new Map<string, FakeSession>(),
  nextInstance: 0,
  nextSession: 0,
  nextRef: 0,
};

/** Forgets every sandbox and session; counters keep rising so ids stay unique in a process. */
export const reset = (): void => {
  for (const sb of registry.sandboxes.values()) for (const s of sb.sessions.values()) s.subscribers.clear();
  registry.sandboxes.clear();
  registry.refs.clear();
};

/** The network policy last applied to `name`, exactly as given. */
export const policy = (name: string): NetworkPolicy | undefined => registry.sandboxes.get(name)?.policy;

/** A file as `write_file` stored it (bytes verbatim, and the mode if one was given). */
export const file = (name: string, path: string): FakeFile | undefined => registry.sandboxes.get(name)?.files.get(path);
