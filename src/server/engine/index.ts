/**
 * The conversation engine's public surface and its wiring: builds the ProviderRegistry (the runner
 * adapter over the live host, plus any hosted adapters the caller passes), the config and the engine.
 */
import type { Logger } from 'pino';
import { localDemoAgentArgv } from '../../acp/index.ts';
import { RunnerAdapter, type RunnerHost } from '../../providers/runner/index.ts';
import { ProviderRegistry, isKnownProvider, type KnownProvider, type SandboxAdapter } from '../../sandbox/index.ts';
import type { Db } from '../store/db.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { findRunner } from '../store/runners.ts';
import { engineConfigFromEnv, type EngineConfig } from './config.ts';
import { ConversationEngine, type EngineDeps } from './engine.ts';

export { ConversationEngine } from './engine.ts';
export { mintEngineNodeId } from './ownership.ts';
export type { CreateConversationInput, EngineDeps, RunnerDirectory } from './engine.ts';
export { ENGINE_DEFAULTS, engineConfigFromEnv, type EngineConfig } from './config.ts';
export { ENGINE_ERROR_STATUS, ENGINE_RETRY_AFTER, type EngineError, type EngineErrorCode, type EngineResult } from './errors.ts';
export { conversationTag, taggedArgv } from './agent-process.ts';
export { RUNTIME_SPECS, modelProblem } from './runtimes.ts';
export type { ConversationView, EventView, TurnView } from './views.ts';

export class EngineConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`${variable}: ${detail}`);
    this.name = 'EngineConfigError';
  }
}

export interface EngineWiring {
  readonly db: Db;
  readonly logger: Logger;
  readonly host: RunnerHost;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Hosted adapters (e2b, daytona, sprites); the runner adapter is always added. */
  readonly adapters?: readonly SandboxAdapter[];
  /** Overrides on top of the environment (tests shrink timeouts here). */
  readonly config?: Partial<EngineConfig>;
  readonly node?: EngineDeps['node'];
  readonly credentials?: EngineDeps['credentials'];
}

/**
 * SANDBOX_PROVIDER: default `runner`; anything unknown, or an explicit default that is not enabled,
 * stops the boot (platform-api.md §16). An implicit `runner` with runners disabled still boots: the
 * Runners page says so, and agents without a provider are refused when they start.
 */
export function defaultProviderFrom(env: EngineWiring['env'], registry: ProviderRegistry): KnownProvider {
  const explicit = env.SANDBOX_PROVIDER?.trim();
  const raw = explicit || 'runner';
  if (!isKnownProvider(raw)) throw new EngineConfigError('SANDBOX_PROVIDER', `unknown provider ${JSON.stringify(raw)}`);
  if (explicit && !registry.isEnabled(raw)) throw new EngineConfigError('SANDBOX_PROVIDER', `provider ${raw} is not enabled (missing credential or adapter)`);
  return raw;
}

export function createEngine(w: EngineWiring): { engine: ConversationEngine; registry: ProviderRegistry; defaultProvider: KnownProvider } {
  const fromEnv = engineConfigFromEnv(w.env);
  if (!fromEnv.ok) throw new EngineConfigError('environment', fromEnv.message);
  const config: EngineConfig = { ...fromEnv.value, demoAgentArgv: localDemoAgentArgv(), ...w.config };
  const registry = new ProviderRegistry([new RunnerAdapter(w.host, { logger: w.logger }), ...(w.adapters ?? [])], w.env);
  const defaultProvider = defaultProviderFrom(w.env, registry);
  const db = w.db as unknown as EngineDb;
  const engine = new ConversationEngine({
    db,
    registry,
    runnerHost: w.host,
    runners: {
      find: async (accountId, runnerId) => {
        const r = await findRunner(w.db, accountId, runnerId);
        return r ? { id: r.id, name: r.name, hostname: r.hostname, root: r.root } : undefined;
      },
    },
    logger: w.logger,
    config,
    defaultProvider,
    ...(w.node ? { node: w.node } : {}),
    ...(w.credentials ? { credentials: w.credentials } : {}),
  });
  return { engine, registry, defaultProvider };
}
