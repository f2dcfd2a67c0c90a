/**
 * The Sprites (Fly.io) sandbox adapter: the contract mapped onto the Sprites REST API and exec
 * WebSocket, with the workarounds its quirks force (see docs/integrations/sprites.md).
 */
import { randomUUID } from 'node:crypto';
import {
  Private,
  err,
  ok,
  sandboxError,
  type AttachOptions,
  type Capability,
  type Command,
  type CreateOptions,
  type ExecOptions,
  type ExecResult,
  type FrameSink,
  type Handle,
  type NetworkPolicy,
  type PublicUrl,
  type SandboxAdapter,
  type SandboxError,
  type SandboxInfo,
  type SandboxResult,
  type Session,
  type SpawnOptions,
  type StreamFrame,
  type TerminateOptions,
  type WriteFileOptions,
} from '../../sandbox/index.ts';
import { SpritesApi, type PolicyRule, type RawSession, type Sprite } from './api.ts';
import { resolveSpritesConfig, type ResolvedSpritesConfig, type SpritesOptions } from './config.ts';
import { ExecSocket, type ExecEvent, type SessionInfo } from './exec-socket.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
import {
  NO_JOURNAL_EXIT,
  displayCommand,
  exitReadArgv,
  isReplayer,
  journalRef,
  envLine,
  newJournalKey,
  replayArgv,
  shimArgv,
  withEnv,
  type EnvMode,
} from './shim.ts';

/** What a Sprites handle keeps in its private part: the bearer token it was made with. */
interface SpritesPrivate {
  readonly token: string;
}

interface CommandState {
  readonly ref: string;
  readonly sprite: string;
  readonly token: Private<string>;
  readonly owner: FrameSink;
  sessionId: string;
  /** Carries stdin (the spawn socket itself, or the native attach socket). */
  stdinSocket: ExecSocket | null;
  sockets: ExecSocket[];
  /** Frames wait here until the caller has the Command in hand. */
  held: StreamFrame[] | null;
  done: boolean;
  stopped: boolean;
  /** Set on attach: the replayer session to reap when the attacher lets go. */
  replaySessionId?: string;
}

const LABELS = ['fountain'];
const MAX_LIST_PAGES = 10_000;
const DOMAIN = /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$/;
const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/;
const internal = (): SandboxError => sandboxError('provider', 'internal_error', { provider: 'sprites' });

const toDate = (v: string | number | null | undefined): Date | null => {
  if (v === null || v === undefined) return null;
  const d = typeof v === 'number' ? new Date(v < 1e12 ? v * 1000 : v) : new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
};

const statusOf = (s: string | undefined): SandboxInfo['status'] => {
  if (s === 'running') return 'running';
  // Hibernated sprites: disk kept, processes gone, any call wakes them.
  if (s === 'cold' || s === 'warm' || s === 'hibernated' || s === 'suspended' || s === 'stopped') return 'suspended';
  return 'unknown';
};

export class SpritesAdapter implements SandboxAdapter {
  readonly provider = 'sprites' as const;
  readonly #cfg: ResolvedSpritesConfig;
  readonly #api: SpritesApi;
  readonly #commands = new Map<string, CommandState>();

  constructor(opts: SpritesOptions = {}) {
    this.#cfg = resolveSpritesConfig(opts);
    this.#api = new SpritesApi(this.#cfg);
  }

