/**
 * The process backend ("trusted mode", docs/runners.md): a sandbox is a directory under the
 * root, commands run as the daemon's user in their own process groups, session journals live on disk.
 *
 * Over 400 lines because the backend answers every wire operation in one class; it has not been
 * split by operation group yet.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { chmod, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import { isAbsolute, join } from 'node:path';
import type { Logger } from 'pino';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';
import { decodeBase64, encodeBase64 } from '../../../wire/index.ts';
import type { RequestOf, WireErrorCode } from '../../../wire/index.ts';
import type { Backend, OpContext, OpResult, SessionInfo } from '../../backend.ts';
import { DirectoryConfinement } from './confinement.ts';
import type { Confinement } from './confinement.ts';
import { runExec } from './exec.ts';
import { stopGroup } from './groups.ts';
import { Journal, defaultSegmentBytes } from './journal.ts';
import { badSandboxName } from './paths.ts';
import { writeBeneath } from './write-beneath.ts';
import { Session } from './session.ts';

export const SUSPENDED_MARKER = '.fountain-suspended';
/** Journals live beside the sandboxes; `list` skips dot-directories and names may not start with a dot. */
export const JOURNALS_DIR = '.fountain-journals';
export const DEFAULT_JOURNAL_CAP = 256 * 1024 * 1024;

export interface ProcessBackendOptions {
  /** Absolute directory holding one directory per sandbox. */
  readonly root: string;
  readonly logger: Logger;
  /** Output bytes each session journal keeps; older bytes are dropped and replays say so. */
  readonly journalCapBytes?: number;
  readonly journalSegmentBytes?: number;
  /** Finished sessions kept per sandbox; the oldest are pruned at each spawn. */
  readonly maxFinishedSessions?: number;
  /** Grace between SIGTERM and SIGKILL: destroy and suspend 5 s, shutdown 3 s. */
  readonly graceMs?: { readonly destroy?: number; readonly suspend?: number; readonly stopAll?: number };
  /** The daemon environment children inherit; default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly realHome?: string;
  /** The npm cache sandboxes install through (adapters, packages); default `<realHome>/.npm`. */
  readonly npmCache?: string | undefined;
  /**
   * Where sandboxes share one install of each agent adapter version; default `<realHome>/.fountain/runtimes`,
   * null for none. The process backend confines nothing, so a sandbox could already write another's files.
   */
  readonly runtimeStore?: string | null | undefined;
  /** How commands are confined; default none (trusted mode). The namespace backend supplies its own. */
  readonly confinement?: Confinement;
}

const fail = (code: WireErrorCode, detail: string) => err({ code, detail });
const done = <T extends object>(result: T, followUp?: () => void) => ok(followUp ? { result, followUp } : { result });
const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** Creates the root (mode 0700) and clears journals left by an earlier daemon, whose sessions died with it. */
export function openProcessBackend(opts: ProcessBackendOptions): Result<ProcessBackend, string> {
  const made = prepareRoot(opts.root);
  return made.ok ? ok(new ProcessBackend(opts)) : made;
}

/** The root every directory backend uses: absolute, a directory, mode 0700, no stale journals. */
export function prepareRoot(root: string): Result<void, string> {
  if (!isAbsolute(root)) return err(`root must be an absolute path: ${root}`);
  try {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    if (!statSync(root).isDirectory()) return err(`root is not a directory: ${root}`);
    rmSync(join(root, JOURNALS_DIR), { recursive: true, force: true });
  } catch (e) {
    return err(`cannot use root ${root}: ${message(e)}`);
  }
  return ok(undefined);
}

const BASE_CAPABILITIES = ['suspend', 'attach', 'stdin_write_id'] as const;

export class ProcessBackend implements Backend {
  readonly #root: string;
  readonly #log: Logger;
  readonly #cap: number;
  readonly #segment: number;
  readonly #maxFinished: number;
  readonly #grace: { destroy: number; suspend: number; stopAll: number };
  readonly #confinement: Confinement;
  readonly #sessions = new Map<string, Session>();
  /** Leaders of running execs, so a shutdown reaches them too. */
  readonly #execs = new Map<number, { ended: Promise<void>; end: () => void }>();
  #seq = 0;
  /**
   * Session ids must not repeat across processes: a daemon restarted within the same second, or two
   * microVM guests (each its own process backend, their sessions listed by one daemon), would
   * otherwise mint the same `s-<seconds>-<n>` and reuse a journal or misroute frames.
   */
  readonly #instance = randomBytes(4).toString('hex');

