/**
 * Starts a whole server in this process: store, migrations, bootstrap, the Hono app on node's
 * http server, and the runner WebSocket upgrade. Used by `fountain server` and by end-to-end tests.
 */
import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import pino, { type Logger } from 'pino';
import { acceptRunnerSocket } from '../providers/runner/connection.ts';
import type { RunnerHost } from '../providers/runner/host.ts';
import { CLOSE } from '../wire/index.ts';
import { createApp } from './app.ts';
import { ClusterRunnerHost } from './cluster-host.ts';
import { bootstrap } from './bootstrap.ts';
import { parseServerConfig, type Env, type ServerConfig } from './config.ts';
import { EventBus } from './events.ts';
import { createRunnerHost, createUpgradeHandler, type AcceptRunnerSocket } from './runner-hub.ts';
import { checkDefaultProvider, hostedAdapters } from './registry.ts';
import { openDatabase, type Database } from './store/db.ts';
import type { ProviderRegistry } from '../sandbox/registry.ts';
import { createEngine, mintEngineNodeId, type ConversationEngine, type EngineConfig } from './engine/index.ts';
import type { SandboxAdapter } from '../sandbox/index.ts';
import { sessionSecretFrom } from './web/session.ts';
import { announceEvents, PgBusBridge } from './cluster.ts';
import { Scheduler, SCHEDULER_DEFAULTS, type SchedulerConfig } from './engine/scheduler.ts';
import { TeamService } from './engine/team.ts';
import { audit } from './store/audit.ts';
import type { EngineDb } from './store/engine-db.ts';
import { CredentialService } from './credentials/service.ts';
import { loadSecretKey } from './credentials/secret-key.ts';

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
  /** SSE heartbeat interval; default 15 s. */
  readonly sseHeartbeatMs?: number;
  /** Scheduler overrides on top of the environment (tests shorten the tick and the snooze). */
  readonly scheduler?: Partial<SchedulerConfig>;
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
  readonly config: ServerConfig;
  readonly database: Database;
  readonly host: RunnerHost;
  /** The adapters this configuration turns on; SANDBOX_PROVIDER was checked against it at boot. */
  readonly registry: ProviderRegistry;
  readonly bus: EventBus;
  readonly engine: ConversationEngine;
  readonly team: TeamService;
  readonly scheduler: Scheduler;
  /** The LISTEN/NOTIFY bridge of the event bus; null on PGlite (one process). */
  readonly bridge: PgBusBridge | null;
  /** The Hono app, for tests that inspect its routes. */
  readonly app: ReturnType<typeof createApp>;
  /** Closes runner sockets (1001), the HTTP server and the database. Safe to call twice. */
  stop(): Promise<void>;
}

