/**
 * The microVM backend (`--backend firecracker`, docs/runners/microvm.md): a sandbox is a VM with a
 * private disk; requests wake it and are forwarded over the guest link to `fountain runner-guest`.
 *
 * Over 400 lines because the backend answers every wire operation in one class; it has not been
 * split by operation group yet.
 */
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';
import type { RequestOf } from '../../../wire/index.ts';
import type { Backend, OpContext, OpResult, SessionInfo, WireError } from '../../backend.ts';
import { badSandboxName } from '../process/paths.ts';
import { ensureDisk, readVmFile, takenAddresses, writeVmFile } from './disk.ts';
import type { VmFile } from './disk.ts';
import type { RunningVm, VmSpec, VmmDriver } from './driver.ts';
import { GuestLink } from './guest-link.ts';
import type { CallReply, GuestRequest } from './guest-link.ts';
import { allocateAddress, deleteTap, ensureTap, ipKernelArg, macFor, tapName } from './network.ts';
import type { IpCommand, Subnet } from './network.ts';
import { logTail } from './vmm-process.ts';

/** How long a VMM that did not answer its state may take to be seen exiting before it counts as unavailable. */
const STATE_EXIT_GRACE_MS = 1000;

const exitsWithin = (vm: RunningVm, ms: number): Promise<boolean> => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    vm.exited.then(() => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms))),
  ]).finally(() => clearTimeout(timer));
};

/** The one sandbox inside every guest. */
export const GUEST_SANDBOX = 'sprite';

export interface VmTimings {
  /** How long a booted VM has for its agent to answer a ping. Default 60 s. */
  readonly bootTimeoutMs: number;
  readonly pingTimeoutMs: number;
  readonly pingRetryMs: number;
  readonly stateTimeoutMs: number;
  readonly pauseTimeoutMs: number;
  readonly syncTimeoutMs: number;
  readonly stopGraceMs: number;
  readonly callTimeoutMs: number;
}

export const DEFAULT_VM_TIMINGS: VmTimings = {
  bootTimeoutMs: 60_000,
  pingTimeoutMs: 5_000,
  pingRetryMs: 250,
  stateTimeoutMs: 15_000,
  pauseTimeoutMs: 15_000,
  syncTimeoutMs: 10_000,
  stopGraceMs: 5_000,
  callTimeoutMs: 30_000,
};

export interface VmBackendOptions {
  readonly root: string;
  readonly logger: Logger;
  readonly driver: VmmDriver;
  readonly kernel: string;
  readonly rootfs: string;
  readonly initrd?: string;
  readonly vcpus: number;
  readonly memoryMib: number;
  /** Null: the VM gets no network device (QEMU only; the Firecracker flags require a bridge). */
  readonly bridge: string | null;
  readonly subnet: Subnet;
  readonly ip?: IpCommand;
  readonly timings?: Partial<VmTimings>;
}

interface Vm {
  readonly handle: RunningVm;
  readonly link: GuestLink;
}

/** How much of the guest console a refused boot quotes. */
const CONSOLE_TAIL_LINES = 15;

