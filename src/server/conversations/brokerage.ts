/**
 * The brokerage gate: an account with credential brokerage may only
 * launch on a backend that can enforce an egress policy, unless BROKER_ALLOW_UNENFORCED says otherwise.
 */
import { capabilitiesOf, type SandboxAdapter } from '../../sandbox/index.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { accountBrokered, brokerageRefusal, type BrokerageRefusal } from '../account/brokerage.ts';

export { BACKEND_LACKS_NETWORK_POLICY, type BrokerageRefusal } from '../account/brokerage.ts';

/**
 * Null when the launch may go ahead. `name` is the minted sandbox name: for a runner it names the
 * placed runner, whose advertised capabilities decide (a namespace runner has network_policy).
 * `limitedEnvironment` names a `limited` environment the launch uses.
 */
export function checkBrokerage(
  db: EngineDb,
  accountId: string,
  adapter: SandboxAdapter,
  name: string,
  allowUnenforced: boolean,
  limitedEnvironment: string | null = null,
): Promise<BrokerageRefusal | null> {
  return brokerageRefusal({
    provider: adapter.provider,
    hasNetworkPolicy: capabilitiesOf(adapter, adapter.buildHandle(name)).has('network_policy'),
    limitedEnvironment,
    allowUnenforced,
    brokered: () => accountBrokered(db, accountId),
  });
}
