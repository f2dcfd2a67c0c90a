/**
 * The Hono application: every /api route, the generated OpenAPI document, and the single
 * place where thrown errors become `{error, message}` responses.
 */
import { settingsRoutes } from './conversations/settings-routes.ts';
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { RunnerHost } from '../providers/runner/host.ts';
import type { AppEnv } from './http/auth.ts';
import { ApiError, errorResponse, toApiError } from './http/errors.ts';
import type { EventBus } from './cluster/bus.ts';
import { healthRoutes } from './http/health.ts';
import { checkBodies, limitBodies } from './http/input-guard.ts';
import { accountRoutes } from './account/routes.ts';
import { adminRoutes } from './account/admin-routes.ts';
import { authRoutes } from './account/keys-routes.ts';
import { errorResponses, type RouteDeps } from './http/common.ts';
import { runnerRoutes } from './runners/routes.ts';
import { agentRoutes } from './agents/routes.ts';
import { conversationRoutes } from './conversations/routes.ts';
import { streamRoutes } from './conversations/stream-routes.ts';
import { teamRoutes } from './team/routes.ts';
import { scheduleRoutes } from './team/schedule-routes.ts';
import { mcpTeamRoutes } from './team/mcp-routes.ts';
import type { TeamService } from './team/service.ts';
import type { Scheduler } from './team/scheduler.ts';
import type { ConversationEngine } from './conversations/index.ts';
import type { KnownProvider, ProviderRegistry } from '../sandbox/index.ts';
import type { Db } from './store/db.ts';
import { runnersTopic } from './cluster/bus.ts';
import { CLOSE } from '../wire/index.ts';
import type { WebDeps } from './web/context.ts';
import { environmentRoutes } from './environments/routes.ts';
import type { EnvironmentService } from './environments/service.ts';
import { credentialRoutes } from './credentials/routes.ts';
import type { CredentialService } from './credentials/service.ts';
import { runnerRegisterRoutes } from './runners/register-route.ts';
import { runnerInstallRoutes } from './runners/install-routes.ts';
import { type RunnerArtifacts, runnerArtifacts } from './runners/artifact.ts';
import { webhookRoutes } from './webhooks/routes.ts';
import type { WebhookService } from './webhooks/service.ts';
import { usageRoutes } from './gateway/routes.ts';
import type { UsageService } from './gateway/service.ts';
import { labelRoutes } from './conversations/label-routes.ts';
import { pushRoutes } from './conversations/push-routes.ts';
import { relocateRoutes } from './conversations/relocate-routes.ts';
import { capacityRoutes } from './conversations/capacity-routes.ts';

export interface AppDeps {
  readonly db: Db;
  readonly logger: Logger;
  /** The live runner registry (`online`, and closing a deleted runner's socket). */
  readonly host: RunnerHost;
  readonly bus: EventBus;
  /** SANDBOX_RUNNERS_ENABLED */
  readonly runnersEnabled: boolean;
  /** Shown in the OpenAPI document. */
  readonly version?: string;
  /** PUBLIC_URL without a trailing slash: written into the runner install script and "Add runner"'s command. */
  readonly publicUrl?: string | null;
  /** The runner this server hands out; default: built from this code on first use. */
  readonly runnerArtifacts?: RunnerArtifacts;
  /** The conversation engine; without it the agent and conversation routes are not mounted. */
  readonly engine?: {
    readonly engine: ConversationEngine;
    readonly registry: ProviderRegistry;
    readonly defaultProvider: KnownProvider;
    readonly environments: EnvironmentService;
    readonly sseHeartbeatMs?: number;
    /** PUBLIC_URL, for refusing gateway delivery where a sandbox could not reach it. */
    readonly publicUrl?: string | null;
  };
  /** The web UI (pages and /docs); mounted only together with the engine. */
  readonly web?: { readonly sessionSecret: string; readonly secureCookies?: boolean };
  /** The team and its scheduler; mounted with the engine. */
  readonly team?: { readonly team: TeamService; readonly scheduler: Scheduler };
  /** The account's model credentials (`/api/account/inference-credentials`). */
  readonly credentials?: CredentialService;
  /** The account's signed webhooks (`/api/webhooks`). */
  readonly webhooks?: WebhookService;
  /** Model usage and limits through the gateway (`/api/usage`). */
  readonly usage?: UsageService;
}

type WebModule = typeof import('./web/app.tsx');

/**
 * The web UI's modules (the pages, their components, the docs renderer's loader: ~8% of the CPU a
 * start spends loading modules) are imported on the first request that is not the API's, not at start
 * (start-up, docs/benchmarks.md). A failed import is logged and every later page request answers 500.
 */
