/**
 * The composition root: the one place that wires every part of a server (store, bootstrap, cluster,
 * providers, engine, team, scheduler, the Hono app, the runner upgrade) on a start/stop stack.
 * `fountain server` and `fountain up` start through it, and so do end-to-end tests.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { getRequestListener } from '@hono/node-server';
import pino, { type Logger } from 'pino';
import { acceptRunnerSocket } from '../providers/runner/connection.ts';
import type { RunnerHost } from '../providers/runner/host.ts';
import { CLOSE } from '../wire/index.ts';
import { createApp } from './app.ts';
import { ClusterRunnerHost } from './runners/cluster-host.ts';
import { shareKeyChanges } from './cluster/keys.ts';
import { bootstrap } from './account/bootstrap.ts';
import { ConfigError, parseServerConfig, type Env, type ServerConfig } from './config.ts';
import { EventBus } from './cluster/bus.ts';
import { createRunnerHost, createUpgradeHandler, type AcceptRunnerSocket } from './runners/hub.ts';
import { checkDefaultProvider, defaultProviderOf, hostedAdapters, PROVIDER_WIRING } from './registry.ts';
import type { Database } from './store/db.ts';
import { openServerDatabase } from './database.ts';
import type { Logger as QueryLogger } from 'drizzle-orm';
import { ProviderRegistry } from '../sandbox/registry.ts';
import { ConversationEngine, engineConfigFromEnv, type EngineConfig } from './conversations/index.ts';
import { mintNodeId } from './cluster/node.ts';
import { ownerLinkOver } from './conversations/commands.ts';
import type { PgNotify } from './cluster/notify.ts';
import { demoAgentArgv } from '../acp/index.ts';
import { providerPlacement } from './runners/placement.ts';
import { findRunner, findRunnerByName } from './runners/store.ts';
import { StopStack } from './lifecycle.ts';
import type { SandboxAdapter } from '../sandbox/index.ts';
import { sessionSecretFrom } from './web/session.ts';
import { announceEvents, PgBusBridge } from './cluster/bridge.ts';
import { Scheduler, SCHEDULER_DEFAULTS, type SchedulerConfig } from './team/scheduler.ts';
import { TeamService } from './team/service.ts';
import { audit } from './account/audit.ts';
import type { EngineDb } from './store/engine-db.ts';
import { CredentialService } from './credentials/service.ts';
import { loadSecretKey } from './credentials/secret-key.ts';
import { EnvironmentService } from './environments/service.ts';
import { type WebhookConfig, WebhookService } from './webhooks/service.ts';
import { CheckpointService } from './checkpoints/service.ts';
import { DiskBlobStore } from './checkpoints/blobs-disk.ts';
import { DbBlobStore } from './checkpoints/blobs-db.ts';
import { ModelGateway } from './gateway/gateway.ts';
import { UsageService } from './gateway/service.ts';

export interface StartServerOptions {
  /** Data directory: PGlite files (unless FOUNTAIN_DATABASE_URL) and the bootstrap-key file. */
  readonly dataDir: string;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Default 4000; 0 picks a free port (see `url`). */
  readonly port?: number;
  /** The environment to configure from; default process.env. */
  readonly env?: Env;
  /** Default: a disabled logger. */
  readonly logger?: Logger;
  /** With FOUNTAIN_DATABASE_URL: a schema of its own (created if missing), so tests can share one database. */
  readonly databaseSchema?: string;
  /** Version reported in the OpenAPI document. */
  readonly version?: string;
  /** Default: the real server end of the runner socket (providers/runner/connection.ts). */
  readonly acceptRunnerSocket?: AcceptRunnerSocket;
  /** Hosted sandbox adapters to register beside the runner adapter; default: those the configuration turns on. */
  readonly adapters?: readonly SandboxAdapter[];
  /** Engine overrides on top of the environment (tests shrink the idle timeout and sweep interval). */
  readonly engine?: Partial<EngineConfig>;
  /** How long a conversation stays quiet after a turn before its checkpoint is taken (default 1 s; tests). */
  readonly checkpointQuietMs?: number;
  /** SSE heartbeat interval; default 15 s. */
  readonly sseHeartbeatMs?: number;
  /** Scheduler overrides on top of the environment (tests shorten the tick and the snooze). */
  readonly scheduler?: Partial<SchedulerConfig>;
  /** Told every statement the query builder sends (the turn benchmark counts statements per turn). */
  readonly queryLogger?: QueryLogger | undefined;
  /** Webhook overrides (tests shorten the tick and the retry delays). */
  readonly webhooks?: Partial<WebhookConfig>;
  /**
   * The database's open, begun earlier with openServerDatabase (database.ts) for the same data directory
   * and environment, so it ran while this module loaded; the server owns it from here (closes it on a
   * failed start and at stop). Default: opened here.
   */
  readonly database?: Promise<Database>;
}

