/**
 * SANDBOX_MAX_LIFETIME_HOURS enforced by the engine's sweep (contract.md §8, platform-api.md §9), on a
 * real `fountain runner` child with the demo agent and a lifetime shrunk through the engine config.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { localDemoAgentArgv } from '../../acp/index.ts';
import { LocalRunnerHost, RunnerAdapter } from '../../providers/runner/index.ts';
import { startRunnerTestHub, type RunnerTestHub } from '../../providers/runner/test-hub.ts';
import { ProviderRegistry } from '../../sandbox/index.ts';
import { createAccount } from '../store/accounts.ts';
import { insertAgent } from '../store/agents.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { openTestDatabase, type TestDatabase } from '../store/testing.ts';
import { ENGINE_DEFAULTS } from './config.ts';
import { ConversationEngine } from './engine.ts';
import { allEvents, startRunnerChild, until, waitForStage, type RunnerChild } from './testing.ts';

const KEY = `ftn_${'cd'.repeat(32)}`;
const RUNNER_ID = '7a1c2d3e-4a5b-4c6d-8e7f-0123456789ab';

describe('max lifetime', () => {
  let tdb: TestDatabase;
  let db: EngineDb;
  let hub: RunnerTestHub;
  let runner: RunnerChild;
  let engine: ConversationEngine;
  let accountId: string;
  let tmp: string;
  const root = () => join(tmp, 'sandboxes');

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-lifetime-')));
    tdb = await openTestDatabase('pglite');
    db = tdb.database.db as unknown as EngineDb;
    accountId = (await createAccount(tdb.database.db, { name: 'owner', role: 'owner' })).id;
    const logger = pino({ level: 'silent' });
    const host = new LocalRunnerHost();
    hub = await startRunnerTestHub({ logger, host });
    hub.enroll('t', RUNNER_ID, accountId);
    runner = startRunnerChild({ name: 't', root: root(), baseUrl: hub.url.replace(/^ws/, 'http').replace(/\/api\/runners\/ws$/, ''), apiKey: KEY, home: tmp });
    await until(() => host.whereis(RUNNER_ID), 'the runner to connect', 90_000);
    engine = new ConversationEngine({
      db,
      registry: new ProviderRegistry([new RunnerAdapter(host, { logger })], {}),
      runnerHost: host,
      runners: { find: async (_a, id) => (id === RUNNER_ID ? { id, name: 't', hostname: 'test', root: root() } : undefined) },
      logger,
      // Idle parking off, so only the lifetime bound can act; the sweep is called by hand.
      config: { ...ENGINE_DEFAULTS, idleTimeoutMs: 0, maxLifetimeMs: 50, sweepIntervalMs: 3_600_000, publicUrl: null, demoAgentArgv: localDemoAgentArgv() },
      defaultProvider: 'runner',
    });
    await engine.start();
  });

  after(async () => {
    await engine?.stop();
    await runner?.stop();
    await hub?.close();
    await tdb?.dispose();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('destroys a sandbox past its lifetime; the conversation stays idle and the next prompt starts a fresh one', async () => {
    const agent = await insertAgent(db, accountId, {
      name: 'demo',
      description: '',
      system: '',
      runtime: 'demo',
      model: 'fountain/demo',
      sandboxProvider: null,
      permissionPolicy: {},
      metadata: {},
    });
    assert.ok(agent.ok);
    const created = await engine.create(accountId, { agentId: agent.agent.id, prompt: 'remember: 7' });
    assert.ok(created.ok, JSON.stringify(created));
    const id = created.value.id;
    const first = created.value.sandbox!.name;
    await waitForStage(db, id, 'turn', 'done');
    const dir = join(root(), first);
    assert.ok(existsSync(dir));

    // Lifetime counts from creation: a sweep "now" (well past 50 ms) reclaims.
    const reclaimedCount = await engine.sweep(new Date(Date.now() + 1000));
    assert.equal(reclaimedCount, 1);
    const ev = await waitForStage(db, id, 'sandbox', 'done');
    const data = JSON.parse(ev.data) as { event: string; reason: string };
    assert.deepEqual([data.event, data.reason], ['reclaimed', 'max_lifetime']);
    assert.ok(!existsSync(dir), 'the runner destroyed the sandbox directory');
    const after = await engine.get(accountId, id);
    assert.ok(after.ok);
    assert.equal(after.value.status, 'idle');
    assert.equal(after.value.sandbox?.status, 'terminated');
    assert.equal(await engine.sweep(new Date(Date.now() + 1000)), 0, 'a reclaimed sandbox is not reclaimed twice');

    const mark = (await allEvents(db, id)).at(-1)!.id;
    const p = await engine.prompt(accountId, id, 'hello again');
    assert.ok(p.ok, JSON.stringify(p));
    await waitForStage(db, id, 'turn', 'done', mark);
    const reset = await waitForStage(db, id, 'session', 'done', mark);
    assert.equal((JSON.parse(reset.data) as { reason: string }).reason, 'fresh_sandbox');
    const fresh = await engine.get(accountId, id);
    assert.ok(fresh.ok && fresh.value.sandbox?.name !== first && fresh.value.sandbox?.status === 'ready');
  });
});
