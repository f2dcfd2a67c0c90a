/**
 * The adapter interface every sandbox provider implements, composed of parts: lifecycle, files and
 * processes always; network policy and checkpoints only where the provider really has them.
 * Every operation resolves to a Result and never rejects (docs/adding-a-provider.md).
 */
import type { Capability } from './capabilities.ts';
import type { SandboxResult } from './errors.ts';
import type { Private } from './private.ts';
import type { ProviderId } from './providers.ts';
import type {
  AttachOptions,
  Command,
  CreateOptions,
  ExecOptions,
  ExecResult,
  Handle,
  NetworkPolicy,
  SandboxInfo,
  Session,
  SpawnOptions,
  TerminateOptions,
  WriteFileOptions,
  WriteStdinOptions,
} from './types.ts';

/**
 * Creating, finding, parking and removing sandboxes. Gives `suspend` with `suspend` and `resume`
 * (and `create_new` with `createNew`).
 */
export interface SandboxLifecycle {
  create(name: string, opts?: CreateOptions): Promise<SandboxResult<Handle>>;
  /** Optional (`create_new`): refuses an existing name with `already_exists`. */
  createNew?(name: string, opts?: CreateOptions): Promise<SandboxResult<Handle>>;
  get(handle: Handle): Promise<SandboxResult<SandboxInfo>>;
  destroy(handle: Handle): Promise<SandboxResult<void>>;
  listAllNames(): Promise<SandboxResult<string[]>>;
  /**
   * Both or neither. Parking keeps the disk (a no-op where the platform parks by itself); a platform
   * with no such state leaves both out, and an idle sandbox is destroyed instead.
   */
  suspend?(handle: Handle): Promise<SandboxResult<void>>;
  resume?(handle: Handle): Promise<SandboxResult<Handle>>;
}

/** The sandbox's filesystem. */
export interface SandboxFiles {
  writeFile(handle: Handle, path: string, data: Uint8Array, opts?: WriteFileOptions): Promise<SandboxResult<void>>;
  /** Maps a sandbox path (`/home/sprite/...`) to the provider's real path; only the runner maps. */
  hostPath?(handle: Handle, path: string): Promise<SandboxResult<string>>;
}

/**
 * Running commands: one-shot exec, streamed spawn, stdin, and detachable sessions with replay from
 * byte zero. Gives `attach`, and `terminate_session`, `force_terminate_session`, `tty` as it says.
 */
export interface SandboxProcesses {
  /** A PTY can be requested on spawn. */
  readonly tty?: boolean;
  /** `terminateSession` honours `mode: 'force'`. */
  readonly forceTerminate?: boolean;

  exec(handle: Handle, cmd: string, args: readonly string[], opts?: ExecOptions): Promise<SandboxResult<ExecResult>>;
  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>>;
  writeStdin(command: Command, data: Uint8Array, opts?: WriteStdinOptions): Promise<SandboxResult<void>>;
  /**
   * True when a write repeated with the same `writeId`, through this command or any later one attached to
   * its session, reaches the process once (the runner's daemon remembers the ids); absent or false, a repeat
   * writes again. Known without I/O, so it can be asked after the connection dropped.
   */
  repeatsStdinOnce?(command: Command): boolean;
  closeStdin(command: Command): Promise<SandboxResult<void>>;
  /** Tears down only the local end; a detachable remote process keeps running. Always ok. */
  stopCommand(command: Command): Promise<SandboxResult<void>>;

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>>;
  attach(handle: Handle, sessionId: string, opts: AttachOptions): Promise<SandboxResult<Command>>;
  terminateSession?(handle: Handle, sessionId: string, opts?: TerminateOptions): Promise<SandboxResult<void>>;
}

/** A deny-capable egress policy: `allow: []` denies everything. Gives `network_policy`. */
export interface SandboxNetwork {
  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>>;
}

/** Snapshots of a sandbox's disk. Gives `checkpoint`. A restore that failed is `restore_failed`. */
export interface SandboxCheckpoints {
  createCheckpoint(handle: Handle): Promise<SandboxResult<string>>;
  restoreCheckpoint(handle: Handle, checkpointId: string): Promise<SandboxResult<void>>;
}

export interface SandboxAdapter {
  readonly provider: ProviderId;
  /** Pure: no I/O. Handles are rebuilt from stored rows on every wake. */
  buildHandle(name: string, priv?: Private<unknown>): Handle;

  readonly lifecycle: SandboxLifecycle;
  readonly files: SandboxFiles;
  readonly processes: SandboxProcesses;
  /** Absent: the provider has no egress control; callers answer `not_supported`. */
  readonly network?: SandboxNetwork;
  /** Absent: no checkpoints; callers answer `not_supported`. */
  readonly checkpoints?: SandboxCheckpoints;

  /**
   * What one sandbox's backend offers, where that varies per sandbox (a runner's backend says which
   * of its parts work); absent means every part works everywhere. Only ever narrows the parts' set.
   */
  offered?(handle?: Handle): ReadonlySet<Capability> | undefined;
}

/** The capabilities that follow from the parts an adapter implements, narrowed by `offered`. */
export function partCapabilities(adapter: SandboxAdapter): Set<Capability> {
  const caps = new Set<Capability>(['attach']);
  if (adapter.lifecycle.suspend && adapter.lifecycle.resume) caps.add('suspend');
  if (adapter.lifecycle.createNew) caps.add('create_new');
  if (adapter.processes.terminateSession) caps.add('terminate_session');
  if (adapter.processes.terminateSession && adapter.processes.forceTerminate) caps.add('force_terminate_session');
  if (adapter.processes.tty) caps.add('tty');
  if (adapter.network) caps.add('network_policy');
  if (adapter.checkpoints) caps.add('checkpoint');
  return caps;
}

/** `supports?` of the contract: the parts' capabilities, for one sandbox when a handle is given. */
export function capabilitiesOf(adapter: SandboxAdapter, handle?: Handle): ReadonlySet<Capability> {
  const caps = partCapabilities(adapter);
  const offered = adapter.offered?.(handle);
  if (offered) for (const c of caps) if (!offered.has(c)) caps.delete(c);
  return caps;
}