export async function startServer(opts: StartServerOptions): Promise<RunningServer> {
  const env = opts.env ?? process.env;
  const config = parseServerConfig(env);
  // Before the database opens, so a wrong default costs nothing.
  checkDefaultProvider(config, env);
  const logger = opts.logger ?? pino({ enabled: false });
  mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  // Before the database opens: a malformed FOUNTAIN_SECRET_KEY stops the boot at once.
  const secretKey = loadSecretKey(env, opts.dataDir);

  const database = await openDatabase({ url: config.databaseUrl, dataDir: opts.dataDir, schema: opts.databaseSchema });
  let server: Server | undefined;
  let engine: ConversationEngine | undefined;
  let scheduler: Scheduler | undefined;
  let bridge: PgBusBridge | null = null;
  let unannounce: (() => void) | undefined;
  let clusterHost: ClusterRunnerHost | undefined;
  try {
    if (database.migrated.length) logger.info({ migrations: database.migrated }, 'database migrated');
    const boot = await bootstrap(database.db, { dataDir: opts.dataDir, presetKey: config.bootstrapKey });
    const bus = new EventBus();
    const credentials = new CredentialService(database.db as unknown as EngineDb, secretKey);
    if (database.kind === 'postgres' && config.databaseUrl) {
      bridge = await PgBusBridge.start({ url: config.databaseUrl, schema: opts.databaseSchema, bus, logger });
    }
    // PostgreSQL may be shared by several nodes; PGlite is one process by construction.
    const cluster =
      database.kind === 'postgres' && config.databaseUrl
        ? await ClusterRunnerHost.start({
            url: config.databaseUrl,
            schema: opts.databaseSchema,
            db: database.db,
            bus,
            logger,
            heartbeatMs: config.runnerHeartbeatMs,
            callTimeoutMs: config.runnerCallTimeoutMs,
            nodeExpiryMs: config.nodeExpiryMs,
          })
        : undefined;
    clusterHost = cluster;
    const host: RunnerHost = cluster ?? createRunnerHost({ db: database.db, bus, logger });
    const wired = createEngine({
      db: database.db,
      logger,
      host,
      env,
      adapters: opts.adapters ?? hostedAdapters(config, { logger }),
      config: {
        maxLifetimeMs: config.maxLifetimeMs,
        brokerAllowUnenforced: config.brokerAllowUnenforced,
        nodeHeartbeatMs: config.nodeHeartbeatMs,
        nodeExpiryMs: config.nodeExpiryMs,
        ...opts.engine,
      },
      // On PostgreSQL other nodes may share the database: only work of nodes whose heartbeat expired is adopted.
      node: { id: cluster?.nodeId ?? mintEngineNodeId(), shared: cluster !== undefined },
      credentials,
    });
    engine = wired.engine;
    await engine.start();
    unannounce = announceEvents(engine.events, bus);
    const auditTeam = (accountId: string, action: string, subjectId: string, data?: Record<string, unknown>) =>
      audit(database.db, { accountId, actor: 'api', action, subjectId, data: data ?? {} });
    const team = new TeamService({ db: database.db as unknown as EngineDb, engine, bus, logger, audit: auditTeam });
    scheduler = new Scheduler({
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
    const app = createApp({
      db: database.db,
      logger,
      host,
      bus,
      runnersEnabled: config.runnersEnabled,
      credentials,
      ...(opts.version ? { version: opts.version } : {}),
      engine: { ...wired, ...(opts.sseHeartbeatMs ? { sseHeartbeatMs: opts.sseHeartbeatMs } : {}) },
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
    const srv = createAdaptorServer({ fetch: app.fetch }) as Server;
    server = srv;
    srv.on('upgrade', upgrade);
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
    const urlHost = hostname.includes(':') ? `[${hostname}]` : hostname;
    // Without PUBLIC_URL, sandboxes on this machine (runners) still reach the server where it listens.
    engine.sandboxTokens.defaultBaseUrl(`http://${urlHost}:${port}`);

    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        upgrade.close();
        await scheduler!.stop();
        // Detach from agent processes and flush queued events while the database is still open.
        await engine!.stop();
        // A cluster host lists every node's runners; only this node's sockets are ours to close.
        if (cluster) await cluster.shutdown();
        else for (const info of host.online()) host.whereis(info.runnerId)?.close(CLOSE.goingAway, 'server shutting down');
        await new Promise<void>((resolve) => {
          srv.close(() => resolve());
          srv.closeAllConnections();
        });
        unannounce?.();
        await bridge?.stop();
        await database.close();
      })());

    return {
      url: `http://${urlHost}:${port}`,
      port,
      bootstrapKey: boot.key,
      bootstrapCreated: boot.created,
      bootstrapKeyFile: boot.keyFile,
      config,
      database,
      host,
      registry: wired.registry,
      bus,
      engine: engine!,
      team,
      scheduler,
      bridge,
      app,
      stop,
    };
  } catch (e) {
    server?.close();
    await scheduler?.stop();
    await engine?.stop();
    unannounce?.();
    await bridge?.stop();
    await clusterHost?.shutdown();
    await database.close();
    throw e;
  }
}
