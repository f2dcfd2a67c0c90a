/**
 * The runner's files: written by the daemon, and the one adapter that maps sandbox paths to host paths.
 */

import type { Handle, SandboxResult, WriteFileOptions } from '../../sandbox/index.ts';
import { ok } from '../../sandbox/index.ts';
import { encodeBase64 } from '../../wire/index.ts';
import type { OutgoingRequest } from './host.ts';
import { type RunnerCore, mapSandboxPath } from './core.ts';
import type { SandboxFiles, SandboxLifecycle } from '../../sandbox/index.ts';

export class RunnerFiles implements SandboxFiles {
  readonly #c: RunnerCore;
  /** The host path comes from the sandbox's info. */
  readonly #lifecycle: SandboxLifecycle;

  constructor(c: RunnerCore, lifecycle: SandboxLifecycle) {
    this.#c = c;
    this.#lifecycle = lifecycle;
  }

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#c.total('write_file', async () => {
      const req: OutgoingRequest = { op: 'write_file', name: handle.name, path, data: encodeBase64(data) };
      const r = await this.#c.call(handle.name, opts.mode === undefined ? req : { ...req, mode: opts.mode });
      return r.ok ? ok(undefined) : r;
    });
  }

  hostPath(handle: Handle, path: string): Promise<SandboxResult<string>> {
    return this.#c.total('host_path', async () => {
      const info = await this.#lifecycle.get(handle);
      if (!info.ok) return info;
      const dir = info.value.raw.path;
      return ok(typeof dir === 'string' && dir.length > 0 ? mapSandboxPath(dir, path) : path);
    });
  }
}