const fail = (code: WireError['code'], detail: string) => err({ code, detail });
const unavailable = (detail: string) => fail('unavailable', detail);
const done = <T extends object>(result: T, followUp?: () => void) => ok(followUp ? { result, followUp } : { result });
const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class VmBackend implements Backend {
  readonly #o: VmBackendOptions;
  readonly #t: VmTimings;
  readonly #log: Logger;
  readonly #ip: IpCommand;
  readonly #vms = new Map<string, Vm>();
  /** session id → sandbox, for ops that carry only a session; kept across link drops. */
  readonly #owners = new Map<string, string>();
  readonly #locks = new Map<string, Promise<unknown>>();
  /** Address allocation reads every vm.json, so two boots must not pick at once. */
  #allocating: Promise<unknown> = Promise.resolve();

  constructor(opts: VmBackendOptions) {
    this.#o = opts;
    this.#t = { ...DEFAULT_VM_TIMINGS, ...opts.timings };
    this.#log = opts.logger;
    this.#ip = opts.ip ?? { argv: ['ip'] };
  }

  async create(req: RequestOf<'create'>): Promise<OpResult<Record<string, never>>> {
    const dir = this.#dir(req.name);
    if (!dir.ok) return dir;
    try {
      await mkdir(dir.value, { recursive: true, mode: 0o700 });
    } catch (e) {
      return fail('provider', `create: ${message(e)}`);
    }
    const vm = await this.#ensureRunning(req.name);
    return vm.ok ? done({}) : vm;
  }

  async get(req: RequestOf<'get'>): Promise<OpResult<{ status: 'running' | 'suspended'; path: string }>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const vm = this.#vms.get(req.name);
    // A sandbox without a live VM is parked, never gone: its disk is its memory.
    if (!vm?.handle.alive) return done({ status: 'suspended', path: dir.value });
    const state = await vm.handle.state(Math.min(this.#t.stateTimeoutMs, 5000));
    if (!state.ok) {
      // A VMM killed a moment ago refuses its API before its exit is seen: a crash parks the sandbox.
      if (await exitsWithin(vm.handle, STATE_EXIT_GRACE_MS)) return done({ status: 'suspended', path: dir.value });
      return unavailable(`the VMM did not report its state: ${state.error}`);
    }
    return done({ status: state.value === 'running' ? 'running' : 'suspended', path: dir.value });
  }

  async destroy(req: RequestOf<'destroy'>): Promise<OpResult<Record<string, never>>> {
    const dir = this.#dir(req.name);
    if (!dir.ok) return dir;
    return this.#locked(req.name, async () => {
      const vm = this.#vms.get(req.name);
      this.#vms.delete(req.name);
      for (const [sid, owner] of this.#owners) if (owner === req.name) this.#owners.delete(sid);
      if (vm) await this.#stopVm(req.name, vm);
      if (this.#o.bridge) {
        const file = await readVmFile(dir.value);
        const tap = file.ok && file.value ? file.value.tap : tapName(req.name);
        const del = await deleteTap(this.#ip, tap);
        if (!del.ok) this.#log.warn({ sandbox: req.name, err: del.error }, 'runner: could not remove a tap');
      }
      try {
        await rm(dir.value, { recursive: true, force: true });
        return done({});
      } catch (e) {
        return fail('provider', `destroy: ${message(e)}`);
      }
    });
  }

  async list(_req: RequestOf<'list'>): Promise<OpResult<{ names: string[] }>> {
    try {
      const entries = await readdir(this.#o.root, { withFileTypes: true });
      return done({
        names: entries
          .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
          .map((e) => e.name)
          .sort(),
      });
    } catch (e) {
      return unavailable(`list: ${message(e)}`);
    }
  }

  async suspend(req: RequestOf<'suspend'>): Promise<OpResult<Record<string, never>>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    return this.#locked(req.name, async () => {
      const vm = this.#vms.get(req.name);
      if (!vm?.handle.alive) return done({});
      // Only the vCPUs stop: guest processes keep their state and the RAM stays resident.
      const r = await vm.handle.pause(this.#t.pauseTimeoutMs);
      return r.ok ? done({}) : unavailable(`pause: ${r.error}`);
    });
  }

  async resume(req: RequestOf<'resume'>): Promise<OpResult<Record<string, never>>> {
    const dir = await this.#existing(req.name);
    if (!dir.ok) return dir;
    const vm = await this.#ensureRunning(req.name);
    return vm.ok ? done({}) : vm;
  }

  async writeFile(req: RequestOf<'write_file'>): Promise<OpResult<Record<string, never>>> {
    const r = await this.#forward(req.name, { ...req, name: GUEST_SANDBOX }, this.#t.callTimeoutMs);
    return r.ok ? done({}) : r;
  }

  async exec(req: RequestOf<'exec'>): Promise<OpResult<{ output: string; code: number }>> {
    const timeout = req.timeout_ms ? req.timeout_ms + 10_000 : null;
    const r = await this.#forward(req.name, { ...req, name: GUEST_SANDBOX }, timeout);
    if (!r.ok) return r;
    const { output, code } = r.value.reply.result;
    if (typeof output !== 'string' || typeof code !== 'number')
      return fail('provider', 'malformed exec reply from the guest');
    return done({ output, code });
  }

  async spawn(
    req: RequestOf<'spawn'>,
    ctx: OpContext,
  ): Promise<OpResult<{ session_id: string; replay_from?: number }>> {
    const r = await this.#forward(req.name, { ...req, name: GUEST_SANDBOX }, this.#t.callTimeoutMs);
    return r.ok ? this.#gated(req.name, r.value, ctx) : r;
  }

  async attach(
    req: RequestOf<'attach'>,
    ctx: OpContext,
  ): Promise<OpResult<{ session_id: string; replay_from?: number }>> {
    const r = await this.#forward(req.name, { ...req, name: GUEST_SANDBOX }, this.#t.callTimeoutMs);
    return r.ok ? this.#gated(req.name, r.value, ctx) : r;
  }

  async stdin(req: RequestOf<'stdin'>): Promise<OpResult<Record<string, never>>> {
    const name = this.#owner(req.name, req.session_id);
    if (!name.ok) return name;
    const r = await this.#forward(name.value, { ...req, name: GUEST_SANDBOX }, this.#t.callTimeoutMs);
    return r.ok ? done({}) : r;
  }

  async stdinClose(req: RequestOf<'stdin_close'>): Promise<OpResult<Record<string, never>>> {
    const name = this.#owner(req.name, req.session_id);
    if (!name.ok) return name;
    const r = await this.#forward(name.value, { ...req, name: GUEST_SANDBOX }, this.#t.callTimeoutMs);
    return r.ok ? done({}) : r;
  }

  async detach(req: RequestOf<'detach'>): Promise<OpResult<Record<string, never>>> {
    const name = this.#owner(req.name, req.session_id);
    if (!name.ok) return name.error.code === 'not_found' ? done({}) : name;
    const vm = this.#vms.get(name.value);
    vm?.link.detach(req.session_id);
    // Nothing listens to a VM that is not running; waking it only to say so would cost a boot.
    if (!vm?.handle.alive) return done({});
    const r = await this.#forward(name.value, { ...req, name: GUEST_SANDBOX }, this.#t.callTimeoutMs);
    return r.ok || r.error.code === 'not_found' ? done({}) : r;
  }

  async listSessions(req: RequestOf<'list_sessions'>): Promise<OpResult<{ sessions: SessionInfo[] }>> {
    const r = await this.#forward(req.name, { ...req, name: GUEST_SANDBOX }, this.#t.callTimeoutMs);
    if (!r.ok) return r;
    const sessions = r.value.reply.result.sessions;
    if (!Array.isArray(sessions)) return fail('provider', 'malformed list_sessions reply from the guest');
    for (const s of sessions as Array<{ id?: unknown }>) if (typeof s.id === 'string') this.#owners.set(s.id, req.name);
    return done({ sessions: sessions as SessionInfo[] });
  }

  async stopAll(): Promise<void> {
    const vms = [...this.#vms.entries()];
    this.#vms.clear();
    // Sync first, so the guest's page cache reaches the disk that is the agent's memory.
    await Promise.all(vms.map(([name, vm]) => this.#stopVm(name, vm)));
  }

  /** The live VMM's process id for a sandbox, if any (for operators and tests). */
  vmmPid(name: string): number | undefined {
    const vm = this.#vms.get(name);
    return vm?.handle.alive ? vm.handle.pid : undefined;
  }

  #gated(
    name: string,
    value: { vm: Vm; reply: CallReply },
    ctx: OpContext,
  ): OpResult<{ session_id: string; replay_from?: number }> {
    const { vm, reply } = value;
    const sid = reply.result.session_id;
    const from = reply.result.replay_from;
    if (typeof sid !== 'string' || !reply.gate)
      return fail('provider', 'malformed reply from the guest: no session_id');
    this.#owners.set(sid, name);
    const gate = reply.gate;
    const result = { session_id: sid, ...(typeof from === 'number' && from > 0 ? { replay_from: from } : {}) };
    // Runs after our reply is written: only then may the guest's frames for this session pass.
    return done(result, () => vm.link.release(gate, ctx.out, ctx.requestId));
  }

  async #forward(
    name: string,
    req: GuestRequest,
    timeoutMs: number | null,
  ): Promise<Result<{ vm: Vm; reply: CallReply }, WireError>> {
    const vm = await this.#ensureRunning(name);
    if (!vm.ok) return vm;
    const reply = await vm.value.link.call(req, { timeoutMs });
    return reply.ok ? ok({ vm: vm.value, reply: reply.value }) : reply;
  }

  #owner(name: string | undefined, sessionId: string): Result<string, WireError> {
    if (name !== undefined) {
      const bad = badSandboxName(name);
      return bad ? fail('invalid', bad) : ok(name);
    }
    const owner = this.#owners.get(sessionId);
    return owner === undefined ? fail('not_found', `no session ${sessionId}`) : ok(owner);
  }

  /** Wake on request: boot a VM that is down, resume a paused one, under the sandbox's boot lock. */
  async #ensureRunning(name: string): Promise<Result<Vm, WireError>> {
    const dir = await this.#existing(name);
    if (!dir.ok) return dir;
    return this.#locked(name, async () => {
      const vm = this.#vms.get(name);
      if (vm?.handle.alive) {
        const state = await vm.handle.state(this.#t.stateTimeoutMs);
        if (!state.ok) return unavailable(`the VMM did not report its state: ${state.error}`);
        if (state.value === 'paused') {
          const r = await vm.handle.resume(this.#t.pauseTimeoutMs);
          if (!r.ok) return unavailable(`resume: ${r.error}`);
        }
        return ok(vm);
      }
      if (vm) {
        vm.link.close('the microVM is gone');
        this.#vms.delete(name);
      }
      return this.#boot(name, dir.value);
    });
  }

  async #boot(name: string, dir: string): Promise<Result<Vm, WireError>> {
    const disk = await ensureDisk(dir, this.#o.rootfs);
    if (!disk.ok) return unavailable(disk.error);
    let net: VmSpec['net'] = null;
    if (this.#o.bridge) {
      const file = await this.#vmFile(name, dir);
      if (!file.ok) return unavailable(file.error);
      const tap = await ensureTap(this.#ip, file.value.tap, this.#o.bridge);
      if (!tap.ok) return unavailable(`tap ${file.value.tap}: ${tap.error}`);
      net = { tap: file.value.tap, mac: file.value.mac, kernelArg: ipKernelArg(this.#o.subnet, file.value.ip) };
    }
    const spec: VmSpec = {
      dir,
      kernel: this.#o.kernel,
      ...(this.#o.initrd ? { initrd: this.#o.initrd } : {}),
      disk: disk.value,
      vcpus: this.#o.vcpus,
      memoryMib: this.#o.memoryMib,
      net,
    };
    this.#log.info({ sandbox: name, vmm: this.#o.driver.kind }, 'runner: booting a microVM');
    const booted = await this.#o.driver.boot(spec);
    if (!booted.ok) return unavailable(booted.error);
    const handle = booted.value;
    const link = new GuestLink({
      dial: (ms) => handle.dial(ms),
      logger: this.#log.child({ sandbox: name }),
    });
    const answered = await this.#waitForAgent(link);
    if (!answered.ok) {
      link.close();
      await handle.stop(this.#t.stopGraceMs);
      // The guest's init copies the agent's output to the console: its end usually says why.
      const tail = await logTail(handle.consoleLog, CONSOLE_TAIL_LINES);
      this.#log.warn({ sandbox: name, console: handle.consoleLog, tail }, 'runner: the microVM agent never answered');
      return unavailable(
        `${answered.error}; the guest console is in ${handle.consoleLog}${tail ? `, and ends:\n${tail.slice(-2000)}` : ''}`,
      );
    }
    const vm: Vm = { handle, link };
    this.#vms.set(name, vm);
    void handle.exited.then(() => this.#log.info({ sandbox: name }, 'runner: the microVM exited'));
    this.#log.info({ sandbox: name }, 'runner: microVM ready');
    return ok(vm);
  }

  async #waitForAgent(link: GuestLink): Promise<Result<void, string>> {
    const deadline = Date.now() + this.#t.bootTimeoutMs;
    let last = 'no answer';
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const ping = await link.call(
        { op: 'ping' },
        {
          timeoutMs: Math.min(this.#t.pingTimeoutMs, left),
          probe: true,
          dialTimeoutMs: Math.min(this.#t.pingTimeoutMs, left),
        },
      );
      if (ping.ok) return ok(undefined);
      last = ping.error.detail;
      await new Promise((r) => setTimeout(r, this.#t.pingRetryMs));
    }
    return err(
      `the microVM booted but its agent never answered within ${Math.round(this.#t.bootTimeoutMs / 1000)} s (${last}); ` +
        'the base rootfs must start `fountain runner-guest` at boot',
    );
  }

  /** vm.json: made once, so a restart rebuilds the same VM at the same address. */
  async #vmFile(name: string, dir: string): Promise<Result<VmFile, string>> {
    const existing = await readVmFile(dir);
    if (!existing.ok) return existing;
    if (existing.value) return ok(existing.value);
    const run = this.#allocating.then(async (): Promise<Result<VmFile, string>> => {
      const address = allocateAddress(this.#o.subnet, await takenAddresses(this.#o.root));
      if (!address.ok) return address;
      const file: VmFile = { tap: tapName(name), ip: address.value, mac: macFor(address.value) };
      const written = await writeVmFile(dir, file);
      return written.ok ? ok(file) : written;
    });
    this.#allocating = run.catch(() => undefined);
    return run;
  }

  async #stopVm(name: string, vm: Vm): Promise<void> {
    if (vm.handle.alive) {
      const state = await vm.handle.state(2000);
      if (state.ok && state.value === 'paused') await vm.handle.resume(2000);
      const synced = await vm.link.call(
        { op: 'exec', name: GUEST_SANDBOX, cmd: 'sync', args: [], env: [] },
        { timeoutMs: this.#t.syncTimeoutMs, probe: true },
      );
      if (!synced.ok)
        this.#log.warn({ sandbox: name, err: synced.error.detail }, 'runner: guest sync failed before stop');
    }
    vm.link.close('the microVM was stopped');
    await vm.handle.stop(this.#t.stopGraceMs);
  }

  #locked<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(name) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.#locks.set(name, tail);
    void tail.then(() => {
      if (this.#locks.get(name) === tail) this.#locks.delete(name);
    });
    return run;
  }

  #dir(name: string): Result<string, WireError> {
    const bad = badSandboxName(name);
    return bad ? fail('invalid', bad) : ok(join(this.#o.root, name));
  }

  async #existing(name: string): Promise<Result<string, WireError>> {
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
