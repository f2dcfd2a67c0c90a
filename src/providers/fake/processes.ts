/**
 * The fake's processes: scripted commands, detachable sessions with replay from byte zero,
 * graceful and forced termination.
 */

import { fail } from '../../sandbox/errors.ts';
import type { SandboxResult } from '../../sandbox/errors.ts';
import { ok } from '../../sandbox/result.ts';
import type {
  AttachOptions,
  Command,
  ExecOptions,
  ExecResult,
  FrameSink,
  Handle,
  Session,
  SpawnOptions,
  TerminateOptions,
} from '../../sandbox/types.ts';
import { foldScript, parseScript } from './script.ts';
import { registry, type FakeSession } from './state.ts';
import {
  type FakeCore,
  enc,
  CLOSED_BEFORE_EXIT,
  deliver,
  down,
  connected,
  validTermination,
  finish,
  run,
  pump,
} from './core.ts';
import type { SandboxProcesses } from '../../sandbox/index.ts';

export class FakeProcesses implements SandboxProcesses {
  readonly forceTerminate = true;
  readonly #c: FakeCore;

  constructor(c: FakeCore) {
    this.#c = c;
  }

  async exec(
    handle: Handle,
    _cmd: string,
    args: readonly string[],
    opts?: ExecOptions,
  ): Promise<SandboxResult<ExecResult>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) return fail('invalid', 'args');
    const folded = foldScript(args, opts?.stderrToStdout ?? false);
    if (folded.kind === 'drop') return { ok: false, error: CLOSED_BEFORE_EXIT() };
    return ok({ output: enc.encode(folded.output), exitCode: folded.code });
  }

  async spawn(
    handle: Handle,
    cmd: string,
    args: readonly string[],
    opts: SpawnOptions,
  ): Promise<SandboxResult<Command>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    if (typeof opts?.owner !== 'function') return fail('invalid', 'owner');
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) return fail('invalid', 'args');
    if (opts.tty) return fail('not_supported', 'tty');
    const session: FakeSession = {
      id: `fake-sess-${++registry.nextSession}`,
      sandbox: sb.value.name,
      command: [String(cmd), ...args].join(' '),
      createdAt: new Date(),
      lastActivityAt: null,
      chunks: [],
      state: 'running',
      reading: false,
      stdin: [],
      eof: false,
      subscribers: new Map(),
    };
    sb.value.sessions.set(session.id, session);
    const ref = this.#subscribe(session, opts.owner, true);
    const script = parseScript(args);
    // The session exists (acknowledged) before spawn returns; the script runs after, as a process would.
    setImmediate(() => run(session, script));
    return ok({ provider: 'fake', ref });
  }

  async writeStdin(command: Command, data: Uint8Array): Promise<SandboxResult<void>> {
    if (this.#c.unreachable) return down();
    const s = connected(command);
    if (!s) return fail('command_exited');
    if (!(data instanceof Uint8Array)) return fail('invalid', 'data');
    if (s.eof) return fail('write_failed', 'stdin_closed');
    s.stdin.push(Uint8Array.from(data));
    setImmediate(() => pump(s));
    return ok(undefined);
  }

  async closeStdin(command: Command): Promise<SandboxResult<void>> {
    if (this.#c.unreachable) return down();
    const s = connected(command);
    if (!s) return fail('command_exited');
    s.eof = true;
    setImmediate(() => pump(s));
    return ok(undefined);
  }

  async stopCommand(command: Command): Promise<SandboxResult<void>> {
    // Local end only: the session keeps running for a later attach (0.3.0 behaviour).
    registry.refs.get(command?.ref)?.subscribers.delete(command.ref);
    return ok(undefined);
  }

  async listSessions(handle: Handle): Promise<SandboxResult<Session[]>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    const sessions = [...sb.value.sessions.values()].reverse().map((s): Session => {
      const base = {
        id: s.id,
        command: s.command,
        createdAt: s.createdAt,
        lastActivityAt: s.lastActivityAt,
        tty: false,
      };
      return s.state === 'exited' && s.exitCode !== undefined ? { ...base, exitCode: s.exitCode } : base;
    });
    return ok(sessions);
  }

  async attach(handle: Handle, sessionId: string, opts: AttachOptions): Promise<SandboxResult<Command>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    const s = sb.value.sessions.get(sessionId);
    if (!s) return fail('not_found');
    if (typeof opts?.owner !== 'function') return fail('invalid', 'owner');
    const ref = this.#subscribe(s, opts.owner, false);
    const owner = opts.owner;
    setImmediate(() => {
      const sub = s.subscribers.get(ref);
      if (!sub) return; // stopped before the replay began
      for (const c of s.chunks) deliver(owner, { type: c.type, ref, data: c.data });
      if (s.state === 'exited') deliver(owner, { type: 'exit', ref, code: s.exitCode ?? 0 });
      else if (s.state === 'errored') deliver(owner, { type: 'error', ref, error: s.error ?? CLOSED_BEFORE_EXIT() });
      if (s.state === 'running') sub.ready = true;
      else s.subscribers.delete(ref);
    });
    return ok({ provider: 'fake', ref });
  }

  async terminateSession(handle: Handle, sessionId: string, opts: TerminateOptions = {}): Promise<SandboxResult<void>> {
    if (!validTermination(sessionId, opts)) return fail('invalid', 'termination_request');
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    const s = sb.value.sessions.get(sessionId);
    if (!s) return opts.mode === 'force' ? fail('unavailable', 'termination_unconfirmed') : ok(undefined);
    finish(s, { kind: 'exit', code: 137 });
    return ok(undefined);
  }

  #subscribe(s: FakeSession, sink: FrameSink, ready: boolean): string {
    const ref = `fake-ref-${++registry.nextRef}`;
    s.subscribers.set(ref, { sink, ready });
    registry.refs.set(ref, s);
    return ref;
  }
}
