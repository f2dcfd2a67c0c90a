/**
 * Daytona processes: toolbox sessions running the shared journaling shim; output is polled from
 * the journal (replay from byte zero), stdin appended to a file the shim tails.
 */
import { randomBytes } from 'node:crypto';
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
  TerminateOptions,
} from '../../sandbox/index.ts';
import { Private, fail, ok } from '../../sandbox/index.ts';
import type { Toolbox } from './client.ts';
import {
  SHIM_GONE,
  STDIN_CLOSED,
  STDIN_EXITED,
  appendStdinScript,
  closeStdinScript,
  commandArgv,
  execScript,
  hasNul,
  shimAliveScript,
  shellNames,
  spawnCommand,
  visibleCommand,
} from './shell.ts';
import { JournalPoller, readExitSentinel } from './stream.ts';
import {
  type DaytonaCore,
  type CommandPrivate,
  type LiveCommand,
  SESSION_PREFIX,
  SESSION_ID,
  STDIN_CHUNK,
  EXEC_NO_TIMEOUT_SEC,
  sleep,
  sessionCreatedAt,
} from './core.ts';
import type { SandboxProcesses } from '../../sandbox/index.ts';

export class DaytonaProcesses implements SandboxProcesses {
  readonly #c: DaytonaCore;

  constructor(c: DaytonaCore) {
    this.#c = c;
  }

