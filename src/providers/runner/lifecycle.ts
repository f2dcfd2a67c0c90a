/**
 * The runner's lifecycle: sandboxes created, parked and removed by the daemon that holds them.
 */

import type { CreateOptions, Handle, SandboxInfo, SandboxResult } from '../../sandbox/index.ts';
import { err, fail, ok } from '../../sandbox/index.ts';
import { resultSchemas } from '../../wire/index.ts';
import { RUNNER_OFFLINE, malformed } from './errors.ts';
import { type RunnerCore } from './core.ts';
import type { SandboxLifecycle } from '../../sandbox/index.ts';

export class RunnerLifecycle implements SandboxLifecycle {
  readonly #c: RunnerCore;

  constructor(c: RunnerCore) {
    this.#c = c;
  }

  create(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    return this.#c.total('create', async () => {
      const r = await this.#c.call(name, { op: 'create', name });
      return r.ok ? ok(this.#c.buildHandle(name)) : r;
    });
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#c.total('get', async () => {
      const r = await this.#c.call(handle.name, { op: 'get', name: handle.name });
      if (!r.ok) return r;
      const parsed = resultSchemas.get.safeParse(r.value);
      if (!parsed.success) return err(malformed('get_reply', r.value));
      const { status, path } = parsed.data;
      return ok({
        status: status === 'running' || status === 'suspended' ? status : 'unknown',
        raw: path === undefined ? { status } : { status, path },
      });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.total('destroy', async () => {
      const r = await this.#c.call(handle.name, { op: 'destroy', name: handle.name });
      return r.ok || r.error.code === 'not_found' ? ok(undefined) : r;
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#c.total('list_all_names', async () => {
      const results = await Promise.all(
        this.#c.host.online().map(async (info): Promise<SandboxResult<string[]>> => {
          const conn = this.#c.host.whereis(info.runnerId);
          if (!conn) return fail('unavailable', RUNNER_OFFLINE);
          const r = await conn.call({ op: 'list' });
          if (!r.ok) return r;
          const parsed = resultSchemas.list.safeParse(r.value);
          return parsed.success ? ok(parsed.data.names) : err(malformed('list', r.value));
        }),
      );
      const names = new Set<string>();
      for (const r of results) {
        // One runner failing fails the view: a partial set must never look whole.
        if (!r.ok) return r;
        for (const n of r.value) names.add(n);
      }
      return ok([...names].sort());
    });
  }

  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.total('suspend', async () => {
      const r = await this.#c.call(handle.name, { op: 'suspend', name: handle.name });
      return r.ok ? ok(undefined) : r;
    });
  }

  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#c.total('resume', async () => {
      const r = await this.#c.call(handle.name, { op: 'resume', name: handle.name });
      return r.ok ? ok(this.#c.buildHandle(handle.name, handle.private)) : r;
    });
  }
}
