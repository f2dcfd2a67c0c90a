/**
 * Sprites processes: exec and spawn over the exec WebSocket, the journaling shim for replay from
 * byte zero, attach through the journal, and session termination with a confirmed end.
 */

import {
  Private,
  err,
  ok,
  sandboxError,
  type AttachOptions,
  type Command,
  type ExecOptions,
  type ExecResult,
  type Handle,
  type SandboxResult,
  type Session,
  type SpawnOptions,
  type TerminateOptions,
} from '../../sandbox/index.ts';
import { ExecSocket, type ExecEvent, type SessionInfo } from './exec-socket.ts';

import {
  NO_JOURNAL_EXIT,
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
import { type SpritesCore, type CommandState, sleep, SESSION_ID, internal, toSession } from './core.ts';
import type { SandboxProcesses } from '../../sandbox/index.ts';

export class SpritesProcesses implements SandboxProcesses {
  readonly forceTerminate = true;
  readonly #c: SpritesCore;

  constructor(c: SpritesCore) {
    this.#c = c;
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
    return this.#c.api.wsUrl(`v1/sprites/${encodeURIComponent(sprite)}/exec`, q);
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
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
      ackTimeoutMs: this.#c.cfg.ackTimeoutMs,
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
      if (id) void this.#c.api.killSession(token, sprite, id, 'KILL', 5000).catch(() => undefined);
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
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      if (opts.tty) return err(sandboxError('not_supported', 'tty'));
      if (opts.dir !== undefined && (opts.dir === '' || opts.dir.includes('\0')))
        return err(sandboxError('invalid', 'dir'));
      const argv = withEnv(cmd, args, undefined);
      if (!argv.ok) return argv;
      const header = envLine(opts.env);
      if (!header.ok) return header;
      const stdin = opts.stdin ?? true;
      const state = this.#c.newState(handle.name, token.value, opts.owner);
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
        ackTimeoutMs: this.#c.cfg.ackTimeoutMs,
        onEvent: (ev) => this.#c.onEvent(state, ev),
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
      return ok(this.#c.register(state));
    });
  }

  async #acknowledged(
    token: Private<string>,
    sprite: string,
    key: string,
    sock: ExecSocket,
  ): Promise<SandboxResult<string>> {
    const deadline = Date.now() + this.#c.cfg.ackTimeoutMs;
    let info: SessionInfo | null = sock.info;
    const arrived = sock.whenInfo().then((i) => (info = i));
    while (!info) {
      const listed = await this.#c.api.listSessions(token, sprite);
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

  writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const state = this.#c.commands.get(command.ref);
      if (!state || state.done || state.stopped) return err(sandboxError('command_exited'));
      if (!state.stdinSocket) return err(sandboxError('invalid', 'stdin_not_enabled'));
      return state.stdinSocket.writeStdin(data);
    });
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const state = this.#c.commands.get(command.ref);
      if (!state || state.done || state.stopped) return err(sandboxError('command_exited'));
      if (!state.stdinSocket) return err(sandboxError('invalid', 'stdin_not_enabled'));
      return state.stdinSocket.closeStdin();
    });
  }

  stopCommand(command: Command): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const state = this.#c.commands.get(command.ref);
      if (state) this.#c.stop(state);
      return ok(undefined);
    });
  }

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      const r = await this.#c.api.listSessions(token.value, handle.name);
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
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      if (!SESSION_ID.test(sessionId)) return err(sandboxError('not_found'));
      const sessions = await this.#c.api.listSessions(token.value, handle.name);
      if (!sessions.ok) return sessions;
      const session = sessions.value.find((s) => String(s.id) === sessionId);
      if (!session || isReplayer(session.command)) return err(sandboxError('not_found'));
      const journal = journalRef(sessionId, session.command);
      if (!journal) return err(sandboxError('not_supported', 'session_not_journaled'));
      const state = this.#c.newState(handle.name, token.value, opts.owner);
      state.sessionId = sessionId;

      if (opts.stdin) {
        const open = (url: URL) =>
          ExecSocket.open({
            url,
            token: token.value,
            tty: false,
            ackTimeoutMs: this.#c.cfg.ackTimeoutMs,
            // Its output is the partial scrollback and then the live stream, which the journal
            // replayer already delivers: only its stdin matters.
            onEvent: () => undefined,
          });
        const sprite = encodeURIComponent(handle.name);
        let native = await open(this.#c.api.wsUrl(`v1/sprites/${sprite}/exec/${encodeURIComponent(sessionId)}`, []));
        // Sprites older than 0.0.1-rc30 know only `?id=` and answer the path form with 404.
        if (!native.ok && native.error.code === 'not_found')
          native = await open(this.#c.api.wsUrl(`v1/sprites/${sprite}/exec`, [['id', sessionId]]));
        if (!native.ok) return native;
        state.sockets.push(native.value);
        state.stdinSocket = native.value;
      }

      let delivered = false;
      const replay = await ExecSocket.open({
        url: this.#execUrl(handle.name, replayArgv(journal), { stdin: false }),
        token: token.value,
        tty: false,
        ackTimeoutMs: this.#c.cfg.ackTimeoutMs,
        onEvent: (ev) => {
          if (state.done) return;
          if (ev.type === 'stdout' || ev.type === 'stderr') {
            delivered = true;
            this.#c.deliver(state, { type: ev.type, ref: state.ref, data: ev.data });
          } else if (ev.type === 'exit') {
            if (ev.code === NO_JOURNAL_EXIT && !delivered) {
              this.#c.terminal(state, {
                type: 'error',
                ref: state.ref,
                error: sandboxError('not_supported', 'session_not_journaled'),
              });
            } else {
              void this.#finishReplay(state, token.value, journal);
            }
          } else if (!state.stopped) {
            this.#c.terminal(state, { type: 'error', ref: state.ref, error: ev.error });
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
      return ok(this.#c.register(state));
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
        this.#c.terminal(state, { type: 'exit', ref: state.ref, code });
      else if (!r.ok && r.error.code !== 'unavailable')
        this.#c.terminal(state, { type: 'error', ref: state.ref, error: r.error });
      else this.#c.terminal(state, { type: 'error', ref: state.ref, error: sandboxError('closed_before_exit') });
    } catch {
      this.#c.terminal(state, { type: 'error', ref: state.ref, error: internal() });
    }
  }

  terminateSession(handle: Handle, sessionId: string, opts: TerminateOptions = {}): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const timeoutMs = opts.timeoutMs ?? 10_000;
      if (!SESSION_ID.test(sessionId) || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 30_000) {
        return err(sandboxError('invalid', 'termination_request'));
      }
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      const r = await this.#c.api.killSession(
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
}