export interface RunningServer {
  /** `http://<host>:<port>` with the real port. */
  readonly url: string;
  readonly port: number;
  /** The owner's first key (from this start or the bootstrap-key file), null if neither has it. */
  readonly bootstrapKey: string | null;
  /** True when this start created the owner account. */
  readonly bootstrapCreated: boolean;
  readonly bootstrapKeyFile: string;
  /** This start created the owner and its key (a first start); later starts find them. */
  readonly bootstrapKeyCreated: boolean;
  readonly config: ServerConfig;
  readonly database: Database;
  readonly host: RunnerHost;
  /** The adapters this configuration turns on; SANDBOX_PROVIDER was checked against it at boot. */
  readonly registry: ProviderRegistry;
  readonly bus: EventBus;
  readonly engine: ConversationEngine;
  readonly team: TeamService;
  readonly scheduler: Scheduler;
  readonly webhooks: WebhookService;
  /** The LISTEN/NOTIFY bridge of the event bus; null on PGlite (one process). */
  readonly bridge: PgBusBridge | null;
  /** The Hono app, for tests that inspect its routes. */
  readonly app: ReturnType<typeof createApp>;
  /** Closes runner sockets (1001), the HTTP server and the database. Safe to call twice. */
  stop(): Promise<void>;
}

