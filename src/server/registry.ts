/**
 * Builds the provider registry from the configuration, and the boot check of SANDBOX_PROVIDER
 * against it. Adding a provider means one entry in KNOWN_PROVIDERS and its wiring here.
 */
import type { Logger } from 'pino';
import type { RunnerHost } from '../providers/runner/host.ts';
import { RunnerAdapter } from '../providers/runner/adapter.ts';
import type { SandboxAdapter } from '../sandbox/adapter.ts';
import { KNOWN_PROVIDERS, PROVIDER_CREDENTIAL_ENV, type KnownProvider } from '../sandbox/providers.ts';
import { ProviderRegistry, credentialPresent, type Env } from '../sandbox/registry.ts';
import { ConfigError, type ServerConfig } from './config.ts';

export interface AdapterDeps {
  readonly logger: Logger;
}

export interface RegistryDeps extends AdapterDeps {
  readonly host: RunnerHost;
}

/**
 * How each known provider is wired: whether this configuration registers it, and how its adapter is
 * built. A Record over KnownProvider, so a name added to the registry list does not compile until
 * it is wired here. A hosted adapter's module is imported only when its credential turns it on: the e2b
 * client alone (connect-rpc, protobuf) cost ~250 ms of CPU at every start (docs/benchmarks.md, startup).
 */
export const PROVIDER_WIRING: {
  readonly [P in KnownProvider]: {
    readonly registered: (config: ServerConfig) => boolean;
    readonly build: (
      config: ServerConfig,
      deps: P extends 'runner' ? RegistryDeps : AdapterDeps,
    ) => Promise<SandboxAdapter>;
  };
} = {
  runner: {
    registered: () => true,
    build: async (_config, deps) => new RunnerAdapter(deps.host, { logger: deps.logger }),
  },
  e2b: {
    registered: (config) => config.providers.e2b !== null,
    build: async (config, deps) =>
      new (await import('../providers/e2b/adapter.ts')).E2BAdapter({
        ...config.providers.e2b!,
        logger: deps.logger.child({ provider: 'e2b' }),
      }),
  },
  daytona: {
    registered: (config) => config.providers.daytona !== null,
    build: async (config, deps) =>
      new (await import('../providers/daytona/adapter.ts')).DaytonaAdapter({
        ...config.providers.daytona!,
        logger: deps.logger.child({ provider: 'daytona' }),
      }),
  },
  sprites: {
    registered: (config) => config.providers.sprites !== null,
    build: async (config, deps) =>
      new (await import('../providers/sprites/adapter.ts')).SpritesAdapter({
        ...config.providers.sprites!,
        logger: deps.logger.child({ provider: 'sprites' }),
      }),
  },
};

export async function createProviderRegistry(
  config: ServerConfig,
  env: Env,
  deps: RegistryDeps,
): Promise<ProviderRegistry> {
  const adapters = await Promise.all(
    KNOWN_PROVIDERS.filter((p) => PROVIDER_WIRING[p].registered(config)).map((p) =>
      PROVIDER_WIRING[p].build(config, deps),
    ),
  );
  return new ProviderRegistry(adapters, env);
}

/**
 * The hosted adapters this configuration turns on, for the engine's wiring (createEngine), which
 * adds the runner adapter over the live host itself.
 */
export function hostedAdapters(config: ServerConfig, deps: AdapterDeps): Promise<SandboxAdapter[]> {
  const hosted = KNOWN_PROVIDERS.filter((p): p is Exclude<KnownProvider, 'runner'> => p !== 'runner');
  return Promise.all(
    hosted.filter((p) => PROVIDER_WIRING[p].registered(config)).map((p) => PROVIDER_WIRING[p].build(config, deps)),
  );
}

/**
 * The providers the registry will report enabled, known before any adapter (or the runner host,
 * which needs the database) exists, so a bad SANDBOX_PROVIDER stops the boot first thing.
 */
export function plannedProviders(config: ServerConfig, env: Env): KnownProvider[] {
  return KNOWN_PROVIDERS.filter((p) => PROVIDER_WIRING[p].registered(config) && credentialPresent(p, env));
}

/** What turns a provider on, for the boot message. */
function switchOf(provider: KnownProvider): string {
  return provider === 'runner' ? 'SANDBOX_RUNNERS_ENABLED is false' : `${PROVIDER_CREDENTIAL_ENV[provider]} is not set`;
}

/**
 * Refuses an explicit SANDBOX_PROVIDER that is not enabled (its value is already known: the config
 * refuses any other), naming the switch that is off. The implicit `runner` with runners disabled
 * boots (only an explicit default is held to its credential).
 */
export function checkDefaultProvider(config: ServerConfig, env: Env): void {
  const on = plannedProviders(config, env);
  if (!config.sandboxProviderExplicit || on.includes(config.sandboxProvider)) return;
  throw new ConfigError(
    'SANDBOX_PROVIDER',
    `"${config.sandboxProvider}" is not enabled (${switchOf(config.sandboxProvider)}); enabled: ${on.length ? on.join(', ') : 'none'}`,
  );
}

/**
 * The instance default provider (SANDBOX_PROVIDER, default `runner`) against the registry actually
 * built: an explicit default the registry does not enable stops the boot.
 */
export function defaultProviderOf(config: ServerConfig, registry: ProviderRegistry): KnownProvider {
  if (config.sandboxProviderExplicit && !registry.isEnabled(config.sandboxProvider)) {
    throw new ConfigError(
      'SANDBOX_PROVIDER',
      `provider ${config.sandboxProvider} is not enabled (missing credential or adapter)`,
    );
  }
  return config.sandboxProvider;
}
