/**
 * The E2B sandbox adapter: names emulated with metadata and adopt-on-list, pause/connect for
 * suspend/resume, a journaling shim for replayable streams, envd SendInput/CloseStdin for stdin.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type {
  AttachOptions,
  Capability,
  Command,
  CreateOptions,
  ExecOptions,
  ExecResult,
  Handle,
  NetworkPolicy,
  PublicUrl,
  SandboxAdapter,
  SandboxError,
  SandboxInfo,
  SandboxResult,
  Session,
  SpawnOptions,
  WriteFileOptions,
} from '../../sandbox/index.ts';
import { Private, err, fail, ok, sandboxError } from '../../sandbox/index.ts';
import type { ListedSandbox } from './api.ts';
import { ControlPlane } from './api.ts';
import { LiveCommand, closedBeforeExit, exitCodeOf } from './command.ts';
import type { E2BOptions, ResolvedE2BOptions } from './config.ts';
import { domainOf, envdBaseUrl, resolveOptions } from './config.ts';
import type { EndEvent, ProcessEventSink, StartRequest, StreamClose } from './envd.ts';
import { Envd } from './envd.ts';
import { internal } from './errors.ts';
import {
  ENV_COMMAND,
  ENV_STARTED,
  JOURNAL_ROOT,
  REPLAY,
  SESSION_ID,
  SHIM,
  SHIM_NO_STDIN,
  describeCommand,
} from './shim.ts';

/** Metadata that stands in for a name: E2B assigns ids only. */
export const NAME_KEY = 'fountain_name';
/** The reaper's label on every platform sandbox. */
export const LABEL_KEY = 'fountain';

const CAPABILITIES: ReadonlySet<Capability> = new Set<Capability>(['suspend', 'network_policy', 'attach']);

/** What a handle's private part carries: the sandbox id and envd's access token (a secret). */
export interface E2BTarget {
  readonly sandboxId: string;
  readonly accessToken: string | null;
  readonly domain: string | null;
}

const targetSchema = z.object({
  sandboxId: z.string().min(1),
  accessToken: z.string().nullable(),
  domain: z.string().nullable(),
});

const oldestFirst = (a: ListedSandbox, b: ListedSandbox) =>
  Date.parse(a.startedAt) - Date.parse(b.startedAt) ||
  (a.sandboxID < b.sandboxID ? -1 : a.sandboxID > b.sandboxID ? 1 : 0);

export class E2BAdapter implements SandboxAdapter {
  readonly provider = 'e2b' as const;
  readonly #o: ResolvedE2BOptions;
  readonly #api: ControlPlane;
  /** Live commands, so heartbeats stop and nothing leaks when they end. */
  readonly #live = new Set<LiveCommand>();

