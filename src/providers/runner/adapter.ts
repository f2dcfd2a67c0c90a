/**
 * The `runner` sandbox provider: routes each sandbox name to its runner's live connection and
 * maps wire replies onto the contract (runner-protocol.md §5). Never throws; offline is transient.
 */
import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type {
  AttachOptions,
  Capability,
  Command,
  CreateOptions,
  ExecOptions,
  ExecResult,
  FrameSink,
  Handle,
  NetworkPolicy,
  PublicUrl,
  Result,
  SandboxAdapter,
  SandboxError,
  SandboxInfo,
  SandboxResult,
  Session,
  SpawnOptions,
  StreamFrame,
  WriteFileOptions,
} from '../../sandbox/index.ts';
import { Private, err, fail, ok, parseRunnerName, sandboxError } from '../../sandbox/index.ts';
import { DEFAULT_RUNNER_CAPABILITIES, decodeBase64, encodeBase64, resultSchemas } from '../../wire/index.ts';
import { RUNNER_OFFLINE, malformed, providerError } from './errors.ts';
import type { OutgoingRequest, RunnerConnection, RunnerHost, RunnerInfo, SessionListener } from './host.ts';

/** What the adapter assumes of a runner it cannot see (offline, or no handle): the upstream set. */
const CAPS: ReadonlySet<Capability> = new Set<Capability>(DEFAULT_RUNNER_CAPABILITIES);
/** The daemon gets the exec's own budget; the server waits this much longer for the reply. */
export const EXEC_GRACE_MS = 10_000;
const SANDBOX_HOME = '/home/sprite';

/** What `Command.private` holds for a runner command. */
export interface RunnerCommandPrivate {
  readonly runnerId: string;
  readonly name: string;
  readonly sessionId: string;
}

const commandPrivateSchema = z.object({ runnerId: z.string(), name: z.string(), sessionId: z.string() });

/** Placement: the most recently connected online runner of the account. */
export function pickRunner(host: RunnerHost, accountId: string): Result<RunnerInfo, 'no_runner_online'> {
  const first = host.online(accountId)[0];
  return first ? ok(first) : err('no_runner_online');
}

/** Maps a sandbox path onto the sandbox's real directory the way the process backend does (§9.2). */
export function mapSandboxPath(dir: string, path: string): string {
  if (path === '' || path === '~' || path === SANDBOX_HOME) return dir;
  if (path.startsWith(`${SANDBOX_HOME}/`)) return posix.join(dir, path.slice(SANDBOX_HOME.length + 1));
  if (path.startsWith('~/')) return posix.join(dir, path.slice(2));
  if (path.startsWith('/')) return path;
  return posix.join(dir, path);
}

/** Output bytes from a base64 field, leniently: text that is not base64 is taken as is. */
const lenientBytes = (text: string): Buffer => decodeBase64(text) ?? Buffer.from(text, 'utf8');

interface LiveCommand {
  readonly conn: RunnerConnection;
  readonly listener: SessionListener;
  sessionId: string | undefined;
  ended: boolean;
}

export interface RunnerAdapterOptions {
  readonly logger?: Logger;
}

export class RunnerAdapter implements SandboxAdapter {
  readonly provider = 'runner' as const;
  readonly #host: RunnerHost;
  readonly #log: Logger | undefined;
  /** Local subscriptions by command ref, so stop_command can drop exactly its own listener. */
  readonly #live = new Map<string, LiveCommand>();

  constructor(host: RunnerHost, opts: RunnerAdapterOptions = {}) {
    this.#host = host;
    this.#log = opts.logger;
  }

