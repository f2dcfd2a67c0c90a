/**
 * What the web pages need from the rest of the server, and the per-request context they share
 * (the signed-in user). Page modules depend on this, never on how the server wires itself.
 */
import type { Context } from 'hono';
import type { Logger } from 'pino';
import type { RunnerHost } from '../../providers/runner/host.ts';
import type { KnownProvider, ProviderRegistry } from '../../sandbox/index.ts';
import type { ConversationEngine } from '../conversations/engine.ts';
import type { TeamService } from '../team/service.ts';
import type { CredentialService } from '../credentials/service.ts';
import type { WebhookService } from '../webhooks/service.ts';
import type { EngineDb } from '../store/engine-db.ts';
import type { EnvironmentService } from '../environments/service.ts';
import type { DocsSite } from './docs.tsx';
import type { SessionUser } from './session.ts';

export interface WebDeps {
  /** The server's database (accounts, keys, runners and the engine's tables). */
  readonly db: EngineDb;
  readonly engine: ConversationEngine;
  /** The team (`/api/team`'s membership): the Team page lists it and messages its members there. */
  readonly team?: TeamService;
  /** Environments and their write-only secrets (the environments page, the agent form's choice). */
  readonly environments: EnvironmentService;
  readonly registry: ProviderRegistry;
  readonly defaultProvider: KnownProvider;
  /** Live runner sockets (online status); null when this node serves no runners. */
  readonly runnerHost: RunnerHost | null;
  /** Calls `onChange` whenever one of the account's runners connects or drops; returns the unsubscribe. */
  readonly watchRunners: (accountId: string, onChange: () => void) => () => void;
  /** Closes a deleted runner's socket, if this node holds it. */
  readonly disconnectRunner?: (runnerId: string) => void;
  /** SANDBOX_RUNNERS_ENABLED */
  readonly runnersEnabled: boolean;
  readonly sessionSecret: string;
  /** The rendered docs site, asked for on the first /docs request (rendering every page costs a few hundred ms). */
  readonly docs: () => Promise<DocsSite>;
  readonly logger: Logger;
  /** Adds `Secure` to the session cookie (set when served over https). */
  readonly secureCookies?: boolean;
  /** The account's model credentials (the Model credentials page). */
  readonly credentials?: CredentialService;
  /** The account's signed webhooks (the Webhooks page). */
  readonly webhooks?: WebhookService;
  /** How often live pages re-check state that has no change event (new agents, sandbox states); default 2000 ms. */
  readonly refreshMs?: number;
}

export interface WebEnv {
  Variables: { user: SessionUser };
}

export type WebContext = Context<WebEnv>;

export const userName = (u: SessionUser): { name: string } => ({ name: u.account.name });

/** True when htmx made the request (it wants a fragment, not a page). */
export const isHtmx = (c: Context): boolean => c.req.header('hx-request') === 'true';
