/**
 * Test support: a ConversationEngine on an embedded test database, driving a real `fountain runner`
 * child through a loopback hub with the demo agent. Used only by *.test.ts files.
 */
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { localDemoAgentArgv } from '../../acp/index.ts';
import { LocalRunnerHost, RunnerAdapter } from '../../providers/runner/index.ts';
import { startRunnerTestHub, type RunnerTestHub } from '../../providers/runner/test-hub.ts';
import { ProviderRegistry, type SandboxAdapter } from '../../sandbox/index.ts';
import { createAccount } from '../account/store.ts';
import { insertAgent } from '../agents/store.ts';
import type { Agent, PermissionPolicy } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { openTestDatabase, type TestDatabase, type TestDriver } from '../store/testing.ts';
import { ENGINE_DEFAULTS, type EngineConfig } from './config.ts';
import { ConversationEngine } from './engine.ts';
import { providerPlacement } from '../runners/placement.ts';
import { startRunnerChild, until, type RunnerChild } from './testing.ts';

const RUNNER_KEY = `ftn_${'ab'.repeat(32)}`;
const RUNNER_ID = '6f1c2d3e-4a5b-4c6d-8e7f-0123456789ab';

export interface EngineRig {
  readonly db: EngineDb;
  readonly accountId: string;
  /** The id the rig's runner is enrolled under. */
  readonly runnerId: string;
  readonly engine: ConversationEngine;
  /** A scratch directory removed by stop(). */
  readonly tmp: string;
  /** The runner's sandbox root. */
  readonly root: string;
  /** Another engine on the same database and runner, with its own config; the caller stops it. `adapter` may wrap the runner's (a runner that misbehaves). */
  engineWith(
    config: Partial<EngineConfig>,
    runnerKnown?: boolean,
    adapter?: (real: RunnerAdapter) => SandboxAdapter,
  ): ConversationEngine;
  /** A demo-runtime agent of the rig's account. */
  demoAgent(name: string, permissionPolicy?: PermissionPolicy, system?: string): Promise<Agent>;
  stop(): Promise<void>;
}

export async function startEngineRig(
  prefix: string,
  config: Partial<EngineConfig>,
  driver: TestDriver = 'pglite',
): Promise<EngineRig> {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), `fountain-${prefix}-`)));
  const root = join(tmp, 'sandboxes');
  const tdb: TestDatabase = await openTestDatabase(driver);
  const db = tdb.database.db as unknown as EngineDb;
  const accountId = (await createAccount(tdb.database.db, { name: 'owner', role: 'owner' })).id;
  const logger = pino({ level: 'silent' });
  const host = new LocalRunnerHost();
  const hub: RunnerTestHub = await startRunnerTestHub({ logger, host });
  hub.enroll('t', RUNNER_ID, accountId);
  const runner: RunnerChild = startRunnerChild({
    name: 't',
    root,
    baseUrl: hub.url.replace(/^ws/, 'http').replace(/\/api\/runners\/ws$/, ''),
    apiKey: RUNNER_KEY,
    home: tmp,
  });
  await until(() => host.whereis(RUNNER_ID), 'the runner to connect', 120_000);
  const engineWith = (
    c: Partial<EngineConfig>,
    runnerKnown = true,
    adapter: (real: RunnerAdapter) => SandboxAdapter = (a) => a,
  ) =>
    new ConversationEngine({
      db,
      registry: new ProviderRegistry([adapter(new RunnerAdapter(host, { logger }))], {}),
      placement: providerPlacement(host, {
        find: async (_a, id) =>
          runnerKnown && id === RUNNER_ID ? { id, name: 't', hostname: 'test', root } : undefined,
      }),
      logger,
      config: { ...ENGINE_DEFAULTS, publicUrl: null, demoAgentArgv: localDemoAgentArgv(), ...c },
      defaultProvider: 'runner',
    });
  const engine = engineWith(config);
  await engine.start();
  return {
    db,
    accountId,
    runnerId: RUNNER_ID,
    engine,
    tmp,
    root,
    engineWith,
    async demoAgent(name, permissionPolicy = {}, system = '') {
      const r = await insertAgent(db, accountId, {
        name,
        description: '',
        system,
        runtime: 'demo',
        model: 'fountain/demo',
        sandboxProvider: null,
        permissionPolicy,
        metadata: {},
      });
      if (!r.ok) throw new Error(`inserting agent ${name} failed: ${JSON.stringify(r)}`);
      return r.agent;
    },
    async stop() {
      await engine.stop();
      await runner.stop();
      await hub.close();
      await tdb.dispose();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
