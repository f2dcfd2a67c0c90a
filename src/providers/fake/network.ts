/**
 * The fake's egress policy: recorded, so tests can read what was applied.
 */

import { fail } from '../../sandbox/errors.ts';
import type { SandboxResult } from '../../sandbox/errors.ts';
import { ok } from '../../sandbox/result.ts';
import type { Handle, NetworkPolicy } from '../../sandbox/types.ts';
import { type FakeCore } from './core.ts';
import type { SandboxNetwork } from '../../sandbox/index.ts';

export class FakeNetwork implements SandboxNetwork {
  readonly #c: FakeCore;

  constructor(c: FakeCore) {
    this.#c = c;
  }

  async applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    const sb = this.#c.find(handle);
    if (!sb.ok) return sb;
    if (typeof policy !== 'object' || policy === null || !Array.isArray(policy.allow))
      return fail('invalid', 'network_policy');
    sb.value.policy = policy;
    return ok(undefined);
  }
}
