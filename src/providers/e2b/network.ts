/**
 * E2B egress: the sandbox firewall, deny-all made explicit because E2B allows what no rule matches.
 */

import { z } from 'zod';
import type { Handle, NetworkPolicy, SandboxResult } from '../../sandbox/index.ts';
import { fail } from '../../sandbox/index.ts';
import { type E2BCore } from './core.ts';
import type { SandboxNetwork } from '../../sandbox/index.ts';

export class E2BNetwork implements SandboxNetwork {
  readonly #c: E2BCore;

  constructor(c: E2BCore) {
    this.#c = c;
  }

  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#c.guard('apply_network_policy', async () => {
      const allow = z.array(z.string().min(1).max(253)).safeParse(policy?.allow);
      if (!allow.success) return fail('invalid', 'network_policy: allow must be a list of domains');
      const t = await this.#c.target(handle);
      if (!t.ok) return t;
      // E2B's firewall allows whatever no rule matches, so deny-all is explicit and allowOut
      // punches holes in it. Each call replaces the whole policy.
      return this.#c.api.putNetwork(t.value.sandboxId, { allowOut: allow.data, denyOut: ['0.0.0.0/0'] });
    });
  }
}