  constructor(opts: ProcessBackendOptions) {
    this.#root = opts.root;
    this.#log = opts.logger;
    this.#cap = opts.journalCapBytes ?? DEFAULT_JOURNAL_CAP;
    this.#segment = opts.journalSegmentBytes ?? defaultSegmentBytes(this.#cap);
    this.#maxFinished = opts.maxFinishedSessions ?? 100;
    this.#grace = { destroy: 5000, suspend: 5000, stopAll: 3000, ...opts.graceMs };
    const realHome = opts.realHome ?? safeRealHome();
    this.#confinement =
      opts.confinement ??
      new DirectoryConfinement({
        root: opts.root,
        env: opts.env ?? process.env,
        realHome,
        npmCache: opts.npmCache,
        runtimeStore:
          opts.runtimeStore === null ? undefined : (opts.runtimeStore ?? join(realHome, '.fountain', 'runtimes')),
      });
  }

  get root(): string {
    return this.#root;
  }

  capabilities(): readonly string[] {
    return [...BASE_CAPABILITIES, ...this.#confinement.extraCapabilities];
  }

  async applyNetworkPolicy(req: RequestOf<'apply_network_policy'>): Promise<OpResult<Record<string, never>>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const apply = this.#confinement.applyNetworkPolicy;
    if (!apply) return fail('not_supported', 'network_policy');
    const r = await apply.call(this.#confinement, req.name, req.allow);
    return r.ok ? done({}) : r;
  }

  async create(req: RequestOf<'create'>): Promise<OpResult<Record<string, never>>> {
    const dir = this.#dir(req.name);
    if (!dir.ok) return dir;
    try {
      await mkdir(dir.value, { recursive: true, mode: 0o700 });
    } catch (e) {
      return fail('provider', `create: ${message(e)}`);
    }
    const prepared = await this.#confinement.prepare(req.name, dir.value);
    return prepared.ok ? done({}) : prepared;
  }

  async get(req: RequestOf<'get'>): Promise<OpResult<{ status: 'running' | 'suspended'; path: string }>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const suspended = existsSync(join(dir.value, SUSPENDED_MARKER));
    return done({ status: suspended ? 'suspended' : 'running', path: this.#confinement.insidePath ?? dir.value });
  }

  async destroy(req: RequestOf<'destroy'>): Promise<OpResult<Record<string, never>>> {
    const dir = this.#dir(req.name);
    if (!dir.ok) return dir;
    // Frozen processes cannot act on a SIGTERM; a destroy wakes them to end them.
    await this.#confinement.thaw?.(req.name);
    await this.#stopSessions(req.name, this.#grace.destroy);
    for (const s of this.#of(req.name)) this.#forget(s);
    await this.#confinement.release(req.name);
    try {
      await rm(join(this.#root, JOURNALS_DIR, req.name), { recursive: true, force: true });
      await rm(dir.value, { recursive: true, force: true });
      return done({});
    } catch (e) {
      return fail('provider', `destroy: ${message(e)}`);
    }
  }

  async list(_req: RequestOf<'list'>): Promise<OpResult<{ names: string[] }>> {
    try {
      const entries = await readdir(this.#root, { withFileTypes: true });
      const names = entries.filter((e) => e.isDirectory() && !e.name.startsWith('.')).map((e) => e.name);
      return done({ names: names.sort() });
    } catch (e) {
      return fail('unavailable', `list: ${message(e)}`);
    }
  }

  async suspend(req: RequestOf<'suspend'>): Promise<OpResult<Record<string, never>>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    if (this.#confinement.freeze) {
      const frozen = await this.#confinement.freeze(req.name);
      if (!frozen.ok) return frozen;
    } else {
      await this.#stopSessions(req.name, this.#grace.suspend);
    }
    // The marker sits in a directory the sandbox writes: whatever it planted there is removed, never written through.
    try {
      await rm(join(dir.value, SUSPENDED_MARKER), { force: true, recursive: true });
    } catch (e) {
      return fail('write_failed', `suspend: ${message(e)}`);
    }
    const marked = await writeBeneath(
      { base: dir.value, components: [SUSPENDED_MARKER] },
      SUSPENDED_MARKER,
      new Uint8Array(),
      { mode: 0o600, dirMode: 0o700 },
    );
    return marked.ok ? done({}) : fail('write_failed', `suspend: ${marked.error.detail}`);
  }

  async resume(req: RequestOf<'resume'>): Promise<OpResult<Record<string, never>>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const thawed = (await this.#confinement.thaw?.(req.name)) ?? ok(undefined);
    if (!thawed.ok) return thawed;
    try {
      await rm(join(dir.value, SUSPENDED_MARKER), { force: true });
      return done({});
    } catch (e) {
      return fail('write_failed', `resume: ${message(e)}`);
    }
  }

  async writeFile(req: RequestOf<'write_file'>): Promise<OpResult<Record<string, never>>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const data = decodeBase64(req.data);
    if (data === null) return fail('invalid', 'data is not base64');
    const target = this.#confinement.writablePath(req.name, dir.value, req.path);
    if (target === null) return fail('invalid', `path leaves the sandbox: ${req.path}`);
    const written = await writeBeneath(target, req.path, data, { mode: req.mode ?? 0o644, dirMode: 0o755 });
    return written.ok ? done({}) : written;
  }

  async exec(req: RequestOf<'exec'>): Promise<OpResult<{ output: string; code: number }>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const ready = await this.#ready(req.name, dir.value);
    if (!ready.ok) return ready;
    const outcome = await runExec({
      ...this.#confinement.launch(req.name, dir.value, req),
      timeoutMs: req.timeout_ms ?? null,
      stderrToStdout: req.stderr_to_stdout ?? false,
      onStart: (pid) => {
        let end!: () => void;
        const ended = new Promise<void>((r) => (end = r));
        this.#execs.set(pid, { ended, end });
      },
      onEnd: (pid) => {
        this.#execs.get(pid)?.end();
        this.#execs.delete(pid);
      },
    });
    return done({ output: encodeBase64(outcome.output), code: outcome.code });
  }

  async spawn(
    req: RequestOf<'spawn'>,
    ctx: OpContext,
  ): Promise<OpResult<{ session_id: string; replay_from?: number }>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const ready = await this.#ready(req.name, dir.value);
    if (!ready.ok) return ready;
    this.#pruneFinished(req.name);
    const id = `s-${Math.floor(Date.now() / 1000)}-${this.#instance}-${++this.#seq}`;
    let journal: Journal;
    try {
      journal = new Journal(join(this.#root, JOURNALS_DIR, req.name, id), {
        capBytes: this.#cap,
        segmentBytes: this.#segment,
      });
    } catch (e) {
      return fail('unavailable', `journal: ${message(e)}`);
    }
    const session = new Session(id, req.name, [req.cmd, ...req.args].join(' '), journal, this.#log);
    this.#sessions.set(id, session);

    const launch = this.#confinement.launch(req.name, dir.value, req);
    let child: ChildProcess | null = null;
    try {
      child = spawn(launch.file, [...launch.args], {
        cwd: launch.cwd,
        env: launch.env,
        detached: true,
        stdio: [req.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      });
    } catch (e) {
      session.failStart(message(e));
    }
    if (child !== null) {
      const c = child;
      // Acknowledged only once the process runs (or surely failed), so a stdin write right after the reply reaches it.
      const startError = await new Promise<Error | null>((resolve) => {
        c.once('spawn', () => resolve(null));
        c.once('error', (e) => resolve(e));
      });
      if (startError !== null && c.pid === undefined) {
        c.stdout?.destroy();
        c.stderr?.destroy();
        c.stdin?.destroy();
        session.failStart(startError.message);
      } else {
        session.adopt(c);
      }
    }
    const result = { session_id: id, ...(journal.droppedBytes > 0 ? { replay_from: journal.droppedBytes } : {}) };
    return done(result, () => session.beginReplay(ctx.out, ctx.requestId));
  }

  async stdin(req: RequestOf<'stdin'>): Promise<OpResult<Record<string, never>>> {
    const session = this.#session(req.session_id, req.name);
    if (!session) return fail('not_found', `no session ${req.session_id}`);
    const data = decodeBase64(req.data);
    if (data === null) return fail('invalid', 'data is not base64');
    if (!session.live) return fail('command_exited', `session ${session.id} exited with ${session.exitCode}`);
    if (!session.hasStdin) return fail('write_failed', 'command was spawned without stdin');
    const e = await (req.write_id === undefined
      ? session.writeStdin(data)
      : session.writeStdinOnce(req.write_id, data));
    if (e === null) return done({});
    return session.live ? fail('write_failed', e.message) : fail('command_exited', `session ${session.id} exited`);
  }

  async stdinClose(req: RequestOf<'stdin_close'>): Promise<OpResult<Record<string, never>>> {
    const session = this.#session(req.session_id, req.name);
    if (!session) return fail('not_found', `no session ${req.session_id}`);
    session.closeStdin();
    return done({});
  }

  async detach(req: RequestOf<'detach'>): Promise<OpResult<Record<string, never>>> {
    this.#sessions.get(req.session_id)?.detach();
    return done({});
  }

  async listSessions(req: RequestOf<'list_sessions'>): Promise<OpResult<{ sessions: SessionInfo[] }>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    return done({
      sessions: this.#of(req.name)
        .reverse()
        .map((s) => s.info()),
    });
  }

  async attach(
    req: RequestOf<'attach'>,
    ctx: OpContext,
  ): Promise<OpResult<{ session_id: string; replay_from?: number }>> {
    const bad = badSandboxName(req.name);
    if (bad) return fail('invalid', bad);
    const session = this.#session(req.session_id, req.name);
    if (!session) return fail('not_found', `no session ${req.session_id}`);
    const dropped = session.journal.droppedBytes;
    const result = { session_id: session.id, ...(dropped > 0 ? { replay_from: dropped } : {}) };
    return done(result, () => session.beginReplay(ctx.out, ctx.requestId));
  }

  liveSessions(): number {
    let n = 0;
    for (const s of this.#sessions.values()) if (s.live) n++;
    return n;
  }

  async stopAll(): Promise<void> {
    const g = this.#grace.stopAll;
    for (const name of new Set([...this.#sessions.values()].map((s) => s.sandbox)))
      await this.#confinement.thaw?.(name);
    await Promise.all([
      ...[...this.#sessions.values()].filter((s) => s.live).map((s) => s.stop(g)),
      ...[...this.#execs.entries()].map(([pid, e]) => stopGroup(pid, e.ended, g)),
    ]);
    for (const s of this.#sessions.values()) s.journal.seal();
    this.#sessions.clear();
    rmSync(join(this.#root, JOURNALS_DIR), { recursive: true, force: true });
    await this.#confinement.close();
  }

  /** Before a command runs: the confinement is set up, and a parked sandbox wakes (a frozen group would hang it). */
  async #ready(name: string, dir: string): Promise<Result<void, { code: WireErrorCode; detail: string }>> {
    const prepared = await this.#confinement.prepare(name, dir);
    if (!prepared.ok) return prepared;
    if (this.#confinement.thaw) {
      const thawed = await this.#confinement.thaw(name);
      if (!thawed.ok) return thawed;
      await rm(join(dir, SUSPENDED_MARKER), { force: true });
    }
    return ok(undefined);
  }

  /** Sessions of one sandbox, oldest first. */
  #of(name: string): Session[] {
    return [...this.#sessions.values()].filter((s) => s.sandbox === name);
  }

  #session(id: string, name: string | undefined): Session | undefined {
    const s = this.#sessions.get(id);
    return s && (name === undefined || s.sandbox === name) ? s : undefined;
  }

  #forget(s: Session): void {
    this.#sessions.delete(s.id);
    try {
      s.journal.remove();
    } catch (e) {
      this.#log.warn({ session: s.id, err: e }, 'runner: could not remove a journal');
    }
  }

  #pruneFinished(name: string): void {
    const finished = this.#of(name).filter((s) => !s.live);
    for (const s of finished.slice(0, Math.max(0, finished.length - this.#maxFinished))) this.#forget(s);
  }

  async #stopSessions(name: string, graceMs: number): Promise<void> {
    await Promise.all(
      this.#of(name)
        .filter((s) => s.live)
        .map((s) => s.stop(graceMs)),
    );
  }

  #dir(name: string): Result<string, { code: WireErrorCode; detail: string }> {
    const bad = badSandboxName(name);
    return bad ? fail('invalid', bad) : ok(join(this.#root, name));
  }

  async #existing(name: string): Promise<Result<string, { code: WireErrorCode; detail: string }>> {
    const dir = this.#dir(name);
    if (!dir.ok) return dir;
    try {
      if ((await stat(dir.value)).isDirectory()) return dir;
    } catch {
      // absent
    }
    return fail('not_found', `no sandbox ${name}`);
  }
}

/** The daemon user's home: $HOME when set (a user who moved it means it), else the passwd entry's. */
function safeRealHome(): string {
  const home = process.env.HOME?.trim();
  if (home) return home;
  try {
    return userInfo().homedir;
  } catch {
    return homedir();
  }
}
