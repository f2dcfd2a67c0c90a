/**
 * The Daytona sandbox adapter: native names (adopt on 409), asynchronous lifecycle waits,
 * session commands behind a shim (stdin through a file, exit sentinel) and an HTTP-polled journal.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
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
  SandboxAdapter,
  SandboxError,
  SandboxInfo,
  SandboxResult,
  Session,
  SpawnOptions,
  TerminateOptions,
  WriteFileOptions,
} from '../../sandbox/index.ts';
import { Private, err, fail, ok, sandboxError } from '../../sandbox/index.ts';
import type { NetworkSettingsBody, Toolbox } from './client.ts';
import { DaytonaClient } from './client.ts';
import type { DaytonaOptions, ResolvedConfig } from './config.ts';
import { resolveConfig } from './config.ts';
import type { SandboxDto } from './schemas.ts';
import {
  SHIM_GONE,
  STDIN_CLOSED,
  STDIN_EXITED,
  appendStdinScript,
  closeStdinScript,
  commandArgv,
  execScript,
  hasNul,
  quote,
  shimAliveScript,
  shellNames,
  spawnCommand,
  visibleCommand,
  wrapForExecute,
} from './shell.ts';
import { JournalPoller, readExitSentinel } from './stream.ts';

/** What a Daytona handle carries privately: the key it was made with and where its toolbox is. */
export interface DaytonaHandlePrivate {
  readonly apiKey: string;
  readonly sandboxId: string;
  readonly toolboxProxyUrl: string;
}

interface CommandPrivate {
  readonly sandboxName: string;
  readonly sessionId: string;
  readonly cmdId: string;
  readonly stateDir: string;
}

interface LiveCommand {
  readonly priv: CommandPrivate;
  readonly poller: JournalPoller;
  readonly stdin: boolean;
  exited: boolean;
  /** Serialises stdin writes so chunks land in order. */
  chain: Promise<unknown>;
}

interface Located {
  readonly toolbox: Toolbox;
  readonly sandboxId: string;
  readonly home: string;
}

const CAPS: ReadonlySet<Capability> = new Set<Capability>(['suspend', 'network_policy', 'attach', 'terminate_session']);

/** Platform sandboxes carry this label so the reaper and list_all_names see only Fountain's. */
export const FOUNTAIN_LABELS: Readonly<Record<string, string>> = { fountain: '1' };