  /**
   * With a handle, what the runner holding that sandbox advertised when it connected (a namespace
   * runner has network_policy, a process runner does not); without one, or offline, the upstream set.
   */
  capabilities(handle?: Handle): ReadonlySet<Capability> {
    if (handle === undefined) return CAPS;
    const id = parseRunnerName(handle.name);
    const info = id.ok ? this.#host.whereis(id.value)?.info : undefined;
    return info?.capabilities ? new Set<Capability>(info.capabilities) : CAPS;
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'runner', name } : { provider: 'runner', name, private: priv };
  }

  create(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    return this.#total('create', async () => {
      const r = await this.#call(name, { op: 'create', name });
      return r.ok ? ok(this.buildHandle(name)) : r;
    });
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#total('get', async () => {
      const r = await this.#call(handle.name, { op: 'get', name: handle.name });
      if (!r.ok) return r;
      const parsed = resultSchemas.get.safeParse(r.value);
      if (!parsed.success) return err(malformed('get_reply', r.value));
      const { status, path } = parsed.data;
      return ok({
        status: status === 'running' || status === 'suspended' ? status : 'unknown',
        raw: path === undefined ? { status } : { status, path },
      });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#total('destroy', async () => {
      const r = await this.#call(handle.name, { op: 'destroy', name: handle.name });
      return r.ok || r.error.code === 'not_found' ? ok(undefined) : r;
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#total('list_all_names', async () => {
      const results = await Promise.all(
        this.#host.online().map(async (info): Promise<SandboxResult<string[]>> => {
          const conn = this.#host.whereis(info.runnerId);
          if (!conn) return fail('unavailable', RUNNER_OFFLINE);
          const r = await conn.call({ op: 'list' });
          if (!r.ok) return r;
          const parsed = resultSchemas.list.safeParse(r.value);
          return parsed.success ? ok(parsed.data.names) : err(malformed('list', r.value));
        }),
      );
      const names = new Set<string>();
      for (const r of results) {
        // One runner failing fails the view: a partial set must never look whole.
        if (!r.ok) return r;
        for (const n of r.value) names.add(n);
      }
      return ok([...names].sort());
    });
  }

  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#total('suspend', async () => {
      const r = await this.#call(handle.name, { op: 'suspend', name: handle.name });
      return r.ok ? ok(undefined) : r;
    });
  }

  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#total('resume', async () => {
      const r = await this.#call(handle.name, { op: 'resume', name: handle.name });
      return r.ok ? ok(this.buildHandle(handle.name, handle.private)) : r;
    });
  }

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#total('write_file', async () => {
      const req: OutgoingRequest = { op: 'write_file', name: handle.name, path, data: encodeBase64(data) };
      const r = await this.#call(handle.name, opts.mode === undefined ? req : { ...req, mode: opts.mode });
      return r.ok ? ok(undefined) : r;
    });
  }

  hostPath(handle: Handle, path: string): Promise<SandboxResult<string>> {
    return this.#total('host_path', async () => {
      const info = await this.get(handle);
      if (!info.ok) return info;
      const dir = info.value.raw.path;
      return ok(typeof dir === 'string' && dir.length > 0 ? mapSandboxPath(dir, path) : path);
    });
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#total('exec', async () => {
      const req: OutgoingRequest = {
        op: 'exec',
        name: handle.name,
        cmd,
        args: [...args],
        env: (opts.env ?? []).map(([k, v]) => [k, v]),
        ...(opts.dir === undefined ? {} : { dir: opts.dir }),
        ...(opts.timeoutMs === undefined ? {} : { timeout_ms: opts.timeoutMs }),
        ...(opts.stderrToStdout ? { stderr_to_stdout: true } : {}),
      };
      const timeoutMs = opts.timeoutMs === undefined ? null : opts.timeoutMs + EXEC_GRACE_MS;
      const r = await this.#call(handle.name, req, { timeoutMs });
      if (!r.ok) return r;
      const parsed = resultSchemas.exec.safeParse(r.value);
      if (!parsed.success) return err(malformed('exec_reply', r.value));
      return ok({ output: lenientBytes(parsed.data.output), exitCode: parsed.data.code });
    });
  }

  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>> {
    return this.#total('spawn', async () => {
      const req: OutgoingRequest = {
        op: 'spawn',
        name: handle.name,
        cmd,
        args: [...args],
        env: (opts.env ?? []).map(([k, v]) => [k, v]),
        ...(opts.dir === undefined ? {} : { dir: opts.dir }),
        ...(opts.stdin === undefined ? {} : { stdin: opts.stdin }),
        ...(opts.tty === undefined ? {} : { tty: opts.tty }),
        ...(opts.detachable === undefined ? {} : { detachable: opts.detachable }),
      };
      return this.#subscribe(handle.name, req, 'spawn', opts.owner);
    });
  }

  writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>> {
    return this.#total('write_stdin', async () => {
      const target = this.#target(command);
      if (!target.ok) return target;
      const { runnerId, name, sessionId } = target.value;
      const conn = this.#host.whereis(runnerId);
      if (!conn) return fail('write_failed', RUNNER_OFFLINE);
      const r = await conn.call({ op: 'stdin', name, session_id: sessionId, data: encodeBase64(data) });
      if (r.ok) return ok(undefined);
      if (r.error.code === 'not_found') return fail('command_exited');
      if (r.error.code === 'unavailable') return fail('write_failed', r.error.detail);
      return r;
    });
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#total('close_stdin', async () => {
      const target = this.#target(command);
      if (!target.ok) return target;
      const { runnerId, name, sessionId } = target.value;
      const conn = this.#host.whereis(runnerId);
      if (!conn) return fail('unavailable', RUNNER_OFFLINE);
      const r = await conn.call({ op: 'stdin_close', name, session_id: sessionId });
      return r.ok || r.error.code === 'not_found' || r.error.code === 'command_exited' ? ok(undefined) : r;
    });
  }

  async stopCommand(command: Command): Promise<SandboxResult<void>> {
    try {
      const live = this.#live.get(command.ref);
      if (live) {
        this.#live.delete(command.ref);
        live.ended = true;
        if (live.sessionId !== undefined) live.conn.unsubscribe(live.sessionId, live.listener);
      }
    } catch (e) {
      this.#log?.warn({ err: e instanceof Error ? e.message : String(e) }, 'runner stop_command failed locally');
    }
    return ok(undefined);
  }

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#total('list_sessions', async () => {
      const r = await this.#call(handle.name, { op: 'list_sessions', name: handle.name });
      if (!r.ok) return r;
      const parsed = resultSchemas.list_sessions.safeParse(r.value);
      if (!parsed.success) return err(malformed('list_sessions_reply', r.value));
      const sessions: Session[] = [];
      for (const s of parsed.data.sessions) {
        const createdAt = new Date(s.created_at);
        const lastActivityAt = s.last_activity_at ? new Date(s.last_activity_at) : null;
        if (Number.isNaN(createdAt.getTime()) || (lastActivityAt && Number.isNaN(lastActivityAt.getTime()))) {
          return err(malformed('list_sessions_reply', s));
        }
        sessions.push({
          id: s.id,
          command: s.command,
          createdAt,
          lastActivityAt,
          tty: s.tty ?? false,
          ...(s.exit_code === undefined ? {} : { exitCode: s.exit_code }),
        });
      }
      return ok(sessions);
    });
  }

  attach(handle: Handle, sessionId: string, opts: AttachOptions): Promise<SandboxResult<Command>> {
    return this.#total('attach', async () => {
      const req: OutgoingRequest = {
        op: 'attach',
        name: handle.name,
        session_id: sessionId,
        ...(opts.stdin === undefined ? {} : { stdin: opts.stdin }),
      };
      return this.#subscribe(handle.name, req, 'attach', opts.owner);
    });
  }

  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#total('apply_network_policy', async () => {
      // Asked only of a runner that advertised it: an older daemon would answer an unknown op anyway.
      if (!this.capabilities(handle).has('network_policy')) return fail('not_supported', 'network_policy');
      const r = await this.#call(handle.name, {
        op: 'apply_network_policy',
        name: handle.name,
        allow: [...policy.allow],
      });
      return r.ok ? ok(undefined) : r;
    });
  }

  async publicUrl(_handle: Handle): Promise<SandboxResult<PublicUrl>> {
    return ok({ kind: 'unsupported' });
  }

  async createCheckpoint(_handle: Handle): Promise<SandboxResult<string>> {
    return fail('not_supported', 'checkpoint');
  }

  async restoreCheckpoint(_handle: Handle, _checkpointId: string): Promise<SandboxResult<void>> {
    return fail('not_supported', 'checkpoint');
  }

  /** Spawn and attach: the listener rides along with the call so no frame after the reply is missed. */
  async #subscribe(
    name: string,
    req: OutgoingRequest,
    what: 'spawn' | 'attach',
    owner: FrameSink,
  ): Promise<SandboxResult<Command>> {
    const route = this.#route(name);
    if (!route.ok) return route;
    const { conn, runnerId } = route.value;
    const ref = `${what}-${randomUUID()}`;
    const live: LiveCommand = {
      conn,
      listener: this.#listener(ref, owner, () => this.#live.delete(ref)),
      sessionId: undefined,
      ended: false,
    };
    const r = await conn.call(req, { listener: live.listener });
    if (!r.ok) return r;
    const parsed = resultSchemas[what].safeParse(r.value);
    if (!parsed.success) {
      const sid = r.value.session_id;
      if (typeof sid === 'string') conn.unsubscribe(sid, live.listener);
      return err(malformed(`${what}_reply`, r.value));
    }
    const { session_id: sessionId, replay_from: replayFrom } = parsed.data;
    live.sessionId = sessionId;
    // Frames (even the exit) may already have reached the owner; only a still-open command is tracked.
    if (!live.ended) this.#live.set(ref, live);
    const priv = new Private<RunnerCommandPrivate>({ runnerId, name, sessionId });
    return ok(
      replayFrom ? { provider: 'runner', ref, private: priv, replayFrom } : { provider: 'runner', ref, private: priv },
    );
  }

  /** Turns connection callbacks into owner frames, guaranteeing exactly one terminal frame. */
  #listener(ref: string, owner: FrameSink, onEnd: () => void): SessionListener {
    let done = false;
    const report = (e: unknown): void => {
      this.#log?.warn({ err: e instanceof Error ? e.message : String(e), ref }, 'command owner failed on a frame');
    };
    const emit = (frame: StreamFrame): void => {
      try {
        // An async owner is allowed by the type; its rejection must not become an unhandled one.
        const r: unknown = owner(frame);
        if (r instanceof Promise) r.catch(report);
      } catch (e) {
        report(e);
      }
    };
    const end = (frame: StreamFrame): void => {
      if (done) return;
      done = true;
      onEnd();
      emit(frame);
    };
    return {
      output: (stream, data) => {
        if (!done) emit({ type: stream, ref, data });
      },
      exit: (code) => end({ type: 'exit', ref, code }),
      disconnected: (detail) => end({ type: 'error', ref, error: sandboxError('unavailable', detail) }),
    };
  }

  #target(command: Command): SandboxResult<RunnerCommandPrivate> {
    const parsed = commandPrivateSchema.safeParse(
      command.private instanceof Private ? command.private.reveal() : undefined,
    );
    return parsed.success ? ok(parsed.data) : fail('invalid', 'not_a_runner_command');
  }

  #route(name: string): SandboxResult<{ conn: RunnerConnection; runnerId: string }> {
    const id = parseRunnerName(name);
    if (!id.ok) return fail('invalid', `not_a_runner_sandbox_name: ${name}`);
    const conn = this.#host.whereis(id.value);
    // Offline is transient: a parked directory on a switched-off machine is not gone.
    return conn ? ok({ conn, runnerId: id.value }) : fail('unavailable', RUNNER_OFFLINE);
  }

  async #call(
    name: string,
    req: OutgoingRequest,
    opts?: { timeoutMs?: number | null },
  ): Promise<SandboxResult<Record<string, unknown>>> {
    const route = this.#route(name);
    if (!route.ok) return route;
    return route.value.conn.call(req, opts);
  }

  /** The adapter's last line of defence: a bug becomes a `provider` error, never a rejection. */
  async #total<T>(op: string, fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.#log?.error({ err: message, op }, 'runner adapter operation failed unexpectedly');
      return err(providerError(`internal: ${op}: ${message}`) as SandboxError);
    }
  }
}
