/**
 * The in-memory fake sandbox adapter (provider `fake`, contract §10.3): scripted commands,
 * detachable sessions with replay, and the "Fake newest" capability set. For tests only.
 */
import type { SandboxAdapter } from '../../sandbox/adapter.ts';
import type { Capability } from '../../sandbox/capabilities.ts';
import { fail, sandboxError } from '../../sandbox/errors.ts';
import type { SandboxError, SandboxResult } from '../../sandbox/errors.ts';
import type { Private } from '../../sandbox/private.ts';
import { ok } from '../../sandbox/result.ts';
import type {
  AttachOptions,
  Command,
  CreateOptions,
  ExecOptions,
  ExecResult,
  FrameSink,
  Handle,
  NetworkPolicy,
  PublicUrl,
  SandboxInfo,
  Session,
  SpawnOptions,
  StreamFrame,
  TerminateOptions,
  WriteFileOptions,
} from '../../sandbox/types.ts';
import { foldScript, parseScript, type Instruction } from './script.ts';
import { registry, type FakeSandbox, type FakeSession } from './state.ts';

/** Contract §3, "Fake newest". */
export const FAKE_CAPABILITIES: ReadonlySet<Capability> = new Set<Capability>([
  'suspend',
  'network_policy',
  'attach',
  'public_url',
  'terminate_session',
  'force_terminate_session',
  'create_new',
]);

export interface FakeAdapterOptions {
  /**
   * Simulates a backend that cannot be reached (endpoint down): every operation answers
   * `unavailable(fake_unreachable)` — never `not_found` — except `stopCommand`, which is always ok.
   */
  readonly unreachable?: boolean;
}

const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/;
const TERMINATE_KEYS = new Set(['timeoutMs', 'mode']);
const enc = new TextEncoder();
const CLOSED_BEFORE_EXIT = (): SandboxError => sandboxError('closed_before_exit');

const deliver = (sink: FrameSink, frame: StreamFrame): void => {
  try {
    sink(frame);
  } catch {
    // An owner that throws must not take the fake (or its other subscribers) down.
  }
};

const validName = (name: unknown): name is string =>
  typeof name === 'string' && name.length > 0 && name.length <= 256 && !name.includes('/') && !name.includes('\u0000');

export class FakeAdapter implements SandboxAdapter {
  readonly provider = 'fake' as const;
  readonly #unreachable: boolean;

  constructor(opts: FakeAdapterOptions = {}) {
    this.#unreachable = opts.unreachable ?? false;
  }