const SESSION_PREFIX = 'fountain-';
const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/;
// A host name of one or more labels whose last label has a letter (so never a bare number):
// single-label hosts (localhost, an internal registry) are what an environment's allowed_hosts may name.
const DOMAIN =
  /^(\*\.)?([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const IPV4_CIDR = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(\/(\d|[12]\d|3[0-2]))?$/;
/** Daytona caps each allow list at 10 entries (source v0.190). */
const MAX_LIST = 10;
/** Stays well under the kernel's 128 KiB limit on one argument after two base64 passes. */
const STDIN_CHUNK = 32 * 1024;
/** "No timeout" still has to be a number: the spec's default is 10 s. */
const EXEC_NO_TIMEOUT_SEC = 24 * 3600;
const GONE_STATES = new Set(['destroyed', 'destroying']);
const PARKED_STATES = new Set(['stopped', 'archived', 'paused']);
const FAILED_STATES = new Set(['error', 'build_failed']);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class DaytonaAdapter implements SandboxAdapter {
  readonly provider = 'daytona' as const;
  readonly #key: Private<string>;
  readonly #cfg: ResolvedConfig;
  readonly #client: DaytonaClient;
  readonly #log: Logger | undefined;
  /** name → where its toolbox is; dropped on any lifecycle change or toolbox failure. */
  readonly #located = new Map<string, Located>();
  readonly #commands = new Map<string, LiveCommand>();

  constructor(opts: DaytonaOptions) {
    this.#key = new Private(opts.apiKey.trim());
    this.#cfg = resolveConfig(opts);
    this.#log = opts.logger;
    this.#client = new DaytonaClient({
      apiUrl: this.#cfg.apiUrl,
      apiKey: this.#key,
      requestTimeoutMs: this.#cfg.requestTimeoutMs,
    });
  }

  capabilities(): ReadonlySet<Capability> {
    return CAPS;
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'daytona', name } : { provider: 'daytona', name, private: priv };
  }

  // ---- lifecycle ----

  create(name: string, opts: CreateOptions = {}): Promise<SandboxResult<Handle>> {
    return this.#guard('create', async () => {
      const env = Object.fromEntries(opts.env ?? []);
      const snapshot = opts.image?.trim() || this.#cfg.snapshot;
      for (let attempt = 0; attempt < 4; attempt++) {
        const r = await this.#client.createSandbox({
          name,
          ...(snapshot ? { snapshot } : {}),
          labels: FOUNTAIN_LABELS,
          ...(Object.keys(env).length > 0 ? { env } : {}),
          // Daytona stops an idle sandbox after 15 min by default and counts only API traffic as
          // activity, so a long agent turn would be parked under it; Fountain owns suspend.
          autoStopInterval: 0,
          autoDeleteInterval: -1,
        });
        if (!r.ok) return r;
        let sandbox: SandboxDto;
        if (r.value.kind === 'created') sandbox = r.value.sandbox;
        else {
          // 409: the name exists in the organisation. Adopt it, unless it is on its way out.
          const g = await this.#client.getSandbox(name);
          if (!g.ok && g.error.code === 'not_found') continue;
          if (!g.ok) return g;
          if (GONE_STATES.has(g.value.state ?? '')) {
            const gone = await this.#waitGone(name);
            if (!gone.ok) return gone;
            continue;
          }
          sandbox = g.value;
        }
        const started = await this.#ensureStarted(sandbox);
        if (!started.ok) return started;
        return ok(this.#handleFor(name, started.value));
      }
      return fail('unavailable', 'create: name kept conflicting with a sandbox being deleted');
    });
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#guard('get', async () => {
      const r = await this.#client.getSandbox(handle.name);
      if (!r.ok) return r;
      const s = r.value;
      const state = s.state ?? 'unknown';
      if (GONE_STATES.has(state)) return fail('not_found');
      const status = state === 'started' ? 'running' : PARKED_STATES.has(state) ? 'suspended' : 'unknown';
      // Only non-secret fields: the DTO's env may carry the agent's credentials.
      const raw: Record<string, unknown> = { id: s.id, name: s.name ?? handle.name, state };
      if (s.desiredState !== undefined) raw.desiredState = s.desiredState;
      if (s.errorReason) raw.errorReason = s.errorReason;
      if (s.snapshot) raw.snapshot = s.snapshot;
      return ok({ status, raw });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#guard('destroy', async () => {
      this.#forget(handle.name);
      const r = await this.#client.deleteSandbox(handle.name);
      if (!r.ok) return r;
      if (r.value === 'absent') return ok(undefined);
      const gone = await this.#waitGone(handle.name);
      return gone.ok ? ok(undefined) : gone;
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#guard('list_all_names', async () => {
      const names = new Set<string>();
      const seen = new Set<string>();
      let cursor: string | null = null;
      for (let page = 0; page < 1000; page++) {
        const r = await this.#client.listSandboxes(FOUNTAIN_LABELS, cursor, 200);
        if (!r.ok) return r;
        for (const s of r.value.items) if (!GONE_STATES.has(s.state ?? '')) names.add(s.name ?? s.id);
        const next = r.value.nextCursor ?? null;
        if (!next) return ok([...names]);
        // A cursor that comes back twice would loop forever; refuse rather than return a partial set.
        if (seen.has(next)) return fail('truncated');
        seen.add(next);
        cursor = next;
      }
      return fail('truncated');
    });
  }

  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#guard('suspend', async () => {
      this.#forget(handle.name);
      const g = await this.#client.getSandbox(handle.name);
      if (!g.ok) return g;
      const state = g.value.state ?? '';
      if (GONE_STATES.has(state)) return fail('not_found');
      if (PARKED_STATES.has(state)) return ok(undefined);
      if (state !== 'stopping') {
        // Stop keeps the disk; it also kills every process and the daemon's sessions.
        const s = await this.#client.lifecycle(g.value.id, 'stop');
        if (!s.ok) return s;
      }
      const w = await this.#waitState(handle.name, (st) => PARKED_STATES.has(st));
      return w.ok ? ok(undefined) : w;
    });
  }

  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#guard('resume', async () => {
      this.#forget(handle.name);
      const g = await this.#client.getSandbox(handle.name);
      if (!g.ok) return g;
      if (GONE_STATES.has(g.value.state ?? '')) return fail('not_found');
      const started = await this.#ensureStarted(g.value);
      if (!started.ok) return started;
      // The toolbox proxy may differ after a start: the fresh handle carries the re-read URL.
      return ok(this.#handleFor(handle.name, started.value));
    });
  }

  // ---- files and exec ----

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#guard('write_file', async () => {
      const loc = await this.#locate(handle);
      if (!loc.ok) return loc;
      const up = await this.#retryOnStaleProxy(handle, loc.value, (l) => l.toolbox.upload(path, data));
      if (!up.ok) return up;
      if (opts.mode !== undefined) {
        const mode = (opts.mode & 0o7777).toString(8);
        const r = await this.#shell(loc.value, `chmod ${mode} ${quote(path)}`, 60);
        if (!r.ok) return r;
        if (r.value.exitCode !== 0) return fail('invalid', `write_file: chmod exited ${r.value.exitCode}`);
      }
      return ok(undefined);
    });
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#guard('exec', async () => {
      if (hasNul([cmd, ...args, ...(opts.env ?? []).flat()])) return fail('invalid', 'exec: NUL byte in the command');
      const loc = await this.#locate(handle);
      if (!loc.ok) return loc;
      const script = execScript(commandArgv(cmd, args, opts.env), opts.dir, opts.stderrToStdout === true);
      const timeoutSec =
        opts.timeoutMs !== undefined ? Math.max(1, Math.ceil(opts.timeoutMs / 1000)) : EXEC_NO_TIMEOUT_SEC;
      const r = await this.#retryOnStaleProxy(handle, loc.value, (l) =>
        this.#shell(l, script, timeoutSec, opts.timeoutMs !== undefined),
      );
      if (!r.ok) return r;
      return ok({ output: new Uint8Array(Buffer.from(r.value.output, 'utf8')), exitCode: r.value.exitCode });
    });
  }

  // ---- spawn, stdin, attach ----

  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>> {
    return this.#guard('spawn', async () => {
      if (opts.tty) return fail('not_supported', 'tty');
      if (hasNul([cmd, ...args, ...(opts.env ?? []).flat()])) return fail('invalid', 'spawn: NUL byte in the command');
      if (!shellNames(opts.env)) return fail('invalid', 'spawn: an env name that is not a shell variable name');
      const loc = await this.#locate(handle);
      if (!loc.ok) return loc;
      const l = loc.value;
      const sessionId = `${SESSION_PREFIX}${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
      const stateDir = `${l.home}/.fountain/sessions/${sessionId}`;
      const stdin = opts.stdin !== false;
      const created = await l.toolbox.createSession(sessionId);
      if (!created.ok) return this.#afterToolboxFailure(handle, created);
      // One session per process: commands in one session run one after another in one shell.
      const line = spawnCommand(stateDir, opts.dir, stdin, [cmd, ...args], opts.env);
      const ex = await l.toolbox.sessionExecAsync(sessionId, line);
      if (!ex.ok) {
        await l.toolbox.deleteSession(sessionId, this.#cfg.requestTimeoutMs);
        return ex;
      }
      const cmdId = ex.value.cmdId;
      // 202 only means the line reached the session shell; the shim's `started` file is the ack.
      const ack = await this.#awaitStart(l.toolbox, sessionId, cmdId, stateDir);
      if (!ack.ok) {
        await l.toolbox.deleteSession(sessionId, this.#cfg.requestTimeoutMs);
        return ack;
      }
      return ok(this.#follow(handle.name, { sandboxName: handle.name, sessionId, cmdId, stateDir }, opts.owner, stdin));
    });
  }

  writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>> {
    return this.#guard('write_stdin', async () => {
      const live = this.#commands.get(command.ref);
      if (!live || live.exited || live.poller.ended) return fail('command_exited');
      if (!live.stdin) return fail('write_failed', 'stdin_not_requested');
      if (data.length === 0) return ok(undefined);
      const run = live.chain.then(() => this.#appendStdin(live, data));
      live.chain = run.catch(() => undefined);
      return run;
    });
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#guard('close_stdin', async () => {
      const live = this.#commands.get(command.ref);
      if (!live || live.exited || live.poller.ended) return fail('command_exited');
      if (!live.stdin) return ok(undefined);
      const run = live.chain.then(async (): Promise<SandboxResult<void>> => {
        const loc = await this.#locateByName(live.priv.sandboxName);
        if (!loc.ok) return loc;
        const r = await this.#shell(loc.value, closeStdinScript(live.priv.stateDir), 60);
        if (!r.ok) return r;
        if (r.value.exitCode === STDIN_EXITED) return fail('command_exited');
        if (r.value.exitCode !== 0) return fail('write_failed', `close_stdin exited ${r.value.exitCode}`);
        return ok(undefined);
      });
      live.chain = run.catch(() => undefined);
      return run;
    });
  }

  stopCommand(command: Command): Promise<SandboxResult<void>> {
    return this.#guard('stop_command', async () => {
      const live = this.#commands.get(command.ref);
      if (live) {
        live.poller.stop();
        this.#commands.delete(command.ref);
      }
      return ok(undefined);
    });
  }

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#guard('list_sessions', async () => {
      const loc = await this.#locate(handle);
      if (!loc.ok) return loc;
      const r = await this.#retryOnStaleProxy(handle, loc.value, (l) => l.toolbox.listSessions());
      if (!r.ok) return r;
      const sessions: Session[] = [];
      for (const s of r.value) {
        const created = sessionCreatedAt(s.sessionId);
        // Only sessions this adapter spawned have a shim, a journal and a creation time.
        if (!created) continue;
        const first = s.commands?.[0];
        const session: { -readonly [K in keyof Session]: Session[K] } = {
          id: s.sessionId,
          command: first ? visibleCommand(first.command) : null,
          createdAt: created,
          lastActivityAt: null,
          tty: false,
        };
        sessions.push(session);
      }
      sessions.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
      return ok(sessions);
    });
  }

  attach(handle: Handle, sessionId: string, opts: AttachOptions): Promise<SandboxResult<Command>> {
    return this.#guard('attach', async () => {
      if (!SESSION_ID.test(sessionId)) return fail('not_found');
      const loc = await this.#locate(handle);
      if (!loc.ok) return loc;
      const s = await this.#retryOnStaleProxy(handle, loc.value, (l) => l.toolbox.getSession(sessionId));
      if (!s.ok) return s;
      const first = s.value.commands?.[0];
      if (!first) return fail('not_found');
      const stateDir = `${loc.value.home}/.fountain/sessions/${sessionId}`;
      const priv: CommandPrivate = { sandboxName: handle.name, sessionId, cmdId: first.id, stateDir };
      // Replay from byte zero: a fresh poller starts at offset 0 of the journal.
      return ok(this.#follow(handle.name, priv, opts.owner, opts.stdin !== false));
    });
  }

  terminateSession(handle: Handle, sessionId: string, opts: TerminateOptions = {}): Promise<SandboxResult<void>> {
    return this.#guard('terminate_session', async () => {
      if (!SESSION_ID.test(sessionId)) return fail('invalid', 'termination_request');
      const timeoutMs = opts.timeoutMs ?? 10_000;
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 30_000)
        return fail('invalid', 'termination_request');
      const loc = await this.#locate(handle);
      if (!loc.ok) return loc;
      // DELETE sends SIGTERM then SIGKILL to the session's group and removes its journal.
      const r = await this.#retryOnStaleProxy(handle, loc.value, (l) =>
        l.toolbox.deleteSession(sessionId, timeoutMs + 5000),
      );
      return r.ok ? ok(undefined) : r;
    });
  }

  // ---- governance ----

  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#guard('apply_network_policy', async () => {
      const body = networkSettingsFor(policy);
      if (!body.ok) return body;
      const g = await this.#client.getSandbox(handle.name);
      if (!g.ok) return g;
      // Tier 1/2 organisations answer 400 "Network access is restricted…"; errors.ts maps it to `denied`.
      const r = await this.#client.networkSettings(g.value.id, body.value);
      return r.ok ? ok(undefined) : r;
    });
  }

  async publicUrl(): Promise<SandboxResult<PublicUrl>> {
    return ok({ kind: 'unsupported' });
  }

  async createCheckpoint(): Promise<SandboxResult<string>> {
    return fail('not_supported');
  }

  async restoreCheckpoint(): Promise<SandboxResult<void>> {
    return fail('not_supported');
  }

  // ---- internals ----

  /** The adapter never throws: anything unexpected becomes a `provider` error without the key. */
  async #guard<T>(op: string, fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (cause) {
      const text = (cause instanceof Error ? cause.message : String(cause))
        .split(this.#key.reveal())
        .join('[redacted]');
      this.#log?.warn({ op, err: text }, 'daytona adapter caught an unexpected exception');
      return fail('provider', `${op}: ${text.slice(0, 200)}`, { provider: 'daytona' });
    }
  }

  #handleFor(name: string, s: SandboxDto): Handle {
    const priv: DaytonaHandlePrivate = {
      apiKey: this.#key.reveal(),
      sandboxId: s.id,
      toolboxProxyUrl: s.toolboxProxyUrl ?? '',
    };
    return { provider: 'daytona', name, private: new Private(priv) };
  }

  #forget(name: string): void {
    this.#located.delete(name);
  }

  #locate(handle: Handle): Promise<SandboxResult<Located>> {
    return this.#locateByName(handle.name);
  }

  /**
   * Finds the sandbox's toolbox by name. Handles are rebuilt from stored rows without a private
   * part, and a start may move the proxy, so the URL always comes from a fresh Sandbox DTO.
   */
  async #locateByName(name: string): Promise<SandboxResult<Located>> {
    const cached = this.#located.get(name);
    if (cached) return ok(cached);
    const g = await this.#client.getSandbox(name);
    if (!g.ok) return g;
    const s = g.value;
    const state = s.state ?? 'unknown';
    if (GONE_STATES.has(state)) return fail('not_found');
    if (state !== 'started') return fail('unavailable', `sandbox_not_started: ${state}`);
    if (!s.toolboxProxyUrl) return fail('provider', 'sandbox has no toolboxProxyUrl', { provider: 'daytona' });
    const toolbox = this.#client.toolbox(s.toolboxProxyUrl, s.id);
    const home = await toolbox.homeDir();
    if (!home.ok) return home;
    const loc: Located = { toolbox, sandboxId: s.id, home: home.value.dir.replace(/\/+$/, '') };
    this.#located.set(name, loc);
    return ok(loc);
  }

  /** A toolbox call that failed transiently may have hit a stale proxy: re-read it once and retry. */
  async #retryOnStaleProxy<T>(
    handle: Handle,
    loc: Located,
    call: (l: Located) => Promise<SandboxResult<T>>,
  ): Promise<SandboxResult<T>> {
    const first = await call(loc);
    if (first.ok || first.error.code !== 'unavailable') return first;
    this.#forget(handle.name);
    const again = await this.#locate(handle);
    if (!again.ok) return first;
    if (again.value.toolbox.base === loc.toolbox.base) return first;
    return call(again.value);
  }

  #afterToolboxFailure<T>(handle: Handle, r: { ok: false; error: SandboxError }): SandboxResult<T> {
    if (r.error.code === 'unavailable') this.#forget(handle.name);
    return r;
  }

  /** Runs a shell script through `/process/execute`; exit code −1 means the daemon could not start it. */
  async #shell(
    l: Located,
    script: string,
    timeoutSec: number,
    clientLimit = true,
  ): Promise<SandboxResult<{ output: string; exitCode: number }>> {
    const r = await l.toolbox.execute(wrapForExecute(script), timeoutSec, clientLimit);
    if (!r.ok) return r;
    if (r.value.exitCode < 0)
      return fail('provider', 'execute: process failed to start (exit code -1)', { provider: 'daytona' });
    return ok({ output: r.value.result, exitCode: r.value.exitCode });
  }

  async #appendStdin(live: LiveCommand, data: Uint8Array): Promise<SandboxResult<void>> {
    if (live.exited || live.poller.ended) return fail('command_exited');
    const loc = await this.#locateByName(live.priv.sandboxName);
    if (!loc.ok) return loc.error.code === 'not_found' ? fail('command_exited') : loc;
    for (let i = 0; i < data.length; i += STDIN_CHUNK) {
      const r = await this.#shell(
        loc.value,
        appendStdinScript(live.priv.stateDir, data.subarray(i, i + STDIN_CHUNK)),
        60,
      );
      if (!r.ok) return r;
      if (r.value.exitCode === STDIN_EXITED) return fail('command_exited');
      if (r.value.exitCode === STDIN_CLOSED) return fail('write_failed', 'stdin_closed');
      if (r.value.exitCode !== 0) return fail('write_failed', `stdin append exited ${r.value.exitCode}`);
    }
    return ok(undefined);
  }

  async #awaitStart(
    toolbox: Toolbox,
    sessionId: string,
    cmdId: string,
    stateDir: string,
  ): Promise<SandboxResult<void>> {
    const deadline = Date.now() + this.#cfg.spawnAckTimeoutMs;
    const step = Math.min(this.#cfg.pollIntervalMs, 250);
    for (;;) {
      const f = await toolbox.download(`${stateDir}/started`);
      if (f.ok && f.value.kind === 'file') return ok(undefined);
      const done = await readExitSentinel(toolbox, stateDir);
      if (done.ok && done.value !== null) return ok(undefined);
      const rec = await toolbox.getCommand(sessionId, cmdId);
      // The shim never started (no bash, no disk): the session shell already reported the failure.
      if (rec.ok && typeof rec.value.exitCode === 'number') {
        return fail('provider', `spawn: shim exited ${rec.value.exitCode} before starting`, { provider: 'daytona' });
      }
      if (Date.now() >= deadline) return fail('unavailable', 'spawn_not_acknowledged');
      await sleep(step);
    }
  }

  #follow(sandboxName: string, priv: CommandPrivate, owner: FrameSink, stdin: boolean): Command {
    const ref = `daytona-${randomBytes(8).toString('hex')}`;
    const live: LiveCommand = {
      priv,
      stdin,
      exited: false,
      chain: Promise.resolve(),
      poller: new JournalPoller({
        ref,
        owner,
        toolbox: async () => {
          const l = await this.#locateByName(sandboxName);
          return l.ok ? ok(l.value.toolbox) : l;
        },
        invalidate: () => this.#forget(sandboxName),
        shimAlive: async () => {
          const l = await this.#locateByName(sandboxName);
          if (!l.ok) return l;
          const r = await this.#shell(l.value, shimAliveScript(priv.stateDir), 30);
          return r.ok ? ok(r.value.exitCode !== SHIM_GONE) : r;
        },
        sessionId: priv.sessionId,
        cmdId: priv.cmdId,
        stateDir: priv.stateDir,
        intervalMs: this.#cfg.pollIntervalMs,
        maxFailures: this.#cfg.maxPollFailures,
        onEnd: () => {
          live.exited = true;
        },
      }),
    };
    this.#commands.set(ref, live);
    live.poller.start();
    return { provider: 'daytona', ref, private: new Private(priv) };
  }

  async #ensureStarted(s: SandboxDto): Promise<SandboxResult<SandboxDto>> {
    const state = s.state ?? '';
    if (state === 'started') return ok(s);
    if (FAILED_STATES.has(state))
      return fail('provider', `sandbox ${state}: ${s.errorReason ?? ''}`.trim(), { provider: 'daytona' });
    if (PARKED_STATES.has(state)) {
      const st = await this.#client.lifecycle(s.id, 'start');
      if (!st.ok) return st;
    }
    return this.#waitState(s.name ?? s.id, (st) => st === 'started');
  }

  /** Polls until the state matches; `error`/`build_failed` end the wait, a timeout is transient. */
  async #waitState(name: string, done: (state: string) => boolean): Promise<SandboxResult<SandboxDto>> {
    const deadline = Date.now() + this.#cfg.lifecycleTimeoutMs;
    let last: SandboxError | undefined;
    for (;;) {
      const g = await this.#client.getSandbox(name);
      if (g.ok) {
        const state = g.value.state ?? '';
        if (done(state)) return ok(g.value);
        if (FAILED_STATES.has(state)) {
          return fail('provider', `sandbox ${state}: ${g.value.errorReason ?? ''}`.trim(), { provider: 'daytona' });
        }
        if (GONE_STATES.has(state)) return fail('not_found');
      } else if (g.error.code === 'not_found' || g.error.code === 'denied' || g.error.code === 'invalid') {
        return g;
      } else last = g.error;
      if (Date.now() >= deadline) return err(last ?? sandboxError('unavailable', 'lifecycle_timeout'));
      await sleep(this.#cfg.statePollMs);
    }
  }

  async #waitGone(name: string): Promise<SandboxResult<void>> {
    const deadline = Date.now() + this.#cfg.lifecycleTimeoutMs;
    for (;;) {
      const g = await this.#client.getSandbox(name);
      if (!g.ok && g.error.code === 'not_found') return ok(undefined);
      if (g.ok && g.value.state === 'destroyed') return ok(undefined);
      if (!g.ok && (g.error.code === 'denied' || g.error.code === 'invalid')) return g;
      if (Date.now() >= deadline) return fail('unavailable', 'destroy_timeout');
      await sleep(this.#cfg.statePollMs);
    }
  }
}

/** `fountain-<base36 ms>-<hex>`: the session id carries its creation time. */
function sessionCreatedAt(id: string): Date | null {
  const m = /^fountain-([0-9a-z]{6,12})-[0-9a-f]{8}$/.exec(id);
  if (!m || !m[1]) return null;
  const ms = parseInt(m[1], 36);
  return Number.isFinite(ms) ? new Date(ms) : null;
}

/**
 * Translates the contract's allow list into Daytona's fields. `allow: []` is an explicit
 * block-all with both lists cleared, never an absent policy; IPv4 entries go to the CIDR list.
 * Not verified against the production runner (not public): see docs/integrations.
 */
export function networkSettingsFor(policy: NetworkPolicy): SandboxResult<NetworkSettingsBody> {
  const domains: string[] = [];
  const cidrs: string[] = [];
  for (const raw of policy.allow) {
    const entry = raw.trim().toLowerCase();
    const ip = IPV4_CIDR.exec(entry);
    if (ip) {
      if ([1, 2, 3, 4].some((i) => Number(ip[i]) > 255)) return fail('invalid', `network_policy: bad address ${entry}`);
      cidrs.push(ip[5] ? entry : `${entry}/32`);
    } else if (DOMAIN.test(entry)) domains.push(entry);
    else return fail('invalid', `network_policy: not a domain or IPv4 CIDR: ${entry.slice(0, 100)}`);
  }
  if (domains.length > MAX_LIST || cidrs.length > MAX_LIST) {
    return fail('invalid', `network_policy: Daytona allows at most ${MAX_LIST} entries per list`);
  }
  if (domains.length === 0 && cidrs.length === 0) {
    return ok({ networkBlockAll: true, networkAllowList: '', domainAllowList: '' });
  }
  // Never `networkBlockAll: false` or an empty CIDR list: the runner reads either as "restore
  // general outbound access" and the domain list is then ignored. Domains go on their own, as
  // in Daytona's SDK example; a non-empty CIDR list already implies block-all off.
  if (cidrs.length === 0) return ok({ domainAllowList: domains.join(',') });
  return ok({ networkAllowList: cidrs.join(','), domainAllowList: domains.join(',') });
}
