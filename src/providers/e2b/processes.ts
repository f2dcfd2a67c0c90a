/**
 * E2B processes: exec over one envd Start stream; spawn and attach through the shared journaling
 * shim, whose replayer is every Command's output; envd SendInput/CloseStdin for stdin.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type {
  AttachOptions,
  Command,
  ExecOptions,
  ExecResult,
  Handle,
  SandboxError,
  SandboxResult,
  Session,
  SpawnOptions,
} from '../../sandbox/index.ts';
import { Private, err, fail, ok, sandboxError } from '../../sandbox/index.ts';
import { LiveCommand } from './command.ts';
import type { StartRequest } from './envd.ts';
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
import { type E2BCore, type E2BTarget, StartAck, targets, targetOf } from './core.ts';
import type { SandboxProcesses } from '../../sandbox/index.ts';

export class E2BProcesses implements SandboxProcesses {
  readonly #c: E2BCore;

  constructor(c: E2BCore) {
    this.#c = c;
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#c.guard('exec', async () => {
      if (typeof cmd !== 'string' || cmd === '' || !Array.isArray(args)) return fail('invalid', 'exec: bad command');
      const t = await this.#c.target(handle);
      if (!t.ok) return t;
      const process: StartRequest['process'] = {
        cmd,
        args: [...args],
        envs: Object.fromEntries(opts.env ?? []),
        ...(opts.dir ? { cwd: opts.dir } : {}),
      };
      // 0 is "no limit" for envd; it is sent explicitly rather than left to a default.
      return this.#c.run(this.#c.envd(t.value), process, opts.timeoutMs ?? 0, opts.stderrToStdout ?? false);
    });
  }

  #heartbeat(sandboxId: string): () => void {
    const everyMs = Math.max(250, Math.floor((this.#c.o.sandboxTimeoutS * 1000) / 3));
    const timer = setInterval(() => {
      // A live turn must not be parked by the sandbox's own expiry.
      void this.#c.api.setTimeout(sandboxId, this.#c.o.sandboxTimeoutS).then((r) => {
        if (!r.ok) this.#c.o.logger?.warn({ sandboxId, code: r.error.code }, 'e2b: keep-alive failed');
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
        this.#c.o.spawnAckTimeoutMs,
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
    const envd = this.#c.envd(t);
    let stopBeat: () => void = () => undefined;
    const live: LiveCommand = new LiveCommand({
      ref: randomUUID(),
      owner: init.owner,
      stdinTag: init.stdinTag,
      onDone: () => {
        stopBeat();
        this.#c.live.delete(live);
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
      this.#c.live.add(live);
      stopBeat = this.#heartbeat(t.sandboxId);
    }
    live.release();
    return ok({ provider: this.#c.provider, ref: live.ref, private: new Private(live) });
  }

  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>> {
    return this.#c.guard('spawn', async () => {
      if (typeof cmd !== 'string' || cmd === '' || !Array.isArray(args)) return fail('invalid', 'spawn: bad command');
      if (!opts || typeof opts.owner !== 'function') return fail('invalid', 'spawn: owner required');
      // `tty` is not advertised: envd's PTY mode merges the streams and needs 0x04 for EOF.
      if (opts.tty) return fail('not_supported', 'tty');
      const t = await this.#c.target(handle);
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
      const stream = this.#c.envd(t.value).start(req, 0, shim);
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
    return this.#c.guard('write_stdin', async () => {
      const live = this.#liveOf(command);
      if (!live) return fail('command_exited', 'write_stdin: unknown command');
      if (!live.stdinTag) return fail('invalid', 'write_stdin: stdin was not requested');
      if (!live.live) return fail('command_exited');
      const t = targetOf(live);
      const r = await this.#c.envd(t).sendInput({ tag: live.stdinTag }, data);
      if (r.ok) return ok(undefined);
      // After exit envd no longer knows the tag.
      if (r.error.code === 'not_found') return fail('command_exited');
      return fail('write_failed', r.error.detail ?? r.error.code);
    });
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#c.guard('close_stdin', async () => {
      const live = this.#liveOf(command);
      if (!live) return fail('command_exited', 'close_stdin: unknown command');
      if (!live.stdinTag) return fail('invalid', 'close_stdin: stdin was not requested');
      if (!live.live) return fail('command_exited');
      const r = await this.#c.envd(targetOf(live)).closeStdin({ tag: live.stdinTag });
      if (r.ok) return ok(undefined);
      if (r.error.code === 'not_found') return fail('command_exited');
      return err(r.error);
    });
  }

  stopCommand(command: Command): Promise<SandboxResult<void>> {
    return this.#c.guard('stop_command', async () => {
      await this.#liveOf(command)?.stop();
      return ok(undefined);
    });
  }

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#c.guard('list_sessions', async () => {
      const t = await this.#c.target(handle);
      if (!t.ok) return t;
      const r = await this.#c.envd(t.value).list();
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
    return this.#c.guard('attach', async () => {
      if (!opts || typeof opts.owner !== 'function') return fail('invalid', 'attach: owner required');
      if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId))
        return fail('not_found', 'attach: no such session');
      const t = await this.#c.target(handle);
      if (!t.ok) return t;
      const envd = this.#c.envd(t.value);
      const has = await envd.exists(`~/${JOURNAL_ROOT}/${sessionId}/pid`);
      if (!has.ok) return has;
      if (!has.value) return fail('not_found', 'attach: no such session');
      // envd's Connect replays nothing and drops output nobody listened to: replay the journal instead.
      return this.#follow(t.value, sessionId, { owner: opts.owner, stdinTag: opts.stdin ? sessionId : null });
    });
  }
}
