/**
 * Sprites files: the filesystem write endpoint, with a mode.
 */

import { err, sandboxError, type Handle, type SandboxResult, type WriteFileOptions } from '../../sandbox/index.ts';
import { type SpritesCore } from './core.ts';
import type { SandboxFiles } from '../../sandbox/index.ts';

export class SpritesFiles implements SandboxFiles {
  readonly #c: SpritesCore;

  constructor(c: SpritesCore) {
    this.#c = c;
  }

  writeFile(handle: Handle, path: string, data: Uint8Array, opts: WriteFileOptions = {}): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      if (!path || path.includes('\0')) return err(sandboxError('invalid', 'path'));
      const mode = opts.mode ?? 0o644;
      if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) return err(sandboxError('invalid', 'mode'));
      return this.#c.api.writeFile(token.value, handle.name, path, data, mode);
    });
  }
}
