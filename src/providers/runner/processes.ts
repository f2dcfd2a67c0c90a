/**
 * The runner's processes: exec, spawn and attach as daemon requests; frames arrive on the
 * connection and are handed to the owner by a per-command listener.
 */
import { randomUUID } from 'node:crypto';
import type {
  AttachOptions,
  Command,
  ExecOptions,
  ExecResult,
  FrameSink,
  Handle,
  SandboxResult,
  Session,
  SpawnOptions,
  StreamFrame,
  WriteStdinOptions,
} from '../../sandbox/index.ts';
import { Private, err, fail, ok, sandboxError } from '../../sandbox/index.ts';
import { encodeBase64, resultSchemas } from '../../wire/index.ts';
import { RUNNER_OFFLINE, malformed } from './errors.ts';
import type { OutgoingRequest, SessionListener } from './host.ts';
import { type RunnerCore, EXEC_GRACE_MS, type RunnerCommandPrivate, lenientBytes, type LiveCommand } from './core.ts';
import type { SandboxProcesses } from '../../sandbox/index.ts';

/** Bytes of stdin per frame: their base64 stays far below the frame limit. */
const STDIN_CHUNK_BYTES = 8 * 1024 * 1024;

export class RunnerProcesses implements SandboxProcesses {
  readonly #c: RunnerCore;

  constructor(c: RunnerCore) {
    this.#c = c;
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#c.total('exec', async () => {
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
      const r = await this.#c.call(handle.name, req, { timeoutMs });
      if (!r.ok) return r;
      const parsed = resultSchemas.exec.safeParse(r.value);
      if (!parsed.success) return err(malformed('exec_reply', r.value));
      return ok({ output: lenientBytes(parsed.data.output), exitCode: parsed.data.code });
    });
  }

  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>> {
    return this.#c.total('spawn', async () => {
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

  writeStdin(command: Command, data: Uint8Array, opts: WriteStdinOptions = {}): Promise<SandboxResult<void>> {
    return this.#c.total('write_stdin', async () => {
      const target = this.#c.target(command);
      if (!target.ok) return target;
      const { runnerId, name, sessionId } = target.value;
      const conn = this.#c.host.whereis(runnerId);
      if (!conn) return fail('write_failed', RUNNER_OFFLINE);
      // A frame holds at most MAX_FRAME_BYTES: a larger write (a prompt's images) goes in pieces, in order.
      // Each piece has an id of its own, so a repeated write skips exactly the pieces the daemon already took.
      for (let at = 0, n = 0; at === 0 || at < data.length; at += STDIN_CHUNK_BYTES, n++) {
        const piece = data.subarray(at, at + STDIN_CHUNK_BYTES);
        const r = await conn.call({
          op: 'stdin',
          name,
          session_id: sessionId,
          data: encodeBase64(piece),
          ...(opts.writeId === undefined ? {} : { write_id: `${opts.writeId}.${n}` }),
        });
        if (r.ok) continue;
        if (r.error.code === 'not_found') return fail('command_exited');
        if (r.error.code === 'unavailable') return fail('write_failed', r.error.detail);
        return r;
      }
      return ok(undefined);
    });
  }

  repeatsStdinOnce(command: Command): boolean {
    const target = this.#c.target(command);
    return target.ok && target.value.stdinOnce === true;
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#c.total('close_stdin', async () => {
      const target = this.#c.target(command);
      if (!target.ok) return target;
      const { runnerId, name, sessionId } = target.value;
      const conn = this.#c.host.whereis(runnerId);
      if (!conn) return fail('unavailable', RUNNER_OFFLINE);
      const r = await conn.call({ op: 'stdin_close', name, session_id: sessionId });
      return r.ok || r.error.code === 'not_found' || r.error.code === 'command_exited' ? ok(undefined) : r;
    });
  }

  async stopCommand(command: Command): Promise<SandboxResult<void>> {
    try {
      const live = this.#c.live.get(command.ref);
      if (live) {
        this.#c.live.delete(command.ref);
        live.ended = true;
        if (live.sessionId !== undefined) live.conn.unsubscribe(live.sessionId, live.listener);
      }
    } catch (e) {
      this.#c.log?.warn({ err: e instanceof Error ? e.message : String(e) }, 'runner stop_command failed locally');
    }
    return ok(undefined);
  }

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#c.total('list_sessions', async () => {
      const r = await this.#c.call(handle.name, { op: 'list_sessions', name: handle.name });
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
    return this.#c.total('attach', async () => {
      const req: OutgoingRequest = {
        op: 'attach',
        name: handle.name,
        session_id: sessionId,
        ...(opts.stdin === undefined ? {} : { stdin: opts.stdin }),
      };
      return this.#subscribe(handle.name, req, 'attach', opts.owner);
    });
  }

  /** Spawn and attach: the listener rides along with the call so no frame after the reply is missed. */
  async #subscribe(
    name: string,
    req: OutgoingRequest,
    what: 'spawn' | 'attach',
    owner: FrameSink,
  ): Promise<SandboxResult<Command>> {
    const route = this.#c.route(name);
    if (!route.ok) return route;
    const { conn, runnerId } = route.value;
    const ref = `${what}-${randomUUID()}`;
    const live: LiveCommand = {
      conn,
      listener: this.#listener(ref, owner, () => this.#c.live.delete(ref)),
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
    if (!live.ended) this.#c.live.set(ref, live);
    // The daemon that holds the session says it once, when it connects; it is the one a reattach finds again.
    const stdinOnce = conn.info.capabilities?.includes('stdin_write_id') === true;
    const priv = new Private<RunnerCommandPrivate>({ runnerId, name, sessionId, stdinOnce });
    return ok(
      replayFrom ? { provider: 'runner', ref, private: priv, replayFrom } : { provider: 'runner', ref, private: priv },
    );
  }

  /** Turns connection callbacks into owner frames, guaranteeing exactly one terminal frame. */
  #listener(ref: string, owner: FrameSink, onEnd: () => void): SessionListener {
    let done = false;
    const report = (e: unknown): void => {
      this.#c.log?.warn({ err: e instanceof Error ? e.message : String(e), ref }, 'command owner failed on a frame');
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
}
