/**
 * Daytona egress: the sandbox network settings (domain and CIDR allow lists, at most ten each).
 */

import type { Handle, NetworkPolicy, SandboxResult } from '../../sandbox/index.ts';
import { ok } from '../../sandbox/index.ts';
import { type DaytonaCore, networkSettingsFor } from './core.ts';
import type { SandboxNetwork } from '../../sandbox/index.ts';

export class DaytonaNetwork implements SandboxNetwork {
  readonly #c: DaytonaCore;

  constructor(c: DaytonaCore) {
    this.#c = c;
  }

  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#c.guard('apply_network_policy', async () => {
      const body = networkSettingsFor(policy);
      if (!body.ok) return body;
      const g = await this.#c.client.getSandbox(handle.name);
      if (!g.ok) return g;
      // Tier 1/2 organisations answer 400 "Network access is restricted…"; errors.ts maps it to `denied`.
      const r = await this.#c.client.networkSettings(g.value.id, body.value);
      return r.ok ? ok(undefined) : r;
    });
  }
}