export async function startServer(opts: StartServerOptions): Promise<RunningServer> {
  const env = opts.env ?? process.env;
  let config: ServerConfig;
  let engineEnv: Omit<EngineConfig, 'demoAgentArgv'>;
  let secretKey: ReturnType<typeof loadSecretKey>;
  try {
    config = parseServerConfig(env);
    // Before the database opens (unless it was begun earlier), so a wrong default costs nothing.
    checkDefaultProvider(config, env);
    const parsed = engineConfigFromEnv(env);
    if (!parsed.ok) throw new ConfigError('environment', parsed.message);
    engineEnv = parsed.value;
    mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
    // A malformed FOUNTAIN_SECRET_KEY stops the boot at once.
    secretKey = loadSecretKey(env, opts.dataDir);
  } catch (e) {
    // The configuration's error is the one to report; a database begun early is only closed.
    await opts.database?.then(
      (d) => d.close(),
      () => undefined,
    );
    throw e;
  }
  const logger = opts.logger ?? pino({ enabled: false });

  const stack = new StopStack(logger);
  const database = await (opts.database ??
    openServerDatabase({
      dataDir: opts.dataDir,
      env,
      databaseSchema: opts.databaseSchema,
      queryLogger: opts.queryLogger,
    }));
  stack.push('database', () => database.close());
  try {
    if (database.templateError) logger.warn(database.templateError);
    if (database.migrated.length) logger.info({ migrations: database.migrated }, 'database migrated');
    const boot = await bootstrap(database.db, { dataDir: opts.dataDir, presetKey: config.bootstrapKey });
    const bus = new EventBus();
    const credentials = new CredentialService(database.db as unknown as EngineDb, secretKey);
    // PostgreSQL may be shared by several nodes; PGlite is one process by construction.
    const shared = database.kind === 'postgres' && !!config.databaseUrl;
    const nodeId = mintNodeId();
    let bridge: PgBusBridge | null = null;
    let notify: PgNotify | null = null;
    if (shared) {
      // Imported only here: node-postgres is not loaded on the embedded database (start-up).
      const pgNotify = await (await import('./cluster/notify.ts')).PgNotify.open({
        url: config.databaseUrl!,
        schema: opts.databaseSchema,
        logger: logger.child({ node: nodeId }),
        name: `fountain-notify-${nodeId}`,
      });
      notify = pgNotify;
      stack.push('notification connection', () => pgNotify.close());
      bridge = await PgBusBridge.start({ nodeId, notify: pgNotify, schema: opts.databaseSchema, bus, logger });
      stack.push('bus bridge', () => bridge!.stop());
      stack.push('key changes', shareKeyChanges(bus, nodeId));
    }
    // The HTTP server exists before what it serves, so it closes after the runner sockets and before the bridge.
    let app: ReturnType<typeof createApp> | undefined;
    const gateway = new ModelGateway({
      db: database.db,
      credentials,
      logger: logger.child({ part: 'gateway' }),
      prices: config.modelPrices,
      nodeId,
    });
    const listener = getRequestListener((req: Request, envArg: unknown) => app!.fetch(req, envArg));
    // Model calls bypass Hono: their bodies stream both ways untouched, past the API's body limits.
    const srv: Server = createServer((req, res) =>
      ModelGateway.matches(req.url) ? gateway.handle(req, res) : listener(req, res),
    );
    stack.push('model gateway', () => gateway.close());
    stack.push(
      'http server',
      () =>
        new Promise<void>((resolve) => {
          srv.close(() => resolve());
          srv.closeAllConnections();
        }),
    );
    const cluster = notify
      ? await ClusterRunnerHost.start({
          nodeId,
          notify,
          schema: opts.databaseSchema,
          db: database.db,
          bus,
          logger,
          heartbeatMs: config.runnerHeartbeatMs,
          callTimeoutMs: config.runnerCallTimeoutMs,
          nodeExpiryMs: config.nodeExpiryMs,
        })
      : undefined;
    const host: RunnerHost = cluster ?? createRunnerHost({ db: database.db, bus, logger });
    // A cluster host lists every node's runners; only this node's sockets are ours to close.
    stack.push('runner sockets', async () => {
      if (cluster) await cluster.shutdown();
      else
        for (const info of host.online()) host.whereis(info.runnerId)?.close(CLOSE.goingAway, 'server shutting down');
    });

    const registry = new ProviderRegistry(
      [
        await PROVIDER_WIRING.runner.build(config, { host, logger }),
        ...(opts.adapters ?? (await hostedAdapters(config, { logger }))),
      ],
      env,
    );
    const engineConfig: EngineConfig = {
      ...engineEnv,
      demoAgentArgv: demoAgentArgv(),
      maxLifetimeMs: config.maxLifetimeMs,
      brokerAllowUnenforced: config.brokerAllowUnenforced,
      nodeHeartbeatMs: config.nodeHeartbeatMs,
      nodeExpiryMs: config.nodeExpiryMs,
      ...opts.engine,
    };
    const defaultProvider = defaultProviderOf(config, registry);
    // The same server key seals environment secrets at rest.
    const environments = new EnvironmentService(database.db as unknown as EngineDb, secretKey);
    // Checkpoint blobs: in the data directory on the embedded database, in PostgreSQL otherwise, so any
    // node of a cluster without a shared disk restores them.
    // Prompt images share the store: one copy per digest, kept while a turn or a checkpoint names it.
    const blobs =
      database.kind === 'postgres'
        ? new DbBlobStore(database.db, secretKey)
        : new DiskBlobStore(join(opts.dataDir, 'blobs'), secretKey);
    const checkpoints = new CheckpointService({
      db: database.db as unknown as EngineDb,
      blobs,
      logger,
      ...(opts.checkpointQuietMs !== undefined ? { quietMs: opts.checkpointQuietMs } : {}),
    });
    const collecting = setInterval(() => {
      checkpoints.collect().catch((e: unknown) => logger.warn({ err: String(e) }, 'checkpoint blob collection failed'));
    }, 3_600_000);
    collecting.unref();
    stack.push('checkpoint collection', () => clearInterval(collecting));
    const engine = new ConversationEngine({
      environments,
      db: database.db as unknown as EngineDb,
      registry,
      placement: providerPlacement(host, {
        find: async (accountId, runnerId) => {
          const r = await findRunner(database.db, accountId, runnerId);
          return r ? { id: r.id, name: r.name, hostname: r.hostname, root: r.root } : undefined;
        },
        findByName: async (accountId, name) => {
          const r = await findRunnerByName(database.db, accountId, name);
          return r ? { id: r.id, name: r.name, hostname: r.hostname, root: r.root } : undefined;
        },
      }),
      logger,
      config: engineConfig,
      defaultProvider,
      // On PostgreSQL other nodes may share the database: only work of nodes whose heartbeat expired is adopted.
      node: { id: nodeId, shared: cluster !== undefined },
      bus,
      ...(cluster ? { link: ownerLinkOver(cluster) } : {}),
      credentials,
      checkpoints,
      images: blobs,
    });
    const unannounce = announceEvents(engine.events, bus, nodeId);
    stack.push('event announcements', unannounce);
    await engine.start();
    // Detaches from agent processes and flushes queued events while the database is still open.
    stack.push('engine', () => engine.stop());
    stack.push('checkpoints being taken', () => checkpoints.settled());

    const auditTeam = (accountId: string, action: string, subjectId: string, data?: Record<string, unknown>) =>
      audit(database.db, { accountId, actor: 'api', action, subjectId, data: data ?? {} });
    const team = new TeamService({ db: database.db as unknown as EngineDb, engine, bus, logger, audit: auditTeam });
    const scheduler = new Scheduler({
      db: database.db as unknown as EngineDb,
      team,
      bus,
      logger,
      audit: auditTeam,
      config: {
        ...SCHEDULER_DEFAULTS,
        tickMs: config.scheduleTickMs,
        snoozeMs: config.scheduleSnoozeMs,
        patienceMs: config.schedulePatienceMs,
        ...opts.scheduler,
      },
    });
    stack.push('scheduler', () => scheduler.stop());
    const webhooks = new WebhookService({
      db: database.db as unknown as EngineDb,
      key: secretKey,
      logger,
      bus,
      audit: auditTeam,
      config: opts.webhooks ?? {},
    });
    stack.push('webhooks', () => webhooks.stop());
    app = createApp({
      db: database.db,
      logger,
      host,
      bus,
      runnersEnabled: config.runnersEnabled,
      publicUrl: config.publicUrl,
      credentials,
      webhooks,
      usage: new UsageService(database.db as unknown as EngineDb),
      ...(opts.version ? { version: opts.version } : {}),
      engine: {
        engine,
        registry,
        defaultProvider,
        environments,
        publicUrl: config.publicUrl,
        ...(opts.sseHeartbeatMs ? { sseHeartbeatMs: opts.sseHeartbeatMs } : {}),
      },
      web: { sessionSecret: sessionSecretFrom(env, opts.dataDir) },
      team: { team, scheduler },
    });
    const upgrade = createUpgradeHandler({
      db: database.db,
      logger,
      host,
      runnersEnabled: config.runnersEnabled,
      accept: opts.acceptRunnerSocket ?? acceptRunnerSocket,
      heartbeatMs: config.runnerHeartbeatMs,
      callTimeoutMs: config.runnerCallTimeoutMs,
    });
    srv.on('upgrade', upgrade);
    stack.push('runner upgrades', () => upgrade.close());
    const hostname = opts.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(opts.port ?? 4000, hostname, () => {
        srv.off('error', reject);
        resolve();
      });
    });
    const port = (srv.address() as AddressInfo).port;
    scheduler.start();
    webhooks.start();
    const urlHost = hostname.includes(':') ? `[${hostname}]` : hostname;
    // Without PUBLIC_URL, sandboxes on this machine (runners) still reach the server where it listens.
    engine.sandboxTokens.defaultBaseUrl(`http://${urlHost}:${port}`);

    return {
      url: `http://${urlHost}:${port}`,
      port,
      bootstrapKey: boot.key,
      bootstrapCreated: boot.created,
      bootstrapKeyFile: boot.keyFile,
      bootstrapKeyCreated: boot.created,
      config,
      database,
      host,
      registry,
      bus,
      engine,
      team,
      scheduler,
      webhooks,
      bridge,
      app,
      stop: () => stack.stop(),
    };
  } catch (e) {
    await stack.stop();
    throw e;
  }
}
