/**
 * The brokerage rule, one predicate for the launch gate
 * (conversations/brokerage.ts) and the agent form's warnings (agents/warnings.ts).
 */
import { eq } from 'drizzle-orm';
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

/** What the rule needs to know about one launch (or one agent configuration). */
export interface BrokerageFacts {
  readonly provider: string;
  /** Whether the backend the launch lands on can enforce an egress policy. */
  readonly hasNetworkPolicy: boolean;
  /** Says where the policy is missing, for the message; defaults to the provider's or runner's wording. */
  readonly where?: string;
  /** The name of a `limited` environment the launch uses, or null. */
  readonly limitedEnvironment: string | null;
  readonly allowUnenforced: boolean;
  /** Whether the account has credential brokerage on; asked only when the rule needs it. */
  readonly brokered: () => Promise<boolean>;
}

/**
 * The rule itself:
 * a `limited` environment needs the policy whatever BROKER_ALLOW_UNENFORCED says;
 * a brokered account needs it unless BROKER_ALLOW_UNENFORCED lifts that.
 */
export async function brokerageRefusal(f: BrokerageFacts): Promise<BrokerageRefusal | null> {
  if (f.hasNetworkPolicy) return null;
  const where =
    f.where ??
    (f.provider === 'runner'
      ? 'the runner this sandbox would run on does not enforce egress (start it with --backend namespace)'
      : `provider ${f.provider} has no network policy`);
  const refusal = (message: string): BrokerageRefusal => ({
    type: 'limited',
    provider: f.provider,
    reason: BACKEND_LACKS_NETWORK_POLICY,
    message,
  });
  if (f.limitedEnvironment !== null)
    return refusal(`environment ${f.limitedEnvironment} limits the network, but ${where}`);
  if (f.allowUnenforced) return null;
  if (!(await f.brokered())) return null;
  return refusal(
    `credential brokerage is on for this account, but ${where}; set BROKER_ALLOW_UNENFORCED=true only on a development instance`,
  );
}

/** Whether the account has credential brokerage on. */
export async function accountBrokered(db: EngineDb, accountId: string): Promise<boolean> {
  const [row] = await db.select({ on: accounts.credentialBrokerage }).from(accounts).where(eq(accounts.id, accountId));
  return row?.on ?? false;
}