  capabilities(): ReadonlySet<Capability> {
    // `suspend`: Sprites hibernates an idle sprite by itself and keeps its disk (not its
    // processes); suspend ends the sessions so hibernation can happen. No `public_url`: the URL
    // needs the Sprites token. No `checkpoint`: not wired up. No `tty`: not proven here.
    return new Set<Capability>([
      'suspend',
      'network_policy',
      'attach',
      'terminate_session',
      'force_terminate_session',
      'create_new',
    ]);
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'sprites', name } : { provider: 'sprites', name, private: priv };
  }

  #handleFor(name: string, token: Private<string>): Handle {
    return { provider: 'sprites', name, private: new Private<SpritesPrivate>({ token: token.reveal() }) };
  }

  /** The handle's own token when it carries one, else the configured one. */
  #token(handle?: Handle): SandboxResult<Private<string>> {
    const p = handle?.private?.reveal();
    if (typeof p === 'object' && p !== null && typeof (p as { token?: unknown }).token === 'string') {
      const t = (p as SpritesPrivate).token.trim();
      if (t) return ok(new Private(t));
    }
    return this.#cfg.token ? ok(this.#cfg.token) : err(sandboxError('denied', 'missing_token'));
  }

  /** Every public operation runs through here: nothing escapes as a rejection. */
  async #total<T>(fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (e) {
      this.#cfg.logger?.error(
        { provider: 'sprites', err: e instanceof Error ? e.name : typeof e },
        'sprites adapter internal error',
      );
      return err(internal());
    }
  }

  create(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    return this.#total(async () => {
      const token = this.#token();
      if (!token.ok) return token;
      const r = await this.#api.createSprite(token.value, name, LABELS);
      if (!r.ok) return r;
      if (r.value.sprite) return ok(this.#handleFor(name, token.value));
      // A name that exists comes back 409 (reported) or 400 (seen): adopt it if it is there.
      const existing = await this.#api.getSprite(token.value, name);
      if (existing.ok) return ok(this.#handleFor(name, token.value));
      if (existing.error.code === 'not_found') return err(sandboxError('invalid', `create_rejected_${r.value.status}`));
      return existing;
    });
  }

  createNew(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    return this.#total(async () => {
      const token = this.#token();
      if (!token.ok) return token;
      const r = await this.#api.createSprite(token.value, name, LABELS);
      if (!r.ok) return r;
      if (!r.value.sprite) {
        return err(
          r.value.status === 409 ? sandboxError('already_exists') : sandboxError('invalid', 'create_rejected_400'),
        );
      }
      if (!r.value.sprite.id) return err(sandboxError('provider', 'bad_reply_sprite_id', { provider: 'sprites' }));
      return ok({ ...this.#handleFor(name, token.value), instanceId: r.value.sprite.id });
    });
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      const r = await this.#api.getSprite(token.value, handle.name);
      if (!r.ok) return r;
      return ok({ status: statusOf(r.value.status), raw: rawOf(r.value) });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      this.#letGo(handle.name);
      return this.#api.deleteSprite(token.value, handle.name);
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#total(async () => {
      const token = this.#token();
      if (!token.ok) return token;
      const prefix = this.#cfg.namePrefix;
      const names = new Set<string>();
      const seen = new Set<string>();
      let continuation: string | null = null;
      for (let page = 0; page < MAX_LIST_PAGES; page++) {
        const r = await this.#api.listPage(token.value, prefix, this.#cfg.pageSize, continuation);
        if (!r.ok) return r;
        for (const s of r.value.sprites) if (s.name.startsWith(prefix)) names.add(s.name);
        if (!r.value.has_more) return ok([...names]);
        // More pages promised but no way to reach them: refuse rather than return a partial view.
        const next = r.value.next_continuation_token;
        if (!next || seen.has(next)) return err(sandboxError('truncated'));
        seen.add(next);
        continuation = next;
      }
      return err(sandboxError('truncated'));
    });
  }

  /**
   * Sprites has no suspend call: it hibernates a sprite that has been idle ~30 s, keeping the
   * disk but not the processes. A live session keeps it awake (and billed), so suspend ends
   * every session in the sprite and drops our sockets; hibernation then follows on its own.
   */
  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      const sessions = await this.#api.listSessions(token.value, handle.name);
      if (!sessions.ok) return sessions;
      // Replayers end with their shim; killing one that already ended answers 410. A kill that
      // fails leaves one session running (kept awake, not lost): a failed suspend would instead
      // become a destroy of the sprite and its disk, so it never fails on one session.
      for (const s of sessions.value) {
        if (isReplayer(s.command)) continue;
        const k = await this.#api.killSession(token.value, handle.name, String(s.id), 'TERM', 10_000);
        if (!k.ok || k.value === 'unconfirmed') {
          this.#cfg.logger?.warn(
            { provider: 'sprites', sessionId: String(s.id), code: k.ok ? 'unconfirmed' : k.error.code },
            'suspend: a session did not end',
          );
        }
      }
      this.#letGo(handle.name);
      return ok(undefined);
    });
  }

  /** Resuming is implicit in Sprites (any exec wakes the sprite); one trivial exec proves it is back. */
  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      const g = await this.#api.getSprite(token.value, handle.name);
      if (!g.ok) return g;
      // A fast command may close without its exit frame (sprites-py#16): one more probe decides.
      let woke = await this.exec(handle, 'true', []);
      if (!woke.ok && woke.error.code === 'closed_before_exit') woke = await this.exec(handle, 'true', []);
      if (!woke.ok) return woke;
      return ok(this.buildHandle(handle.name, handle.private));
    });
  }

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      if (!path || path.includes('\0')) return err(sandboxError('invalid', 'path'));
      const mode = opts.mode ?? 0o644;
      if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) return err(sandboxError('invalid', 'mode'));
      return this.#api.writeFile(token.value, handle.name, path, data, mode);
    });
  }

  #execUrl(sprite: string, argv: readonly string[], o: { stdin: boolean; dir?: string; detachable?: boolean }): URL {
    const q: Array<[string, string]> = argv.map((a) => ['cmd', a] as [string, string]);
    q.push(['stdin', String(o.stdin)]);
    if (o.dir) q.push(['dir', o.dir]);
    if (o.detachable) {
      // Without this a non-TTY process dies 10 s after its socket drops.
      q.push(['max_run_after_disconnect', '0']);
      q.push(['detachable', 'true']);
    }
    return this.#api.wsUrl(`v1/sprites/${encodeURIComponent(sprite)}/exec`, q);
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      if (opts.timeoutMs !== undefined && !(opts.timeoutMs > 0)) return err(sandboxError('invalid', 'timeout'));
      if (opts.dir !== undefined && (opts.dir === '' || opts.dir.includes('\0')))
        return err(sandboxError('invalid', 'dir'));
      const argv = withEnv(cmd, args, opts.env);
      if (!argv.ok) return argv;
      return this.#execArgv(handle.name, token.value, argv.value, opts);
    });
  }

  async #execArgv(
    sprite: string,
    token: Private<string>,
    argv: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    const chunks: Uint8Array[] = [];
    let finish: (ev: ExecEvent) => void = () => undefined;
    const finished = new Promise<ExecEvent>((r) => (finish = r));
    const sock = await ExecSocket.open({
      url: this.#execUrl(sprite, argv, { stdin: false, ...(opts.dir ? { dir: opts.dir } : {}) }),
      token,
      tty: false,
      ackTimeoutMs: this.#cfg.ackTimeoutMs,
      onEvent: (ev) => {
        if (ev.type === 'stdout') chunks.push(ev.data);
        else if (ev.type === 'stderr') {
          if (opts.stderrToStdout) chunks.push(ev.data);
        } else finish(ev);
      },
    });
    if (!sock.ok) return sock;
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      finished,
      new Promise<'timeout'>((r) => {
        if (opts.timeoutMs !== undefined) timer = setTimeout(() => r('timeout'), opts.timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (outcome === 'timeout') {
      sock.value.close();
      // Without session_info there is no id to kill; the default 10 s disconnect grace ends it.
      const id = sock.value.info?.sessionId;
      if (id) void this.#api.killSession(token, sprite, id, 'KILL', 5000).catch(() => undefined);
      return err(sandboxError('unavailable', 'timeout'));
    }
    if (outcome.type === 'exit') return ok({ output: Buffer.concat(chunks), exitCode: outcome.code });
    if (outcome.type === 'lost') {
      // A stream that closed without an exit is never a success with partial output.
      return err(outcome.error);
    }
    return err(internal());
  }

  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      if (opts.tty) return err(sandboxError('not_supported', 'tty'));
      if (opts.dir !== undefined && (opts.dir === '' || opts.dir.includes('\0')))
        return err(sandboxError('invalid', 'dir'));
      const argv = withEnv(cmd, args, undefined);
      if (!argv.ok) return argv;
      const header = envLine(opts.env);
      if (!header.ok) return header;
      const stdin = opts.stdin ?? true;
      const state = this.#newState(handle.name, token.value, opts.owner);
      const key = newJournalKey();
      const mode: EnvMode = header.value === null ? '-' : stdin ? 'env' : 'env-only';
      const sock = await ExecSocket.open({
        url: this.#execUrl(handle.name, shimArgv(key, argv.value, mode), {
          // The env travels as the first stdin line, so stdin is open whenever there is an env.
          stdin: stdin || header.value !== null,
          detachable: opts.detachable ?? false,
          ...(opts.dir ? { dir: opts.dir } : {}),
        }),
        token: token.value,
        tty: false,
        ackTimeoutMs: this.#cfg.ackTimeoutMs,
        onEvent: (ev) => this.#onEvent(state, ev),
      });
      if (!sock.ok) return sock;
      // The acknowledgment is `session_info`, or, where it does not come, the session showing up
      // in the listing under this spawn's journal key: either way the process is registered.
      const id = await this.#acknowledged(token.value, handle.name, key, sock.value);
      if (!id.ok) {
        sock.value.close();
        return id;
      }
      if (header.value !== null) {
        // After the acknowledgment: stdin sent before the process is registered is lost.
        const sent = await sock.value.writeStdin(Buffer.from(header.value, 'utf8'));
        if (sent.ok && !stdin) await sock.value.closeStdin();
        if (!sent.ok) {
          sock.value.close();
          return sent;
        }
      }
      state.sessionId = id.value;
      state.sockets.push(sock.value);
      state.stdinSocket = stdin ? sock.value : null;
      return ok(this.#register(state));
    });
  }

  async #acknowledged(
    token: Private<string>,
    sprite: string,
    key: string,
    sock: ExecSocket,
  ): Promise<SandboxResult<string>> {
    const deadline = Date.now() + this.#cfg.ackTimeoutMs;
    let info: SessionInfo | null = sock.info;
    const arrived = sock.whenInfo().then((i) => (info = i));
    while (!info) {
      const listed = await this.#api.listSessions(token, sprite);
      if (!info && listed.ok) {
        const mine = listed.value.find((x) => x.command?.includes(key));
        if (mine) return ok(String(mine.id));
      }
      if (info) break;
      if (sock.ended || Date.now() >= deadline) return err(sandboxError('unavailable', 'spawn_unacknowledged'));
      await Promise.race([arrived, sleep(Math.min(250, Math.max(1, deadline - Date.now())))]);
    }
    return ok((info as SessionInfo).sessionId);
  }

  #newState(sprite: string, token: Private<string>, owner: FrameSink): CommandState {
    return {
      ref: randomUUID(),
      sprite,
      token,
      owner,
      sessionId: '',
      stdinSocket: null,
      sockets: [],
      held: [],
      done: false,
      stopped: false,
    };
  }

  /** Hands the Command out; frames that arrived meanwhile are released after the caller resumes. */
  #register(state: CommandState): Command {
    this.#commands.set(state.ref, state);
    setImmediate(() => {
      const held = state.held ?? [];
      state.held = null;
      for (const f of held) this.#emit(state, f);
    });
    return { provider: 'sprites', ref: state.ref, private: new Private({ sessionId: state.sessionId }) };
  }

  #deliver(state: CommandState, frame: StreamFrame): void {
    if (state.held) state.held.push(frame);
    else this.#emit(state, frame);
  }

  #emit(state: CommandState, frame: StreamFrame): void {
    if (state.stopped) return;
    try {
      state.owner(frame);
    } catch (e) {
      this.#cfg.logger?.warn({ provider: 'sprites', err: e instanceof Error ? e.name : typeof e }, 'frame owner threw');
    }
  }

  #terminal(state: CommandState, frame: StreamFrame): void {
    if (state.done) return;
    state.done = true;
    this.#deliver(state, frame);
    for (const s of state.sockets) s.close();
    this.#commands.delete(state.ref);
  }

  #onEvent(state: CommandState, ev: ExecEvent): void {
    if (state.done) return;
    if (ev.type === 'stdout' || ev.type === 'stderr')
      this.#deliver(state, { type: ev.type, ref: state.ref, data: ev.data });
    else if (ev.type === 'exit') this.#terminal(state, { type: 'exit', ref: state.ref, code: ev.code });
    else if (!state.stopped) this.#terminal(state, { type: 'error', ref: state.ref, error: ev.error });
  }

  writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const state = this.#commands.get(command.ref);
      if (!state || state.done || state.stopped) return err(sandboxError('command_exited'));
      if (!state.stdinSocket) return err(sandboxError('invalid', 'stdin_not_enabled'));
      return state.stdinSocket.writeStdin(data);
    });
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const state = this.#commands.get(command.ref);
      if (!state || state.done || state.stopped) return err(sandboxError('command_exited'));
      if (!state.stdinSocket) return err(sandboxError('invalid', 'stdin_not_enabled'));
      return state.stdinSocket.closeStdin();
    });
  }

  stopCommand(command: Command): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const state = this.#commands.get(command.ref);
      if (state) this.#stop(state);
      return ok(undefined);
    });
  }

  /** `endReplayer`: also end the replayer session (not when its shim is being ended anyway). */
  #stop(state: CommandState, endReplayer = true): void {
    state.stopped = true;
    state.done = true;
    for (const s of state.sockets) s.close();
    this.#commands.delete(state.ref);
    if (endReplayer && state.replaySessionId) {
      void this.#api.killSession(state.token, state.sprite, state.replaySessionId, 'KILL', 5000).catch(() => undefined);
    }
  }

  /** Drops every local socket into a sprite (its remote processes are not touched here). */
  #letGo(sprite: string): void {
    for (const state of [...this.#commands.values()]) if (state.sprite === sprite) this.#stop(state, false);
  }

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      const r = await this.#api.listSessions(token.value, handle.name);
      if (!r.ok) return r;
      // Never filter on `is_active`: it is false whenever nobody is attached, which is exactly
      // the detached session a reattach has to find.
      return ok(
        r.value
          .filter((s) => !isReplayer(s.command))
          .map(toSession)
          .sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime()),
      );
    });
  }

  /**
   * Sprites' own attach replays only a partial tail of the scrollback. Output comes instead from
   * the journal the shim keeps (replayed from byte zero, then followed); stdin goes through a
   * native attach to the session.
   */
  attach(handle: Handle, sessionId: string, opts: AttachOptions): Promise<SandboxResult<Command>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      if (!SESSION_ID.test(sessionId)) return err(sandboxError('not_found'));
      const sessions = await this.#api.listSessions(token.value, handle.name);
      if (!sessions.ok) return sessions;
      const session = sessions.value.find((s) => String(s.id) === sessionId);
      if (!session || isReplayer(session.command)) return err(sandboxError('not_found'));
      const journal = journalRef(sessionId, session.command);
      if (!journal) return err(sandboxError('not_supported', 'session_not_journaled'));
      const state = this.#newState(handle.name, token.value, opts.owner);
      state.sessionId = sessionId;

      if (opts.stdin) {
        const open = (url: URL) =>
          ExecSocket.open({
            url,
            token: token.value,
            tty: false,
            ackTimeoutMs: this.#cfg.ackTimeoutMs,
            // Its output is the partial scrollback and then the live stream, which the journal
            // replayer already delivers: only its stdin matters.
            onEvent: () => undefined,
          });
        const sprite = encodeURIComponent(handle.name);
        let native = await open(this.#api.wsUrl(`v1/sprites/${sprite}/exec/${encodeURIComponent(sessionId)}`, []));
        // Sprites older than 0.0.1-rc30 know only `?id=` and answer the path form with 404.
        if (!native.ok && native.error.code === 'not_found')
          native = await open(this.#api.wsUrl(`v1/sprites/${sprite}/exec`, [['id', sessionId]]));
        if (!native.ok) return native;
        state.sockets.push(native.value);
        state.stdinSocket = native.value;
      }

      let delivered = false;
      const replay = await ExecSocket.open({
        url: this.#execUrl(handle.name, replayArgv(journal), { stdin: false }),
        token: token.value,
        tty: false,
        ackTimeoutMs: this.#cfg.ackTimeoutMs,
        onEvent: (ev) => {
          if (state.done) return;
          if (ev.type === 'stdout' || ev.type === 'stderr') {
            delivered = true;
            this.#deliver(state, { type: ev.type, ref: state.ref, data: ev.data });
          } else if (ev.type === 'exit') {
            if (ev.code === NO_JOURNAL_EXIT && !delivered) {
              this.#terminal(state, {
                type: 'error',
                ref: state.ref,
                error: sandboxError('not_supported', 'session_not_journaled'),
              });
            } else {
              void this.#finishReplay(state, token.value, journal);
            }
          } else if (!state.stopped) {
            this.#terminal(state, { type: 'error', ref: state.ref, error: ev.error });
          }
        },
      });
      if (!replay.ok) {
        for (const s of state.sockets) s.close();
        return replay;
      }
      state.sockets.push(replay.value);
      if (replay.value.info) state.replaySessionId = replay.value.info.sessionId;
      else void replay.value.whenInfo().then((i) => (state.replaySessionId = i.sessionId));
      return ok(this.#register(state));
    });
  }

  /** The replay ended with the shim: its exit file holds the real code, or it was killed. */
  async #finishReplay(state: CommandState, token: Private<string>, journal: string): Promise<void> {
    try {
      let r = await this.#execArgv(state.sprite, token, exitReadArgv(journal));
      // A fast read may close without its exit frame (sprites-py#16): read once more.
      if (!r.ok && r.error.code === 'closed_before_exit')
        r = await this.#execArgv(state.sprite, token, exitReadArgv(journal));
      const code =
        r.ok && r.value.exitCode === 0
          ? Number.parseInt(Buffer.from(r.value.output).toString('utf8').trim(), 10)
          : Number.NaN;
      if (Number.isInteger(code) && code >= 0 && code <= 255)
        this.#terminal(state, { type: 'exit', ref: state.ref, code });
      else if (!r.ok && r.error.code !== 'unavailable')
        this.#terminal(state, { type: 'error', ref: state.ref, error: r.error });
      else this.#terminal(state, { type: 'error', ref: state.ref, error: sandboxError('closed_before_exit') });
    } catch {
      this.#terminal(state, { type: 'error', ref: state.ref, error: internal() });
    }
  }

  terminateSession(handle: Handle, sessionId: string, opts: TerminateOptions = {}): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const timeoutMs = opts.timeoutMs ?? 10_000;
      if (!SESSION_ID.test(sessionId) || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 30_000) {
        return err(sandboxError('invalid', 'termination_request'));
      }
      const token = this.#token(handle);
      if (!token.ok) return token;
      const r = await this.#api.killSession(
        token.value,
        handle.name,
        sessionId,
        opts.mode === 'force' ? 'KILL' : 'TERM',
        timeoutMs,
      );
      if (!r.ok) return r;
      if (r.value === 'unconfirmed') return err(sandboxError('unavailable', 'termination_unconfirmed'));
      return ok(undefined);
    });
  }

  /**
   * `allow: []` must deny everything, but an empty Sprites rule list enforces nothing; every
   * policy therefore ends in an explicit `*` deny (and never `include: defaults`, which
   * would re-allow the platform's own list).
   */
  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#total(async () => {
      const token = this.#token(handle);
      if (!token.ok) return token;
      if (!Array.isArray(policy.allow) || policy.allow.some((d) => typeof d !== 'string' || !DOMAIN.test(d))) {
        return err(sandboxError('invalid', 'network_policy'));
      }
      const rules: PolicyRule[] = [
        ...policy.allow.map((domain): PolicyRule => ({ domain: domain.toLowerCase(), action: 'allow' })),
        { domain: '*', action: 'deny' },
      ];
      return this.#api.setNetworkPolicy(token.value, handle.name, rules);
    });
  }

  async publicUrl(_handle: Handle): Promise<SandboxResult<PublicUrl>> {
    // A sprite's URL answers only with the Sprites token (url_settings.auth "sprite").
    return ok({ kind: 'unsupported' });
  }

  async createCheckpoint(_handle: Handle): Promise<SandboxResult<string>> {
    return err(sandboxError('not_supported'));
  }

  async restoreCheckpoint(_handle: Handle, _checkpointId: string): Promise<SandboxResult<void>> {
    return err(sandboxError('not_supported'));
  }
}

const rawOf = (s: Sprite): Record<string, unknown> => {
  const raw: Record<string, unknown> = { name: s.name };
  if (s.id !== undefined) raw.id = s.id;
  if (s.status !== undefined) raw.status = s.status;
  if (s.url !== undefined) raw.url = s.url;
  if (s.created_at !== undefined) raw.created_at = s.created_at;
  if (s.updated_at !== undefined) raw.updated_at = s.updated_at;
  return raw;
};

const toSession = (s: RawSession): Session => ({
  id: String(s.id),
  command: s.command ? displayCommand(s.command) : null,
  createdAt: toDate(s.created) ?? new Date(0),
  lastActivityAt: toDate(s.last_activity),
  tty: s.tty ?? false,
});
