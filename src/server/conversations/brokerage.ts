/**
 * The brokerage gate (issue 6, platform-api.md §14.2): an account with credential brokerage may only
 * launch on a backend that can enforce an egress policy, unless BROKER_ALLOW_UNENFORCED says otherwise.
 */
import { eq } from 'drizzle-orm';
import type { SandboxAdapter } from '../../sandbox/index.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { accounts } from '../store/schema.ts';

export const BACKEND_LACKS_NETWORK_POLICY = 'backend_lacks_network_policy';

/** The `network`/`failed` stage data of a refusal. */
export interface BrokerageRefusal {
  readonly type: 'limited';
  readonly provider: string;
  readonly reason: typeof BACKEND_LACKS_NETWORK_POLICY;
  readonly message: string;
}

/**
 * Null when the launch may go ahead. `name` is the minted sandbox name: for a runner it names the
 * placed runner, whose advertised capabilities decide (a namespace runner has network_policy).
 * `limitedEnvironment` names a `limited` environment the launch uses: it needs the policy whatever
 * BROKER_ALLOW_UNENFORCED says (§14.1 step 1).
 */
export async function checkBrokerage(
  db: EngineDb,
  accountId: string,
  adapter: SandboxAdapter,
  name: string,
  allowUnenforced: boolean,
  limitedEnvironment: string | null = null,
): Promise<BrokerageRefusal | null> {
  if (adapter.capabilities(adapter.buildHandle(name)).has('network_policy')) return null;
  const where = adapter.provider === 'runner' ? 'the runner this sandbox would run on does not enforce egress (start it with --backend namespace)' : `provider ${adapter.provider} has no network policy`;
  const refusal = (message: string): BrokerageRefusal => ({ type: 'limited', provider: adapter.provider, reason: BACKEND_LACKS_NETWORK_POLICY, message });
  if (limitedEnvironment !== null) return refusal(`environment ${limitedEnvironment} limits the network, but ${where}`);
  if (allowUnenforced) return null;
  const [row] = await db.select({ on: accounts.credentialBrokerage }).from(accounts).where(eq(accounts.id, accountId));
  if (!row?.on) return null;
  return refusal(`credential brokerage is on for this account, but ${where}; set BROKER_ALLOW_UNENFORCED=true only on a development instance`);
}