function lazyWeb(logger: Logger): () => Promise<WebModule> {
  let loading: Promise<WebModule> | null = null;
  return () =>
    (loading ??= import('./web/app.tsx').catch((e: unknown) => {
      logger.error({ err: e }, 'the web UI could not be loaded');
      throw new Error(`the web UI could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
    }));
}

/**
 * Hands a request to the web UI's own Hono app. A body is read here, under this app's limit and checks
 * (they may have read it already), and passed on as those bytes; a GET goes as it arrived, its signal
 * with it, so a page's live stream still ends when the browser leaves.
 */
async function forwardTo(
  web: { fetch(req: Request, env: unknown): Response | Promise<Response> },
  c: Context<AppEnv>,
): Promise<Response> {
  const raw = c.req.raw;
  const req =
    raw.method === 'GET' || raw.method === 'HEAD' ? raw : new Request(raw, { body: await c.req.arrayBuffer() });
  return web.fetch(req, c.env);
}

export function createApp(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>();
  const routeDeps: RouteDeps = deps;
  const webModule = deps.web && deps.engine ? lazyWeb(deps.logger) : null;

  const notFound = (c: Context): Response | Promise<Response> =>
    // A browser asking for a page nobody serves gets a page saying so; API clients keep the JSON error.
    webModule && !c.req.path.startsWith('/api/') && c.req.header('accept')?.includes('text/html')
      ? webModule().then((m) => m.webNotFound(c))
      : errorResponse(c, new ApiError(404, 'not_found', `no route for ${c.req.method} ${c.req.path}`));
  app.onError((e, c) => errorResponse(c, toApiError(e, deps.logger)));
  app.notFound(notFound);
  // Every route, the unauthenticated /signin included: a body is bounded and checked before anything reads it.
  app.use('*', limitBodies(), checkBodies());

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key: ftn_ followed by 64 lowercase hex digits',
  });

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/health',
      summary: 'Liveness and database reachability (no auth)',
      responses: {
        200: { description: 'ok', content: { 'application/json': { schema: z.object({ status: z.literal('ok') }) } } },
        ...errorResponses(503),
      },
    }),
    async (c) => {
      try {
        await deps.db.execute(sql`SELECT 1`);
      } catch (err) {
        deps.logger.warn({ err }, 'health check: database unreachable');
        throw new ApiError(503, 'database_unavailable', 'the database does not answer');
      }
      return c.json({ status: 'ok' as const }, 200);
    },
  );

  app.route('/', healthRoutes(deps));
  app.route('/', authRoutes(routeDeps));
  app.route('/', adminRoutes(routeDeps));
  app.route('/', accountRoutes(routeDeps));
  if (deps.credentials) app.route('/', credentialRoutes({ ...routeDeps, credentials: deps.credentials }));
  if (deps.webhooks) app.route('/', webhookRoutes({ ...routeDeps, webhooks: deps.webhooks }));
  if (deps.usage) app.route('/', usageRoutes({ ...routeDeps, usage: deps.usage }));
  app.route('/', runnerRoutes(routeDeps));
  app.route('/', runnerRegisterRoutes({ ...routeDeps, publicUrl: deps.publicUrl ?? null }));
  const artifacts = deps.runnerArtifacts ?? runnerArtifacts();
  app.route('/', runnerInstallRoutes({ artifacts, publicUrl: deps.publicUrl ?? null }));
  if (deps.engine) {
    app.route(
      '/',
      agentRoutes({
        ...routeDeps,
        registry: deps.engine.registry,
        defaultProvider: deps.engine.defaultProvider,
        environments: deps.engine.environments,
        allowUnenforced: deps.engine.engine.brokerAllowUnenforced,
        publicUrl: deps.engine.publicUrl ?? null,
        agentChanged: (accountId, agentId) => deps.engine?.engine.agentChanged(accountId, agentId),
      }),
    );
    app.route('/', environmentRoutes({ ...routeDeps, environments: deps.engine.environments }));
    app.route('/', conversationRoutes({ ...routeDeps, ...deps.engine }));
    app.route('/', settingsRoutes({ ...routeDeps, ...deps.engine }));
    app.route('/', labelRoutes({ ...routeDeps, engine: deps.engine.engine }));
    app.route('/', pushRoutes({ ...routeDeps, engine: deps.engine.engine }));
    app.route('/', capacityRoutes({ ...routeDeps, engine: deps.engine.engine }));
    app.route('/', streamRoutes({ ...routeDeps, ...deps.engine }));
    app.route('/', relocateRoutes({ ...routeDeps, ...deps.engine }));
    if (deps.team) {
      // Before the team routes: /api/team/schedules must win over /api/team/{agent_id}.
      app.route('/', scheduleRoutes({ ...routeDeps, scheduler: deps.team.scheduler }));
      app.route('/', teamRoutes({ ...routeDeps, ...deps.engine, ...deps.team }));
      app.route('/', mcpTeamRoutes({ ...routeDeps, team: deps.team.team, engine: deps.engine.engine }));
    }
    if (deps.web && webModule) {
      const { engine, registry, defaultProvider, environments } = deps.engine;
      const webDeps: WebDeps = {
        db: deps.db,
        engine,
        ...(deps.team ? { team: deps.team.team } : {}),
        environments,
        registry,
        defaultProvider,
        runnerHost: deps.host,
        watchRunners: (accountId, onChange) => deps.bus.subscribe(runnersTopic(accountId), () => onChange()),
        disconnectRunner: (runnerId) => deps.host.whereis(runnerId)?.close(CLOSE.runnerDeleted, 'runner deleted'),
        runnersEnabled: deps.runnersEnabled,
        publicUrl: deps.publicUrl ?? null,
        runnerVersion: async () => (await artifacts.get()).version,
        sessionSecret: deps.web.sessionSecret,
        secureCookies: deps.web.secureCookies ?? false,
        docs: async () => (await import('./web/docs.tsx')).loadDocs(),
        logger: deps.logger,
        ...(deps.credentials ? { credentials: deps.credentials } : {}),
        ...(deps.webhooks ? { webhooks: deps.webhooks } : {}),
      };
      let pages: Promise<ReturnType<WebModule['createWebApp']>> | null = null;
      // Where the pages were mounted before: after every API route, so none of them is shadowed;
      // what the pages do not serve falls to this app's not-found answer, as before.
      app.all('*', async (c, next) => {
        if (c.req.path.startsWith('/api/')) return next();
        pages ??= webModule().then((m) => m.createWebApp(webDeps).notFound(notFound));
        return forwardTo(await pages, c);
      });
    }
  }

  app.doc('/api/openapi.json', {
    openapi: '3.0.0',
    info: { title: 'Fountain API', version: deps.version ?? '0.0.0' },
  });

  return app;
}
