/**
 * The provider-neutral sandbox types: handles, commands, stream frames, sessions, policies.
 * Handles are rebuilt from stored rows, so everything here is plain data plus a Private box.
 */
import type { Private } from './private.ts';
import type { SandboxError } from './errors.ts';
import type { ProviderId } from './providers.ts';

export interface Handle {
  readonly provider: ProviderId;
  /** The minted sandbox name (names.ts). */
  readonly name: string;
  /** Set only by createNew; opaque control metadata the host persists itself. */
  readonly instanceId?: string | null;
  /** Adapter-opaque; every operation must also work when it is absent. */
  readonly private?: Private<unknown>;
}

export interface SandboxInfo {
  readonly status: 'running' | 'suspended' | 'unknown';
  /** Provider-shaped detail (for the runner: `{ path }`). Never holds a secret. */
  readonly raw: Readonly<Record<string, unknown>>;
}

/** The correlation key of every stream frame; consumers match on `ref` only. */
export interface Command {
  readonly provider: ProviderId;
  readonly ref: string;
  readonly private?: Private<unknown>;
  /**
   * Set by attach when the provider could no longer replay from byte zero (a capped journal):
   * how many bytes of output were lost before the replay began. Absent or 0 means byte zero.
   */
  readonly replayFrom?: number;
}

export type StreamFrame =
  | { readonly type: 'stdout'; readonly ref: string; readonly data: Uint8Array }
  | { readonly type: 'stderr'; readonly ref: string; readonly data: Uint8Array }
  | { readonly type: 'exit'; readonly ref: string; readonly code: number }
  | { readonly type: 'error'; readonly ref: string; readonly error: SandboxError };

/** Receives a command's frames: outputs, then exactly one terminal frame (`exit` or `error`). */
export type FrameSink = (frame: StreamFrame) => void;

export type EnvPairs = ReadonlyArray<readonly [string, string]>;

export interface ExecOptions {
  readonly env?: EnvPairs;
  readonly dir?: string;
  /** Milliseconds; absent means no limit. */
  readonly timeoutMs?: number;
  readonly stderrToStdout?: boolean;
}

export interface ExecResult {
  readonly output: Uint8Array;
  readonly exitCode: number;
}

export interface SpawnOptions {
  readonly owner: FrameSink;
  readonly env?: EnvPairs;
  readonly dir?: string;
  readonly stdin?: boolean;
  readonly tty?: boolean;
  readonly detachable?: boolean;
}

export interface AttachOptions {
  readonly owner: FrameSink;
  readonly stdin?: boolean;
}

export interface WriteStdinOptions {
  /**
   * Names the write, unique within the process, so it can be repeated after a dropped connection left
   * its outcome unknown; a provider whose `repeatsStdinOnce` says so writes a repeated id only once.
   */
  readonly writeId?: string;
}

export interface Session {
  readonly id: string;
  readonly command: string | null;
  readonly createdAt: Date;
  readonly lastActivityAt: Date | null;
  readonly tty: boolean;
  /** Present when the provider knows the session has ended. */
  readonly exitCode?: number;
}

/** Default-deny egress: `allow: []` denies everything; it never means "no policy". */
export interface NetworkPolicy {
  readonly allow: readonly string[];
}

export interface WriteFileOptions {
  readonly mode?: number;
}

export interface CreateOptions {
  readonly image?: string;
  readonly env?: EnvPairs;
}

export interface TerminateOptions {
  readonly timeoutMs?: number;
  readonly mode?: 'graceful' | 'force';
}
