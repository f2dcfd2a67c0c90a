/**
 * The fake's lifecycle: sandboxes in a process-wide registry, create_new with instance ids.
 */

import { fail } from '../../sandbox/errors.ts';
import type { SandboxResult } from '../../sandbox/errors.ts';
import { ok } from '../../sandbox/result.ts';
import type { CreateOptions, Handle, SandboxInfo } from '../../sandbox/types.ts';
import { registry } from './state.ts';
import { type FakeCore, validName, down, newSandbox, finish } from './core.ts';
import type { SandboxLifecycle } from '../../sandbox/index.ts';

export class FakeLifecycle implements SandboxLifecycle {
  readonly #c: FakeCore;

  constructor(c: FakeCore) {
    this.#c = c;
  }

  async create(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    if (this.#c.unreachable) return down();
    if (!validName(name)) return fail('invalid', 'sandbox_name');
    const existing = registry.sandboxes.get(name);
    if (existing) return ok(this.#c.handleFor(existing));
    registry.sandboxes.set(name, newSandbox(name, undefined));
    return ok(this.#c.buildHandle(name));
  }

  async createNew(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    if (this.#c.unreachable) return down();
    if (!validName(name)) return fail('invalid', 'sandbox_name');
    // Check and insert happen in one synchronous step: concurrent calls cannot both win.
    if (registry.sandboxes.has(name)) return fail('already_exists');
    const sb = newSandbox(name, `fake-${++registry.nextInstance}`);
    registry.sandboxes.set(name, sb);
    return ok(this.#c.handleFor(sb));
  }

  async get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    if (this.#c.unreachable) return down();
    const sb = registry.sandboxes.get(handle.name);
    if (!sb) return fail('not_found');
    const raw = sb.instanceId === undefined ? { name: sb.name } : { name: sb.name, id: sb.instanceId };
    return ok({ status: sb.status, raw });
  }

  async destroy(handle: Handle): Promise<SandboxResult<void>> {
    if (this.#c.unreachable) return down();
    const sb = registry.sandboxes.get(handle.name);
    if (!sb) return ok(undefined);
    for (const s of sb.sessions.values()) finish(s, { kind: 'exit', code: 137 });
    for (const [ref, s] of registry.refs) if (s.sandbox === sb.name) registry.refs.delete(ref);
    registry.sandboxes.delete(sb.name);
    return ok(undefined);
  }

  async listAllNames(): Promise<SandboxResult<string[]>> {
    if (this.#c.unreachable) return down();
    return ok([...registry.sandboxes.keys()]);
  }

  async suspend(handle: Handle): Promise<SandboxResult<void>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    sb.value.status = 'suspended';
    return ok(undefined);
  }

  async resume(handle: Handle): Promise<SandboxResult<Handle>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    sb.value.status = 'running';
    const fresh = this.#c.handleFor(sb.value);
    return ok(handle.private === undefined ? fresh : { ...fresh, private: handle.private });
  }
}
