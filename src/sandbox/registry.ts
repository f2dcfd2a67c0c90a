/**
 * The provider registry: which adapters exist and which are enabled.
 * A provider is enabled exactly when its adapter is registered and its credential is present.
 */
import type { SandboxAdapter } from './adapter.ts';
import { capabilitiesOf } from './adapter.ts';
import type { Capability } from './capabilities.ts';
import type { Handle } from './types.ts';
import type { KnownProvider, ProviderId } from './providers.ts';
import { KNOWN_PROVIDERS, PROVIDER_CREDENTIAL_ENV } from './providers.ts';

export type Env = Readonly<Record<string, string | undefined>>;

const blank = (v: string | undefined): boolean => v === undefined || v.trim() === '';

/** Whether the switch for a provider is on in this environment; a blank value equals unset. */
export function credentialPresent(provider: ProviderId, env: Env): boolean {
  if (provider === 'fake') return true;
  if (provider === 'runner') {
    const v = env.SANDBOX_RUNNERS_ENABLED;
    return blank(v) || !['false', '0', 'no', 'off'].includes(v!.trim().toLowerCase());
  }
  return !blank(env[PROVIDER_CREDENTIAL_ENV[provider]]);
}

export class UnknownProviderError extends Error {
  constructor(provider: string) {
    super(`no sandbox adapter registered for provider ${JSON.stringify(provider)}`);
    this.name = 'UnknownProviderError';
  }
}

export class ProviderRegistry {
  readonly #adapters: ReadonlyMap<ProviderId, SandboxAdapter>;
  readonly #env: Env;

  constructor(adapters: Iterable<SandboxAdapter>, env: Env) {
    this.#adapters = new Map([...adapters].map((a) => [a.provider, a] as const));
    this.#env = env;
  }

  /** Call sites never name an adapter: they dispatch on a provider id or a handle's tag. */
  adapterFor(providerOrHandle: ProviderId | Handle): SandboxAdapter {
    const provider = typeof providerOrHandle === 'string' ? providerOrHandle : providerOrHandle.provider;
    const adapter = this.#adapters.get(provider);
    if (!adapter) throw new UnknownProviderError(provider);
    return adapter;
  }

  isRegistered(provider: ProviderId): boolean {
    return this.#adapters.has(provider);
  }

  isEnabled(provider: ProviderId): boolean {
    return this.#adapters.has(provider) && credentialPresent(provider, this.#env);
  }

  /** Enabled known providers, in registry order. */
  enabled(): KnownProvider[] {
    return KNOWN_PROVIDERS.filter((p) => this.isEnabled(p));
  }

  supports(providerOrHandle: ProviderId | Handle, cap: Capability): boolean {
    const handle = typeof providerOrHandle === 'string' ? undefined : providerOrHandle;
    return capabilitiesOf(this.adapterFor(providerOrHandle), handle).has(cap);
  }
}
