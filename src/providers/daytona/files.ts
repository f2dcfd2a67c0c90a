/**
 * Daytona files: the toolbox upload, and a chmod for the mode.
 */

import type { Handle, SandboxResult, WriteFileOptions } from '../../sandbox/index.ts';
import { fail, ok } from '../../sandbox/index.ts';
import { quote } from './shell.ts';
import { type DaytonaCore } from './core.ts';
import type { SandboxFiles } from '../../sandbox/index.ts';

export class DaytonaFiles implements SandboxFiles {
  readonly #c: DaytonaCore;

  constructor(c: DaytonaCore) {
    this.#c = c;
  }

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#c.guard('write_file', async () => {
      const loc = await this.#c.locate(handle);
      if (!loc.ok) return loc;
      const up = await this.#c.retryOnStaleProxy(handle, loc.value, (l) => l.toolbox.upload(path, data));
      if (!up.ok) return up;
      if (opts.mode !== undefined) {
        const mode = (opts.mode & 0o7777).toString(8);
        const r = await this.#c.shell(loc.value, `chmod ${mode} ${quote(path)}`, 60);
        if (!r.ok) return r;
        if (r.value.exitCode !== 0) return fail('invalid', `write_file: chmod exited ${r.value.exitCode}`);
      }
      return ok(undefined);
    });
  }
}
