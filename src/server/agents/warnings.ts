/**
 * An agent configuration's warnings: what would stop its conversations at launch although the agent
 * saves fine (a `limited` environment on a backend without network_policy), in words a user knows.
 */
import { isKnownProvider, type KnownProvider, type ProviderRegistry } from '../../sandbox/index.ts';
import { accountBrokered, brokerageRefusal, BACKEND_LACKS_NETWORK_POLICY } from '../account/brokerage.ts';
import type { EngineDb } from '../store/engine-db.ts';
import type { Db } from '../store/db.ts';
import type { Environment } from '../store/environment-schema.ts';
import { listRunners, runnerCapabilitiesOf } from '../runners/service.ts';

export interface AgentWarning {
  readonly code: typeof BACKEND_LACKS_NETWORK_POLICY;
  readonly message: string;
}

/** Where an agent's sandboxes would go and what they would be provisioned with. */
export interface AgentPlacement {
  readonly environmentId: string | null;
  /** null: the instance default. */
  readonly sandboxProvider: string | null;
  readonly runnerId: string | null;
}

export interface WarningDeps {
  readonly db: EngineDb;
  readonly registry: ProviderRegistry;
  readonly defaultProvider: KnownProvider;
  /** BROKER_ALLOW_UNENFORCED */
  readonly allowUnenforced: boolean;
  /** The account's environments (the environment service). */
  readonly environments: { get(accountId: string, id: string): Promise<Environment | undefined> };
}

/** The warnings of one account's placement, for the API's answers and the web form alike. */
export const agentWarner =
  (deps: WarningDeps) =>
  (accountId: string, placement: AgentPlacement): Promise<AgentWarning[]> =>
    agentWarnings(deps, accountId, placement);

/**
 * The warnings for one configuration; empty when none. The brokerage's own rule decides (the launch
 * gate's predicate), fed with what can be known before a launch: a pinned runner's reported
 * capabilities, "any runner" as whether one of the account's runners reports network_policy, and a
 * vendor adapter's declared set.
 */
export async function agentWarnings(deps: WarningDeps, accountId: string, a: AgentPlacement): Promise<AgentWarning[]> {
  const env = a.environmentId ? await deps.environments.get(accountId, a.environmentId) : undefined;
  const limited = env?.networkingType === 'limited' ? env.name : null;
  const provider = a.sandboxProvider ?? deps.defaultProvider;
  let hasNetworkPolicy: boolean;
  let where: string;
  if (provider === 'runner') {
    const runners = await listRunners(deps.db as unknown as Db, accountId);
    const enforcing = (r: (typeof runners)[number]) => runnerCapabilitiesOf(r).includes('network_policy');
    const pinned = a.runnerId ? runners.find((r) => r.id === a.runnerId) : undefined;
    if (pinned) {
      hasNetworkPolicy = enforcing(pinned);
      where = `its runner ${pinned.name} cannot enforce it (start that runner with --backend namespace)`;
    } else {
      hasNetworkPolicy = runners.some(enforcing);
      where =
        runners.length === 0
          ? 'no runner is connected to this account yet'
          : 'none of your runners can enforce it (start one with --backend namespace)';
    }
  } else {
    hasNetworkPolicy =
      isKnownProvider(provider) &&
      deps.registry.isEnabled(provider) &&
      deps.registry.supports(provider, 'network_policy');
    where = `the ${provider} sandbox provider cannot enforce it`;
  }
  const refused = await brokerageRefusal({
    provider,
    hasNetworkPolicy,
    where,
    limitedEnvironment: limited,
    allowUnenforced: deps.allowUnenforced,
    brokered: () => accountBrokered(deps.db, accountId),
  });
  if (!refused) return [];
  const message =
    limited !== null
      ? `The environment ${limited} limits network access, but ${where}. Conversations with this agent will be refused when they start.`
      : `Credential brokerage is on for this account, but ${where}. Conversations with this agent will be refused when they start.`;
  return [{ code: refused.reason, message }];
}
