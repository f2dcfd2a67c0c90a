/**
 * The stack the browser tests drive: PGlite store, the conversation engine on a real `fountain runner`
 * child (process backend, demo agent) dialing a loopback runner hub, and the web app on 127.0.0.1:0.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve, type ServerType } from '@hono/node-server';
import pino from 'pino';
import { localDemoAgentArgv } from '../../src/acp/index.ts';
import { LocalRunnerHost, RunnerAdapter } from '../../src/providers/runner/index.ts';
import { startRunnerTestHub, type RunnerTestHub } from '../../src/providers/runner/test-hub.ts';
import { SpritesAdapter } from '../../src/providers/sprites/index.ts';
import { ProviderRegistry } from '../../src/sandbox/index.ts';
import { ENGINE_DEFAULTS } from '../../src/server/engine/config.ts';
import { ConversationEngine } from '../../src/server/engine/engine.ts';
import { createAccount } from '../../src/server/store/accounts.ts';
import type { EngineDb } from '../../src/server/store/engine-db.ts';
import { createApiKey } from '../../src/server/store/keys.ts';
import { findRunner, upsertRunner } from '../../src/server/store/runners.ts';
import { openTestDatabase, type TestDatabase } from '../../src/server/store/testing.ts';
import { createWebApp } from '../../src/server/web/app.tsx';
import { loadDocs } from '../../src/server/web/docs.tsx';

const FOUNTAIN_BIN = fileURLToPath(new URL('../../bin/fountain.js', import.meta.url));
export const RUNNER_ID = '7a1c2d3e-4a5b-4c6d-8e7f-0123456789ab';
export const RUNNER_NAME = 'mac-mini';

export interface Stack {
  readonly url: string;
  readonly apiKey: string;
  readonly accountId: string;
  readonly db: EngineDb;
  readonly tdb: TestDatabase;
  readonly host: LocalRunnerHost;
  /** The registry reads this object live: setting SPRITES_TOKEN turns a second provider on. */
  readonly env: Record<string, string | undefined>;
  startRunner(): Promise<void>;
  stopRunner(): Promise<void>;
  stop(): Promise<void>;
}

export async function until<T>(check: () => T | Promise<T>, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function startStack(): Promise<Stack> {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-web-')));
  const root = join(tmp, 'sandboxes');
  const logger = pino({ level: 'silent' });
  const tdb = await openTestDatabase('pglite');
  const db = tdb.database.db as unknown as EngineDb;
  const account = await createAccount(tdb.database.db, { name: 'owner', role: 'owner' });
  const { key: apiKey } = await createApiKey(tdb.database.db, { accountId: account.id, name: 'test', scopes: ['full'] });

  const watchers = new Set<{ accountId: string; fn: () => void }>();
  const host = new LocalRunnerHost({
    presence: (info) => {
      for (const w of watchers) if (w.accountId === info.accountId) w.fn();
    },
  });
  const hub: RunnerTestHub = await startRunnerTestHub({ logger, host });
  hub.enroll(RUNNER_NAME, RUNNER_ID, account.id);
  // The real hub upserts the row on registration; the test hub leaves that to us.
  await tdb.database.db.insert((await import('../../src/server/store/schema.ts')).runners).values({
    id: RUNNER_ID,
    accountId: account.id,
    name: RUNNER_NAME,
    hostname: 'mac-mini.local',
    version: '0.1.0',
    root,
  });

  const env: Record<string, string | undefined> = {};
  const registry = new ProviderRegistry([new RunnerAdapter(host, { logger }), new SpritesAdapter({ baseUrl: 'http://127.0.0.1:9' } as never)], env);
  const engine = new ConversationEngine({
    db,
    registry,
    runnerHost: host,
    runners: {
      find: async (accountId, id) => {
        const r = await findRunner(tdb.database.db, accountId, id);
        return r ? { id: r.id, name: r.name, hostname: r.hostname, root: r.root } : undefined;
      },
    },
    logger,
    config: { ...ENGINE_DEFAULTS, idleTimeoutMs: 0, askTimeoutMs: 120_000, publicUrl: null, demoAgentArgv: localDemoAgentArgv() },
    defaultProvider: 'runner',
  });
  await engine.start();

  const app = createWebApp({
    db,
    engine,
    registry,
    defaultProvider: 'runner',
    runnerHost: host,
    watchRunners: (accountId, fn) => {
      const w = { accountId, fn };
      watchers.add(w);
      return () => watchers.delete(w);
    },
    disconnectRunner: (id) => host.whereis(id)?.close(4000, 'runner deleted'),
    runnersEnabled: true,
    sessionSecret: 'x'.repeat(40),
    docs: loadDocs(),
    logger,
    refreshMs: 500,
  });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const hubBase = hub.url.replace(/^ws/, 'http').replace(/\/api\/runners\/ws$/, '');

  let child: ChildProcess | null = null;
  const startRunner = async () => {
    const c = spawn(process.execPath, [FOUNTAIN_BIN, 'runner', '--name', RUNNER_NAME, '--root', root, '--log-level', 'warn'], {
      env: { ...process.env, FOUNTAIN_API_KEY: apiKey, FOUNTAIN_BASE_URL: hubBase, FOUNTAIN_PROFILE: '', FOUNTAIN_HOME: tmp, FOUNTAIN_LOG_FORMAT: 'json' },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    child = c;
    await until(() => host.whereis(RUNNER_ID), 'the runner to connect');
    await upsertRunner(tdb.database.db, account.id, { name: RUNNER_NAME, hostname: 'mac-mini.local', version: '0.1.0', root });
  };
  const stopRunner = async () => {
    const c = child;
    child = null;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    const t = setTimeout(() => c.kill('SIGKILL'), 8000);
    await exited;
    clearTimeout(t);
    await until(() => !host.whereis(RUNNER_ID), 'the runner to drop');
  };

  return {
    url,
    apiKey,
    accountId: account.id,
    db,
    tdb,
    host,
    env,
    startRunner,
    stopRunner,
    stop: async () => {
      await engine.stop();
      await stopRunner();
      server.close();
      await hub.close();
      await tdb.dispose();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