  capabilities(): ReadonlySet<Capability> {
    return FAKE_CAPABILITIES;
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'fake', name } : { provider: 'fake', name, private: priv };
  }

  async create(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    if (this.#unreachable) return down();
    if (!validName(name)) return fail('invalid', 'sandbox_name');
    const existing = registry.sandboxes.get(name);
    if (existing) return ok(this.#handleFor(existing));
    registry.sandboxes.set(name, newSandbox(name, undefined));
    return ok(this.buildHandle(name));
  }

  async createNew(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    if (this.#unreachable) return down();
    if (!validName(name)) return fail('invalid', 'sandbox_name');
    // Check and insert happen in one synchronous step: concurrent calls cannot both win.
    if (registry.sandboxes.has(name)) return fail('already_exists');
    const sb = newSandbox(name, `fake-${++registry.nextInstance}`);
    registry.sandboxes.set(name, sb);
    return ok(this.#handleFor(sb));
  }

  async get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    if (this.#unreachable) return down();
    const sb = registry.sandboxes.get(handle.name);
    if (!sb) return fail('not_found');
    const raw = sb.instanceId === undefined ? { name: sb.name } : { name: sb.name, id: sb.instanceId };
    return ok({ status: sb.status, raw });
  }

  async destroy(handle: Handle): Promise<SandboxResult<void>> {
    if (this.#unreachable) return down();
    const sb = registry.sandboxes.get(handle.name);
    if (!sb) return ok(undefined);
    for (const s of sb.sessions.values()) finish(s, { kind: 'exit', code: 137 });
    for (const [ref, s] of registry.refs) if (s.sandbox === sb.name) registry.refs.delete(ref);
    registry.sandboxes.delete(sb.name);
    return ok(undefined);
  }

  async listAllNames(): Promise<SandboxResult<string[]>> {
    if (this.#unreachable) return down();
    return ok([...registry.sandboxes.keys()]);
  }

  async suspend(handle: Handle): Promise<SandboxResult<void>> {
    const sb = this.#find(handle);
    if (!sb.ok) return sb;
    sb.value.status = 'suspended';
    return ok(undefined);
  }

  async resume(handle: Handle): Promise<SandboxResult<Handle>> {
    const sb = this.#find(handle);
    if (!sb.ok) return sb;
    sb.value.status = 'running';
    const fresh = this.#handleFor(sb.value);
    return ok(handle.private === undefined ? fresh : { ...fresh, private: handle.private });
  }

  async writeFile(
    handle: Handle,
    path: string,
    data: Uint8Array,
    opts?: WriteFileOptions,
  ): Promise<SandboxResult<void>> {
    const sb = this.#find(handle);
    if (!sb.ok) return sb;
    if (typeof path !== 'string' || path.length === 0) return fail('invalid', 'path');
    if (!(data instanceof Uint8Array)) return fail('invalid', 'data');
    sb.value.files.set(path, { data: Uint8Array.from(data), mode: opts?.mode });
    return ok(undefined);
  }

  async exec(
    handle: Handle,
    _cmd: string,
    args: readonly string[],
    opts?: ExecOptions,
  ): Promise<SandboxResult<ExecResult>> {
    const sb = this.#find(handle);
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
    const sb = this.#find(handle);
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
    if (this.#unreachable) return down();
    const s = connected(command);
    if (!s) return fail('command_exited');
    if (!(data instanceof Uint8Array)) return fail('invalid', 'data');
    if (s.eof) return fail('write_failed', 'stdin_closed');
    s.stdin.push(Uint8Array.from(data));
    setImmediate(() => pump(s));
    return ok(undefined);
  }

  async closeStdin(command: Command): Promise<SandboxResult<void>> {
    if (this.#unreachable) return down();
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
    const sb = this.#find(handle);
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
    const sb = this.#find(handle);
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
    const sb = this.#find(handle);
    if (!sb.ok) return sb;
    const s = sb.value.sessions.get(sessionId);
    if (!s) return opts.mode === 'force' ? fail('unavailable', 'termination_unconfirmed') : ok(undefined);
    finish(s, { kind: 'exit', code: 137 });
    return ok(undefined);
  }

  async applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    const sb = this.#find(handle);
    if (!sb.ok) return sb;
    if (typeof policy !== 'object' || policy === null || !Array.isArray(policy.allow))
      return fail('invalid', 'network_policy');
    sb.value.policy = policy;
    return ok(undefined);
  }

  async publicUrl(handle: Handle): Promise<SandboxResult<PublicUrl>> {
    const sb = this.#find(handle);
    if (!sb.ok) return sb;
    return ok({ kind: 'url', url: `https://${sb.value.name}.fake.test` });
  }

  async createCheckpoint(_handle: Handle): Promise<SandboxResult<string>> {
    if (this.#unreachable) return down();
    return fail('not_supported');
  }

  async restoreCheckpoint(_handle: Handle, _checkpointId: string): Promise<SandboxResult<void>> {
    if (this.#unreachable) return down();
    return fail('not_supported');
  }

  #find(handle: Handle): SandboxResult<FakeSandbox> {
    if (this.#unreachable) return down();
    const sb = typeof handle?.name === 'string' ? registry.sandboxes.get(handle.name) : undefined;
    return sb ? ok(sb) : fail('not_found');
  }

  #handleFor(sb: FakeSandbox): Handle {
    return sb.instanceId === undefined
      ? this.buildHandle(sb.name)
      : { provider: 'fake', name: sb.name, instanceId: sb.instanceId };
  }

  #subscribe(s: FakeSession, sink: FrameSink, ready: boolean): string {
    const ref = `fake-ref-${++registry.nextRef}`;
    s.subscribers.set(ref, { sink, ready });
    registry.refs.set(ref, s);
    return ref;
  }
}

const down = (): SandboxResult<never> => fail('unavailable', 'fake_unreachable');

const newSandbox = (name: string, instanceId: string | undefined): FakeSandbox => ({
  name,
  status: 'running',
  instanceId,
  files: new Map(),
  policy: undefined,
  sessions: new Map(),
});

/** Alive, and this ref still subscribed (a detached or stopped ref is no longer connected). */
const connected = (command: Command): FakeSession | undefined => {
  const s = typeof command?.ref === 'string' ? registry.refs.get(command.ref) : undefined;
  return s && s.state === 'running' && s.subscribers.has(command.ref) ? s : undefined;
};

const validTermination = (sessionId: unknown, opts: unknown): boolean => {
  if (typeof sessionId !== 'string' || !SESSION_ID.test(sessionId)) return false;
  if (typeof opts !== 'object' || opts === null) return false;
  const o = opts as Record<string, unknown>;
  if (!Object.keys(o).every((k) => TERMINATE_KEYS.has(k))) return false;
  if (
    o.timeoutMs !== undefined &&
    !(Number.isInteger(o.timeoutMs) && (o.timeoutMs as number) >= 1 && (o.timeoutMs as number) <= 30_000)
  )
    return false;
  return o.mode === undefined || o.mode === 'graceful' || o.mode === 'force';
};

const emit = (s: FakeSession, type: 'stdout' | 'stderr', data: Uint8Array): void => {
  if (s.state !== 'running') return;
  s.chunks.push({ type, data });
  s.lastActivityAt = new Date();
  for (const [ref, sub] of s.subscribers) if (sub.ready) deliver(sub.sink, { type, ref, data });
};

/** The single place a session ends, so no subscriber ever sees two terminal frames. */
const finish = (s: FakeSession, end: { kind: 'exit'; code: number } | { kind: 'error'; error: SandboxError }): void => {
  if (s.state !== 'running') return;
  if (end.kind === 'exit') {
    s.state = 'exited';
    s.exitCode = end.code;
  } else {
    s.state = 'errored';
    s.error = end.error;
  }
  s.lastActivityAt = new Date();
  for (const [ref, sub] of s.subscribers) {
    // Subscribers still awaiting their replay get the terminal frame from it.
    if (!sub.ready) continue;
    deliver(
      sub.sink,
      end.kind === 'exit' ? { type: 'exit', ref, code: end.code } : { type: 'error', ref, error: end.error },
    );
    s.subscribers.delete(ref);
  }
};

const run = (s: FakeSession, script: readonly Instruction[]): void => {
  for (const ins of script) {
    if (s.state !== 'running') return;
    switch (ins.kind) {
      case 'out':
        emit(s, 'stdout', enc.encode(ins.data));
        break;
      case 'err':
        emit(s, 'stderr', enc.encode(ins.data));
        break;
      case 'exit':
        finish(s, { kind: 'exit', code: ins.code });
        return;
      case 'drop':
        finish(s, { kind: 'error', error: CLOSED_BEFORE_EXIT() });
        return;
      case 'stay':
        s.reading = true;
        pump(s);
        return;
    }
  }
  finish(s, { kind: 'exit', code: 0 });
};

/** A `stay` process reading its stdin: echo each write, exit 0 at EOF. */
const pump = (s: FakeSession): void => {
  if (!s.reading || s.state !== 'running') return;
  for (let chunk = s.stdin.shift(); chunk; chunk = s.stdin.shift()) {
    const out = new Uint8Array(5 + chunk.byteLength);
    out.set(enc.encode('echo:'));
    out.set(chunk, 5);
    emit(s, 'stdout', out);
  }
  if (s.eof) finish(s, { kind: 'exit', code: 0 });
};
