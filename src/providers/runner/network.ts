/**
 * The runner's egress policy: asked only of a runner whose backend advertised network_policy.
 */

import type { Handle, NetworkPolicy, SandboxResult } from '../../sandbox/index.ts';
import { fail, ok } from '../../sandbox/index.ts';
import { type RunnerCore } from './core.ts';
import type { SandboxNetwork } from '../../sandbox/index.ts';

export class RunnerNetwork implements SandboxNetwork {
  readonly #c: RunnerCore;

  constructor(c: RunnerCore) {
    this.#c = c;
  }

  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#c.total('apply_network_policy', async () => {
      // Asked only of a runner that advertised it: an older daemon would answer an unknown op anyway.
      if (!this.#c.offered(handle).has('network_policy')) return fail('not_supported', 'network_policy');
      const r = await this.#c.call(handle.name, {
        op: 'apply_network_policy',
        name: handle.name,
        allow: [...policy.allow],
      });
      return r.ok ? ok(undefined) : r;
    });
  }
}
