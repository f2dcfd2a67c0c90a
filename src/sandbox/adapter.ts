/**
 * The adapter interface every sandbox provider implements.
 * Every operation resolves to a Result and never rejects; see reference contract §4.
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
  PublicUrl,
  SandboxInfo,
  Session,
  SpawnOptions,
  TerminateOptions,
  WriteFileOptions,
} from './types.ts';

export interface SandboxAdapter {
  readonly provider: ProviderId;
  /** May depend on configuration, and for a runner on the handle's runner. */
  capabilities(handle?: Handle): ReadonlySet<Capability>;
  /** Pure: no I/O. Handles are rebuilt from stored rows on every wake. */
  buildHandle(name: string, priv?: Private<unknown>): Handle;

  create(name: string, opts?: CreateOptions): Promise<SandboxResult<Handle>>;
  /** Optional (`create_new`): refuses an existing name with `already_exists`. */
  createNew?(name: string, opts?: CreateOptions): Promise<SandboxResult<Handle>>;
  get(handle: Handle): Promise<SandboxResult<SandboxInfo>>;
  destroy(handle: Handle): Promise<SandboxResult<void>>;
  listAllNames(): Promise<SandboxResult<string[]>>;
  suspend(handle: Handle): Promise<SandboxResult<void>>;
  resume(handle: Handle): Promise<SandboxResult<Handle>>;

  writeFile(handle: Handle, path: string, data: Uint8Array, opts?: WriteFileOptions): Promise<SandboxResult<void>>;
  /** Maps a sandbox path (`/home/sprite/...`) to the provider's real path; only the runner maps. */
  hostPath?(handle: Handle, path: string): Promise<SandboxResult<string>>;

  exec(handle: Handle, cmd: string, args: readonly string[], opts?: ExecOptions): Promise<SandboxResult<ExecResult>>;
  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>>;
  writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>>;
  closeStdin(command: Command): Promise<SandboxResult<void>>;
  /** Tears down only the local end; a detachable remote process keeps running. Always ok. */
  stopCommand(command: Command): Promise<SandboxResult<void>>;

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>>;
  attach(handle: Handle, sessionId: string, opts: AttachOptions): Promise<SandboxResult<Command>>;
  terminateSession?(handle: Handle, sessionId: string, opts?: TerminateOptions): Promise<SandboxResult<void>>;

  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>>;
  publicUrl(handle: Handle): Promise<SandboxResult<PublicUrl>>;
  createCheckpoint(handle: Handle): Promise<SandboxResult<string>>;
  restoreCheckpoint(handle: Handle, checkpointId: string): Promise<SandboxResult<void>>;
}
