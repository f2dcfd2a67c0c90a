/**
 * The fake's files: kept in memory per sandbox, with their mode.
 */

import { fail } from '../../sandbox/errors.ts';
import type { SandboxResult } from '../../sandbox/errors.ts';
import { ok } from '../../sandbox/result.ts';
import type { Handle, WriteFileOptions } from '../../sandbox/types.ts';
import { type FakeCore } from './core.ts';
import type { SandboxFiles } from '../../sandbox/index.ts';

export class FakeFiles implements SandboxFiles {
  readonly #c: FakeCore;

  constructor(c: FakeCore) {
    this.#c = c;
  }

  async writeFile(
    handle: Handle,
    path: string,
    data: Uint8Array,
    opts?: WriteFileOptions,
  ): Promise<SandboxResult<void>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    if (typeof path !== 'string' || path.length === 0) return fail('invalid', 'path');
    if (!(data instanceof Uint8Array)) return fail('invalid', 'data');
    sb.value.files.set(path, { data: Uint8Array.from(data), mode: opts?.mode });
    return ok(undefined);
  }
}
