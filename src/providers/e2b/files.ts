/**
 * E2B files: envd's upload, and a chmod for the mode (the upload has no mode parameter).
 */

import type { Handle, SandboxResult, WriteFileOptions } from '../../sandbox/index.ts';
import { fail, ok } from '../../sandbox/index.ts';
import { type E2BCore } from './core.ts';
import type { SandboxFiles } from '../../sandbox/index.ts';

export class E2BFiles implements SandboxFiles {
  readonly #c: E2BCore;

  constructor(c: E2BCore) {
    this.#c = c;
  }

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#c.guard('write_file', async () => {
      if (typeof path !== 'string' || path === '' || path.includes('\0'))
        return fail('invalid', 'write_file: bad path');
      const t = await this.#c.target(handle);
      if (!t.ok) return t;
      const envd = this.#c.envd(t.value);
      const up = await envd.upload(path, data);
      if (!up.ok) return up;
      if (opts.mode === undefined) return ok(undefined);
      // envd's upload has no mode parameter.
      const mode = (opts.mode & 0o7777).toString(8);
      const r = await this.#c.run(
        envd,
        { cmd: 'chmod', args: [mode, '--', path], envs: {} },
        this.#c.o.requestTimeoutMs,
        false,
      );
      if (!r.ok) return r;
      return r.value.exitCode === 0 ? ok(undefined) : fail('invalid', `write_file: chmod exited ${r.value.exitCode}`);
    });
  }
}
