/**
 * Sprites egress: the policy endpoint, with `allow: []` made a real deny-all (an empty Sprites
 * rule list enforces nothing).
 */

import { err, sandboxError, type Handle, type NetworkPolicy, type SandboxResult } from '../../sandbox/index.ts';
import { type PolicyRule } from './api.ts';
import { type SpritesCore, DOMAIN } from './core.ts';
import type { SandboxNetwork } from '../../sandbox/index.ts';

export class SpritesNetwork implements SandboxNetwork {
  readonly #c: SpritesCore;

  constructor(c: SpritesCore) {
    this.#c = c;
  }

  /**
   * `allow: []` must deny everything, but an empty Sprites rule list enforces nothing; every
   * policy therefore ends in an explicit `*` deny (and never `include: defaults`, which
   * would re-allow the platform's own list).
   */
  applyNetworkPolicy(handle: Handle, policy: NetworkPolicy): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      if (!Array.isArray(policy.allow) || policy.allow.some((d) => typeof d !== 'string' || !DOMAIN.test(d))) {
        return err(sandboxError('invalid', 'network_policy'));
      }
      const rules: PolicyRule[] = [
        ...policy.allow.map((domain): PolicyRule => ({ domain: domain.toLowerCase(), action: 'allow' })),
        { domain: '*', action: 'deny' },
      ];
      return this.#c.api.setNetworkPolicy(token.value, handle.name, rules);
    });
  }
}
