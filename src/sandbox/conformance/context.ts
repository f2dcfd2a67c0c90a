/**
 * The state one suite run shares between its tests: the wrapped adapter, minted names,
 * handles and commands to clean up, and small helpers every group uses.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { capabilitiesOf, type SandboxAdapter } from '../adapter.ts';
import type { Capability } from '../capabilities.ts';
import type { SandboxError, SandboxResult } from '../errors.ts';
import type { Command, Handle, SpawnOptions } from '../types.ts';
import { FrameCollector } from './frames.ts';
import type { CommandFixture, ConformanceOptions } from './options.ts';
import { Recorder } from './recorder.ts';

/** Generous: only a hang guard, never a measurement. */
export const DEFAULT_TIMEOUT_MS = 5000;

let counter = 0;
const defaultName = (): string => `conformance-${process.pid}${String(++counter).padStart(4, '0')}`;

export class SuiteContext {
  readonly recorder = new Recorder();
  readonly timeoutMs: number;
  readonly #handles = new Map<string, Handle>();
  readonly #commands: Command[] = [];
  #adapter: SandboxAdapter | undefined;
  #shared: Promise<Handle> | undefined;
  /** Set by the secret test so the run-wide check can look for it. */
  secretValue: string | undefined;

  constructor(readonly opts: ConformanceOptions) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** The adapter under test, wrapped by the recorder (built lazily: opts.adapter may need `before`). */
  get adapter(): SandboxAdapter {
    this.#adapter ??= this.recorder.wrap(this.opts.adapter());
    return this.#adapter;
  }

  caps(handle?: Handle): ReadonlySet<Capability> {
    return capabilitiesOf(this.adapter, handle);
  }

  name(): string {
    return (this.opts.name ?? defaultName)();
  }

  /** `created_handle()` of the upstream suite: create(name) must succeed; destroyed at the end. */
  async created(): Promise<Handle> {
    const name = this.name();
    const handle = unwrap(await this.adapter.lifecycle.create(name), `create(${name})`);
    this.track(handle);
    return handle;
  }

  /** Somewhere to run: the run's one sandbox with `shareSandbox`, else `created()`. */
  sandbox(): Promise<Handle> {
    if (!this.opts.shareSandbox) return this.created();
    this.#shared ??= this.created().catch((e: unknown) => {
      this.#shared = undefined;
      throw e;
    });
    return this.#shared;
  }

  track(handle: Handle): void {
    this.#handles.set(handle.name, handle);
  }

  trackCommand(command: Command): void {
    this.#commands.push(command);
  }

  /** Spawns a fixture with the suite's spawn options and a fresh collector as owner. */
  async spawn(
    handle: Handle,
    fx: CommandFixture,
    extra: Partial<Omit<SpawnOptions, 'owner'>> = {},
  ): Promise<{ command: Command; frames: FrameCollector }> {
    const frames = new FrameCollector();
    const res = await this.adapter.processes.spawn(handle, fx.cmd, fx.args, {
      ...this.opts.spawnOpts,
      ...extra,
      owner: frames.sink,
    });
    const command = unwrap(res, `spawn(${fx.cmd} ${fx.args.join(' ')})`);
    assert.equal(typeof command.ref, 'string', 'Command.ref is a string');
    this.trackCommand(command);
    return { command, frames };
  }

  /** Best-effort teardown: stop every command, destroy every handle; results are ignored. */
  async cleanup(): Promise<void> {
    if (!this.#adapter) return;
    for (const c of this.#commands.splice(0)) {
      await this.#adapter.processes.closeStdin(c).catch(() => undefined);
      await this.#adapter.processes.stopCommand(c).catch(() => undefined);
    }
    for (const h of [...this.#handles.values()]) {
      await this.#adapter.lifecycle.destroy(h).catch(() => undefined);
      this.#handles.delete(h.name);
    }
  }
}

export const unwrap = <T>(res: SandboxResult<T>, what: string): T => {
  assert.ok(isResult(res), `${what} must resolve to a Result, got ${inspect(res)}`);
  if (!res.ok) assert.fail(`${what} failed: ${inspect(res.error)}`);
  return res.value;
};

export const expectErr = (res: SandboxResult<unknown>, what: string): SandboxError => {
  assert.ok(isResult(res), `${what} must resolve to a Result, got ${inspect(res)}`);
  if (res.ok) assert.fail(`${what} must fail, got ok ${inspect(res.value)}`);
  return res.error;
};

export const expectCode = (res: SandboxResult<unknown>, code: SandboxError['code'], what: string): SandboxError => {
  const e = expectErr(res, what);
  assert.equal(e.code, code, `${what}: expected ${code}, got ${inspect(e)}`);
  return e;
};

export const isResult = (v: unknown): v is SandboxResult<unknown> =>
  typeof v === 'object' && v !== null && typeof (v as { ok?: unknown }).ok === 'boolean';

export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
export const text = (b: Uint8Array): string => new TextDecoder().decode(b);
