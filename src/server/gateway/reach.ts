/**
 * Whether a sandbox can reach this server's model gateway: runner sandboxes (on this machine) reach its
 * listen address or PUBLIC_URL; a hosted provider's sandbox only PUBLIC_URL.
 */
import { eq } from 'drizzle-orm';
import { isKnownProvider } from '../../sandbox/index.ts';
import { agents } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';

export const CREDENTIAL_DELIVERIES = ['gateway', 'direct'] as const;
export type CredentialDelivery = (typeof CREDENTIAL_DELIVERIES)[number];

export type GatewayReach = { ok: true; url: string } | { ok: false; message: string };

/** The server URL a sandbox of `provider` reaches the gateway at, or the sentence saying why none. */
export function gatewayReach(provider: string, publicUrl: string | null, listenUrl: string | null): GatewayReach {
  if (publicUrl) return { ok: true, url: publicUrl };
  // Runner sandboxes live on a machine that reaches the server where it listens; the hosted providers'
  // sandboxes run elsewhere and need the public address.
  if (!(isKnownProvider(provider) && provider !== 'runner') && listenUrl) return { ok: true, url: listenUrl };
  return {
    ok: false,
    message:
      `credential_delivery "gateway" needs PUBLIC_URL: a ${provider} sandbox cannot reach this server's model gateway without it. ` +
      'Set PUBLIC_URL on the server, or set the agent\'s credential_delivery to "direct" (the model key is then handed to the agent process inside the sandbox).',
  };
}

/** How the agent's runtime gets its credential; a deleted agent's conversation keeps the safe default. */
export async function agentCredentialDelivery(db: EngineDb, agentId: string | null): Promise<CredentialDelivery> {
  if (!agentId) return 'gateway';
  const [r] = await db.select({ d: agents.credentialDelivery }).from(agents).where(eq(agents.id, agentId));
  return r?.d ?? 'gateway';
}