  constructor(options: E2BOptions) {
    this.#o = resolveOptions(options);
    this.#api = new ControlPlane({
      baseUrl: this.#o.baseUrl,
      apiKey: this.#o.apiKey,
      timeoutMs: this.#o.requestTimeoutMs,
      pageSize: this.#o.listPageSize,
      maxPages: 1000,
    });
  }

  capabilities(): ReadonlySet<Capability> {
    return CAPABILITIES;
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv ? { provider: this.provider, name, private: priv } : { provider: this.provider, name };
  }

  async #guard<T>(context: string, fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (e) {
      return err(internal(context, e, [this.#o.apiKey]));
    }
  }

  // ---- identity ---------------------------------------------------------------------------

  /** Every sandbox carrying this name, oldest first. An empty list is the only proof of absence. */
  #lookup(name: string): Promise<SandboxResult<ListedSandbox[]>> {
    return this.#api
      .listSandboxes({ [LABEL_KEY]: '1', [NAME_KEY]: name })
      .then((r) => (r.ok ? ok([...r.value].sort(oldestFirst)) : r));
  }

  async #handleFor(
    name: string,
    sandboxId: string,
    fresh?: { envdAccessToken?: string | null | undefined; domain?: string | null | undefined },
  ): Promise<SandboxResult<Handle>> {
    let token = fresh?.envdAccessToken;
    let domain = fresh?.domain;
    if (token === undefined) {
      const d = await this.#api.getSandbox(sandboxId);
      if (!d.ok) return d;
      token = d.value.envdAccessToken;
      domain = d.value.domain;
    }
    const target: E2BTarget = { sandboxId, accessToken: token ?? null, domain: domain ?? null };
    return ok(this.buildHandle(name, new Private(target)));
  }

  /** The sandbox behind a handle: from its private part, else by name. */
  async #target(handle: Handle): Promise<SandboxResult<E2BTarget>> {
    const p = handle.private?.reveal();
    const parsed = targetSchema.safeParse(p);
    if (parsed.success) return ok(parsed.data);
    const found = await this.#lookup(handle.name);
    if (!found.ok) return found;
    const first = found.value[0];
    if (!first) return fail('not_found', `no e2b sandbox named ${handle.name}`);
    const h = await this.#handleFor(handle.name, first.sandboxID);
    if (!h.ok) return h;
    return ok(targetSchema.parse(h.value.private?.reveal()));
  }

  #envd(t: E2BTarget): Envd {
    const sandboxUrl = envdBaseUrl(t.sandboxId, t.domain ?? domainOf(this.#o.baseUrl), this.#o.sandboxUrl);
    return new Envd(
      { sandboxId: t.sandboxId, accessToken: t.accessToken, sandboxUrl },
      {
        ...(this.#o.user ? { user: this.#o.user } : {}),
        timeoutMs: this.#o.requestTimeoutMs,
        keepaliveS: this.#o.keepaliveS,
        secrets: [this.#o.apiKey],
      },
    );
  }

  // ---- lifecycle --------------------------------------------------------------------------

  create(name: string, opts: CreateOptions = {}): Promise<SandboxResult<Handle>> {
    return this.#guard('create', async () => {
      const found = await this.#lookup(name);
      if (!found.ok) return found;
      if (found.value[0]) return this.#handleFor(name, found.value[0].sandboxID);
      const created = await this.#api.createSandbox({
        templateID: opts.image ?? this.#o.template,
        timeout: this.#o.sandboxTimeoutS,
        metadata: { [LABEL_KEY]: '1', [NAME_KEY]: name },
        envVars: Object.fromEntries(opts.env ?? []),
        secure: true,
        autoPause: true,
      });
      if (!created.ok) return created;
      return this.#converge(name, created.value.sandboxID, created.value);
    });
  }

  /**
   * Two creates can both miss the lookup. Re-list and keep the oldest; kill the rest. Every
   * creator applies the same rule, so they all end up on one sandbox.
   */
  async #converge(
    name: string,
    mine: string,
    fresh: { envdAccessToken?: string | null; domain?: string | null },
  ): Promise<SandboxResult<Handle>> {
    const all = await this.#lookup(name);
    if (!all.ok) {
      this.#o.logger?.warn(
        { name, code: all.error.code },
        'e2b: could not re-list after create; duplicates may remain',
      );
      return this.#handleFor(name, mine, {
        envdAccessToken: fresh.envdAccessToken ?? null,
        domain: fresh.domain ?? null,
      });
    }
    const list = all.value;
    const winner = list[0]?.sandboxID ?? mine;
    const losers = list.filter((s) => s.sandboxID !== winner).map((s) => s.sandboxID);
    // Ours may not be listed yet; if it is not the winner it goes too.
    if (winner !== mine && !list.some((s) => s.sandboxID === mine)) losers.push(mine);
    for (const id of losers) {
      const k = await this.#api.killSandbox(id);
      if (!k.ok) this.#o.logger?.warn({ name, sandboxId: id, code: k.error.code }, 'e2b: could not kill a duplicate');
    }
    if (winner === mine)
      return this.#handleFor(name, mine, {
        envdAccessToken: fresh.envdAccessToken ?? null,
        domain: fresh.domain ?? null,
      });
    return this.#handleFor(name, winner);
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#guard('get', async () => {
      const found = await this.#lookup(handle.name);
      if (!found.ok) return found;
      const s = found.value[0];
      if (!s) return fail('not_found', `no e2b sandbox named ${handle.name}`);
      const status = s.state === 'running' ? 'running' : s.state === 'paused' ? 'suspended' : 'unknown';
      return ok({
        status,
        raw: {
          sandboxId: s.sandboxID,
          state: s.state,
          templateId: s.templateID ?? null,
          startedAt: s.startedAt,
          endAt: s.endAt ?? null,
        },
      });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#guard('destroy', async () => {
      const found = await this.#lookup(handle.name);
      if (!found.ok) return found;
      const ids = new Set(found.value.map((s) => s.sandboxID));
      const t = targetSchema.safeParse(handle.private?.reveal());
      if (t.success) ids.add(t.data.sandboxId);
      for (const id of ids) {
        const k = await this.#api.killSandbox(id);
        if (!k.ok) return k;
      }
      return ok(undefined);
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#guard('list_all_names', async () => {
      const all = await this.#api.listSandboxes({ [LABEL_KEY]: '1' });
      if (!all.ok) return all;
      const names = new Set<string>();
      for (const s of all.value) {
        const n = s.metadata?.[NAME_KEY];
        if (n) names.add(n);
      }
      return ok([...names]);
    });
  }

  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#guard('suspend', async () => {
      const t = await this.#target(handle);
      if (!t.ok) return t;
      // Every envd stream drops at the pause anyway, but one envd has not yet seen close is
      // snapshotted and wedges its process's output fan-out after resume (infra#3292): close
      // them first. Their commands end in closed_before_exit and reattach later.
      const mine = [...this.#live].filter((l) => targets.get(l)?.sandboxId === t.value.sandboxId);
      await Promise.all(mine.map((l) => l.drop('sandbox paused')));
      const p = await this.#api.pauseSandbox(t.value.sandboxId);
      return p.ok ? ok(undefined) : p;
    });
  }

  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#guard('resume', async () => {
      const found = await this.#lookup(handle.name);
      if (!found.ok) return found;
      const s = found.value[0];
      if (!s) return fail('not_found', `no e2b sandbox named ${handle.name}`);
      const c = await this.#api.connectSandbox(s.sandboxID, this.#o.sandboxTimeoutS);
      if (!c.ok) return c;
      // The token and domain may change across a pause: take them from this reply.
      const fresh =
        c.value.envdAccessToken === undefined
          ? undefined
          : { envdAccessToken: c.value.envdAccessToken, domain: c.value.domain };
      return this.#handleFor(handle.name, c.value.sandboxID || s.sandboxID, fresh);
    });
  }

  // ---- filesystem -------------------------------------------------------------------------

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#guard('write_file', async () => {
      if (typeof path !== 'string' || path === '' || path.includes('\0'))
        return fail('invalid', 'write_file: bad path');
      const t = await this.#target(handle);
      if (!t.ok) return t;
      const envd = this.#envd(t.value);
      const up = await envd.upload(path, data);
      if (!up.ok) return up;
      if (opts.mode === undefined) return ok(undefined);
      // envd's upload has no mode parameter.
      const mode = (opts.mode & 0o7777).toString(8);
      const r = await this.#run(
        envd,
        { cmd: 'chmod', args: [mode, '--', path], envs: {} },
        this.#o.requestTimeoutMs,
        false,
      );
      if (!r.ok) return r;
      return r.value.exitCode === 0 ? ok(undefined) : fail('invalid', `write_file: chmod exited ${r.value.exitCode}`);
    });
  }

  // ---- exec -------------------------------------------------------------------------------

  /** Runs a process to completion over one Start stream. */
  #run(
    envd: Envd,
    process: StartRequest['process'],
    lifetimeMs: number,
    stderrToStdout: boolean,
  ): Promise<SandboxResult<ExecResult>> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      let ended: EndEvent | null = null;
      const sink: ProcessEventSink = {
        start: () => undefined,
        stdout: (d) => chunks.push(d),
        stderr: (d) => {
          if (stderrToStdout) chunks.push(d);
        },
        end: (e) => {
          ended = e;
        },
        closed: (how: StreamClose) => {
          const end = ended as EndEvent | null;
          // envd ends the process at the deadline and says so in the end-stream, after the end event.
          if (how.kind === 'end_stream' && how.error?.detail?.includes('deadline_exceeded')) {
            resolve(fail('unavailable', 'timeout'));
            return;
          }
          if (end) {
            const code = exitCodeOf(end);
            if (code !== undefined) {
              resolve(ok({ output: new Uint8Array(Buffer.concat(chunks)), exitCode: code }));
              return;
            }
          }
          if (how.kind === 'end_stream' && how.error) {
            resolve(err(how.error));
            return;
          }
          resolve(err(closedBeforeExit(how.kind === 'dropped' ? how.detail : end ? end.status : 'no end event')));
        },
      };
      envd.start({ process, stdin: false }, lifetimeMs, sink);
    });
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#guard('exec', async () => {
      if (typeof cmd !== 'string' || cmd === '' || !Array.isArray(args)) return fail('invalid', 'exec: bad command');
      const t = await this.#target(handle);
      if (!t.ok) return t;
      const process: StartRequest['process'] = {
        cmd,
        args: [...args],
        envs: Object.fromEntries(opts.env ?? []),
        ...(opts.dir ? { cwd: opts.dir } : {}),
      };
      // 0 is "no limit" for envd; it is sent explicitly rather than left to a default.
      return this.#run(this.#envd(t.value), process, opts.timeoutMs ?? 0, opts.stderrToStdout ?? false);
    });
  }

  // ---- streams ----------------------------------------------------------------------------

  #heartbeat(sandboxId: string): () => void {
    const everyMs = Math.max(250, Math.floor((this.#o.sandboxTimeoutS * 1000) / 3));
    const timer = setInterval(() => {
      // A live turn must not be parked by the sandbox's own expiry.
      void this.#api.setTimeout(sandboxId, this.#o.sandboxTimeoutS).then((r) => {
        if (!r.ok) this.#o.logger?.warn({ sandboxId, code: r.error.code }, 'e2b: keep-alive failed');
      });
    }, everyMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Waits for envd's `start` on a stream: the process is registered only then. */
  async #acknowledged(live: {
    acked: Promise<{ ok: true; pid: number } | { ok: false; error: SandboxError }>;
  }): Promise<SandboxResult<number>> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<{ ok: false; error: SandboxError }>((resolve) => {
      timer = setTimeout(
        () => resolve({ ok: false, error: sandboxError('unavailable', 'spawn_unacknowledged') }),
        this.#o.spawnAckTimeoutMs,
      );
    });
    const ack = await Promise.race([live.acked, timeout]);
    clearTimeout(timer);
    return ack.ok ? ok(ack.pid) : err(ack.error);
  }

  /**
   * Starts the journal replayer of `session` and returns it as the Command: every Command's
   * output, a fresh spawn's included, is read from the journal, not from the agent's own stream.
   */
  async #follow(
    t: E2BTarget,
    session: string,
    init: { owner: SpawnOptions['owner']; stdinTag: string | null },
  ): Promise<SandboxResult<Command>> {
    const envd = this.#envd(t);
    let stopBeat: () => void = () => undefined;
    const live: LiveCommand = new LiveCommand({
      ref: randomUUID(),
      owner: init.owner,
      stdinTag: init.stdinTag,
      onDone: () => {
        stopBeat();
        this.#live.delete(live);
      },
      onAbandon: async (pid) => {
        await envd.sendSignal({ pid }, 'SIGTERM');
      },
    });
    targets.set(live, t);
    const req: StartRequest = {
      process: { cmd: '/bin/bash', args: ['-c', REPLAY, 'fountain-replay', session], envs: {} },
      stdin: false,
    };
    // No lifetime: the replayer lives as long as the session.
    live.attachStream(envd.start(req, 0, live));
    const ack = await this.#acknowledged(live);
    if (!ack.ok) {
      live.stop();
      return ack;
    }
    if (live.live) {
      this.#live.add(live);
      stopBeat = this.#heartbeat(t.sandboxId);
    }
    live.release();
    return ok({ provider: this.provider, ref: live.ref, private: new Private(live) });
  }

  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>> {
    return this.#guard('spawn', async () => {
      if (typeof cmd !== 'string' || cmd === '' || !Array.isArray(args)) return fail('invalid', 'spawn: bad command');
      if (!opts || typeof opts.owner !== 'function') return fail('invalid', 'spawn: owner required');
      // `tty` is not advertised: envd's PTY mode merges the streams and needs 0x04 for EOF.
      if (opts.tty) return fail('not_supported', 'tty');
      const t = await this.#target(handle);
      if (!t.ok) return t;
      const session = `fountain-s-${randomBytes(8).toString('hex')}`;
      const wantsStdin = opts.stdin !== false;
      const req: StartRequest = {
        process: {
          cmd: '/bin/bash',
          args: ['-c', wantsStdin ? SHIM : SHIM_NO_STDIN, 'fountain-shim', session, cmd, ...args],
          envs: {
            ...Object.fromEntries(opts.env ?? []),
            [ENV_COMMAND]: describeCommand(cmd, args),
            [ENV_STARTED]: new Date().toISOString(),
          },
          ...(opts.dir ? { cwd: opts.dir } : {}),
        },
        tag: session,
        // SDKs hand the process /dev/null unless asked; the shim closes stdin itself when not wanted.
        stdin: true,
      };
      // The shim's own stream carries nothing (its output goes to the journal): it is closed as
      // soon as envd has acknowledged the process.
      const shim = new StartAck();
      const stream = this.#envd(t.value).start(req, 0, shim);
      const ack = await this.#acknowledged(shim);
      stream.abort();
      if (!ack.ok) return ack;
      return this.#follow(t.value, session, { owner: opts.owner, stdinTag: wantsStdin ? session : null });
    });
  }

  #liveOf(command: Command): LiveCommand | undefined {
    const p = command?.private?.reveal?.();
    return p instanceof LiveCommand ? p : undefined;
  }

  writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>> {
    return this.#guard('write_stdin', async () => {
      const live = this.#liveOf(command);
      if (!live) return fail('command_exited', 'write_stdin: unknown command');
      if (!live.stdinTag) return fail('invalid', 'write_stdin: stdin was not requested');
      if (!live.live) return fail('command_exited');
      const t = targetOf(live);
      const r = await this.#envd(t).sendInput({ tag: live.stdinTag }, data);
      if (r.ok) return ok(undefined);
      // After exit envd no longer knows the tag.
      if (r.error.code === 'not_found') return fail('command_exited');
      return fail('write_failed', r.error.detail ?? r.error.code);
    });
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#guard('close_stdin', async () => {
      const live = this.#liveOf(command);
      if (!live) return fail('command_exited', 'close_stdin: unknown command');
      if (!live.stdinTag) return fail('invalid', 'close_stdin: stdin was not requested');
      if (!live.live) return fail('command_exited');
      const r = await this.#envd(targetOf(live)).closeStdin({ tag: live.stdinTag });
      if (r.ok) return ok(undefined);
      if (r.error.code === 'not_found') return fail('command_exited');
      return err(r.error);
    });
  }

  stopCommand(command: Command): Promise<SandboxResult<void>> {
    return this.#guard('stop_command', async () => {
      await this.#liveOf(command)?.stop();
      return ok(undefined);
    });
  }

  // ---- sessions ---------------------------------------------------------------------------

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#guard('list_sessions', async () => {
      const t = await this.#target(handle);
      if (!t.ok) return t;
      const r = await this.#envd(t.value).list();
      if (!r.ok) return r;
      const sessions: Session[] = [];
      for (const p of r.value.processes) {
        if (!p.tag || !SESSION_ID.test(p.tag)) continue;
        const envs = p.config?.envs ?? {};
        const started = Date.parse(envs[ENV_STARTED] ?? '');
        sessions.push({
          id: p.tag,
          command: envs[ENV_COMMAND] ?? null,
          createdAt: new Date(Number.isNaN(started) ? 0 : started),
          lastActivityAt: null,
          tty: false,
        });
      }
      sessions.sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime());
      return ok(sessions);
    });
  }

  attach(handle: Handle, sessionId: string, opts: AttachOptions): Promise<SandboxResult<Command>> {
    return this.#guard('attach', async () => {
      if (!opts || typeof opts.owner !== 'function') return fail('invalid', 'attach: owner required');
      if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId))
        return fail('not_found', 'attach: no such session');
      const t = await this.#target(handle);
      if (!t.ok) return t;
      const envd = this.#envd(t.value);
      const has = await envd.exists(`~/${JOURNAL_ROOT}/${sessionId}/pid`);
      if (!has.ok) return has;
      if (!has.value) return fail('not_found', 'attach: no such session');
      // envd's Connect replays nothing and drops output nobody listened to: replay the journal instead.
      return this.#follow(t.value, sessionId, { owner: opts.owner, stdinTag: opts.stdin ? sessionId : null });
    });
  }

  // ---- governance -------------------------------------------------------------------------

  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#guard('apply_network_policy', async () => {
      const allow = z.array(z.string().min(1).max(253)).safeParse(policy?.allow);
      if (!allow.success) return fail('invalid', 'network_policy: allow must be a list of domains');
      const t = await this.#target(handle);
      if (!t.ok) return t;
      // E2B's firewall allows whatever no rule matches, so deny-all is explicit and allowOut
      // punches holes in it. Each call replaces the whole policy.
      return this.#api.putNetwork(t.value.sandboxId, { allowOut: allow.data, denyOut: ['0.0.0.0/0'] });
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

  /** Drops every live stream this adapter holds (shutdown); remote processes keep running. */
  close(): void {
    for (const l of [...this.#live]) void l.stop();
  }
}

/** Waits for one stream's `start` and ignores the rest: the shim's acknowledgement. */
class StartAck implements ProcessEventSink {
  #settle: ((r: { ok: true; pid: number } | { ok: false; error: SandboxError }) => void) | null = null;
  readonly acked = new Promise<{ ok: true; pid: number } | { ok: false; error: SandboxError }>(
    (resolve) => (this.#settle = resolve),
  );
  start(pid: number): void {
    this.#settle?.({ ok: true, pid });
  }
  stdout(): void {}
  stderr(): void {}
  end(): void {}
  closed(how: StreamClose): void {
    this.#settle?.({
      ok: false,
      error:
        how.kind === 'end_stream' && how.error
          ? how.error
          : closedBeforeExit(how.kind === 'dropped' ? how.detail : 'before start'),
    });
  }
}

/** Commands remember their sandbox through the envd client they were started with. */
const targets = new WeakMap<LiveCommand, E2BTarget>();
function targetOf(live: LiveCommand): E2BTarget {
  const t = targets.get(live);
  if (!t) throw new Error('command without a sandbox');
  return t;
}