  exec(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: ExecOptions = {},
  ): Promise<SandboxResult<ExecResult>> {
    return this.#c.guard('exec', async () => {
      if (hasNul([cmd, ...args, ...(opts.env ?? []).flat()])) return fail('invalid', 'exec: NUL byte in the command');
      const loc = await this.#c.locate(handle);
      if (!loc.ok) return loc;
      const script = execScript(commandArgv(cmd, args, opts.env), opts.dir, opts.stderrToStdout === true);
      const timeoutSec =
        opts.timeoutMs !== undefined ? Math.max(1, Math.ceil(opts.timeoutMs / 1000)) : EXEC_NO_TIMEOUT_SEC;
      const r = await this.#c.retryOnStaleProxy(handle, loc.value, (l) =>
        this.#c.shell(l, script, timeoutSec, opts.timeoutMs !== undefined),
      );
      if (!r.ok) return r;
      return ok({ output: new Uint8Array(Buffer.from(r.value.output, 'utf8')), exitCode: r.value.exitCode });
    });
  }

  spawn(handle: Handle, cmd: string, args: readonly string[], opts: SpawnOptions): Promise<SandboxResult<Command>> {
    return this.#c.guard('spawn', async () => {
      if (opts.tty) return fail('not_supported', 'tty');
      if (hasNul([cmd, ...args, ...(opts.env ?? []).flat()])) return fail('invalid', 'spawn: NUL byte in the command');
      if (!shellNames(opts.env)) return fail('invalid', 'spawn: an env name that is not a shell variable name');
      const loc = await this.#c.locate(handle);
      if (!loc.ok) return loc;
      const l = loc.value;
      const sessionId = `${SESSION_PREFIX}${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
      const stateDir = `${l.home}/.fountain/sessions/${sessionId}`;
      const stdin = opts.stdin !== false;
      const created = await l.toolbox.createSession(sessionId);
      if (!created.ok) return this.#c.afterToolboxFailure(handle, created);
      // One session per process: commands in one session run one after another in one shell.
      const line = spawnCommand(stateDir, opts.dir, stdin, [cmd, ...args], opts.env);
      const ex = await l.toolbox.sessionExecAsync(sessionId, line);
      if (!ex.ok) {
        await l.toolbox.deleteSession(sessionId, this.#c.cfg.requestTimeoutMs);
        return ex;
      }
      const cmdId = ex.value.cmdId;
      // 202 only means the line reached the session shell; the shim's `started` file is the ack.
      const ack = await this.#awaitStart(l.toolbox, sessionId, cmdId, stateDir);
      if (!ack.ok) {
        await l.toolbox.deleteSession(sessionId, this.#c.cfg.requestTimeoutMs);
        return ack;
      }
      return ok(this.#follow(handle.name, { sandboxName: handle.name, sessionId, cmdId, stateDir }, opts.owner, stdin));
    });
  }

  writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>> {
    return this.#c.guard('write_stdin', async () => {
      const live = this.#c.commands.get(command.ref);
      if (!live || live.exited || live.poller.ended) return fail('command_exited');
      if (!live.stdin) return fail('write_failed', 'stdin_not_requested');
      if (data.length === 0) return ok(undefined);
      const run = live.chain.then(() => this.#appendStdin(live, data));
      live.chain = run.catch(() => undefined);
      return run;
    });
  }

  closeStdin(command: Command): Promise<SandboxResult<void>> {
    return this.#c.guard('close_stdin', async () => {
      const live = this.#c.commands.get(command.ref);
      if (!live || live.exited || live.poller.ended) return fail('command_exited');
      if (!live.stdin) return ok(undefined);
      const run = live.chain.then(async (): Promise<SandboxResult<void>> => {
        const loc = await this.#c.locateByName(live.priv.sandboxName);
        if (!loc.ok) return loc;
        const r = await this.#c.shell(loc.value, closeStdinScript(live.priv.stateDir), 60);
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
    return this.#c.guard('stop_command', async () => {
      const live = this.#c.commands.get(command.ref);
      if (live) {
        live.poller.stop();
        this.#c.commands.delete(command.ref);
      }
      return ok(undefined);
    });
  }

  listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    return this.#c.guard('list_sessions', async () => {
      const loc = await this.#c.locate(handle);
      if (!loc.ok) return loc;
      const r = await this.#c.retryOnStaleProxy(handle, loc.value, (l) => l.toolbox.listSessions());
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
    return this.#c.guard('attach', async () => {
      if (!SESSION_ID.test(sessionId)) return fail('not_found');
      const loc = await this.#c.locate(handle);
      if (!loc.ok) return loc;
      const s = await this.#c.retryOnStaleProxy(handle, loc.value, (l) => l.toolbox.getSession(sessionId));
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
    return this.#c.guard('terminate_session', async () => {
      if (!SESSION_ID.test(sessionId)) return fail('invalid', 'termination_request');
      const timeoutMs = opts.timeoutMs ?? 10_000;
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 30_000)
        return fail('invalid', 'termination_request');
      const loc = await this.#c.locate(handle);
      if (!loc.ok) return loc;
      // DELETE sends SIGTERM then SIGKILL to the session's group and removes its journal.
      const r = await this.#c.retryOnStaleProxy(handle, loc.value, (l) =>
        l.toolbox.deleteSession(sessionId, timeoutMs + 5000),
      );
      return r.ok ? ok(undefined) : r;
    });
  }

  async #appendStdin(live: LiveCommand, data: Uint8Array): Promise<SandboxResult<void>> {
    if (live.exited || live.poller.ended) return fail('command_exited');
    const loc = await this.#c.locateByName(live.priv.sandboxName);
    if (!loc.ok) return loc.error.code === 'not_found' ? fail('command_exited') : loc;
    for (let i = 0; i < data.length; i += STDIN_CHUNK) {
      const r = await this.#c.shell(
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
    const deadline = Date.now() + this.#c.cfg.spawnAckTimeoutMs;
    const step = Math.min(this.#c.cfg.pollIntervalMs, 250);
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
          const l = await this.#c.locateByName(sandboxName);
          return l.ok ? ok(l.value.toolbox) : l;
        },
        invalidate: () => this.#c.forget(sandboxName),
        shimAlive: async () => {
          const l = await this.#c.locateByName(sandboxName);
          if (!l.ok) return l;
          const r = await this.#c.shell(l.value, shimAliveScript(priv.stateDir), 30);
          return r.ok ? ok(r.value.exitCode !== SHIM_GONE) : r;
        },
        sessionId: priv.sessionId,
        cmdId: priv.cmdId,
        stateDir: priv.stateDir,
        intervalMs: this.#c.cfg.pollIntervalMs,
        maxFailures: this.#c.cfg.maxPollFailures,
        onEnd: () => {
          live.exited = true;
        },
      }),
    };
    this.#c.commands.set(ref, live);
    live.poller.start();
    return { provider: 'daytona', ref, private: new Private(priv) };
  }
}
