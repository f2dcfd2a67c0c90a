/**
 * One capacity queue for the whole cluster: two real server processes on one PostgreSQL schema, the
 * server-wide limit of one running turn per account (FOUNTAIN_MAX_RUNNING_TURNS), a real runner on
 * node A and the demo agent. Conversations queued through either node wait in one line, in the order
 * they came, and each starts exactly once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allEvents, startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { openDatabase, type Database } from '../src/server/store/db.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { call, type Json } from './helpers/http.ts';
import { spawnClusterPair, stopClusterNodes, type NodeProcess } from './fixtures/cluster-node-process.ts';

const KEY = `ftn_${randomBytes(32).toString('hex')}`;

describe('the capacity queue across two server nodes', { timeout: 600_000 }, () => {
  const schema = uniqueSchemaName();
  const env = {
    FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
    FOUNTAIN_BOOTSTRAP_KEY: KEY,
    FOUNTAIN_RUNNER_HEARTBEAT_MS: '500',
    FOUNTAIN_NODE_HEARTBEAT_MS: '200',
    FOUNTAIN_NODE_EXPIRY_MS: '3000',
    FOUNTAIN_MAX_RUNNING_TURNS: '1',
  };
  let tmp: string;
  let observer: Database;
  let a: NodeProcess;
  let b: NodeProcess;
  let runner: RunnerChild;
  let agentId: string;

  const turnsOf = async (base: string, conv: string): Promise<Json[]> =>
    (await call(base, KEY, 'GET', `/api/conversations/${conv}/turns`)).body.data as Json[];
  const completed = (base: string, conv: string) =>
    until(
      async () => {
        const t = (await turnsOf(base, conv))[0];
        return t?.status === 'completed' ? t : undefined;
      },
      `${conv} completed`,
      120_000,
    );
  const start = async (base: string, prompt: string): Promise<Json> => {
    const r = await call(base, KEY, 'POST', '/api/conversations', { agent_id: agentId, prompt });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.data;
  };

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cluster-queue-')));
    [a, b] = await spawnClusterPair(schema, env);
    observer = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    runner = startRunnerChild({ name: 'r', root: join(tmp, 'sandboxes'), baseUrl: a.url, apiKey: KEY, home: tmp });
    await until(
      async () => ((await call(b.url, KEY, 'GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner, seen from node B',
      60_000,
    );
    const agent = await call(a.url, KEY, 'POST', '/api/agents', {
      name: 'demo',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { execute: 'ask' },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    agentId = agent.body.data.id;
  });

  after(async () => {
    await runner?.stop();
    await stopClusterNodes(a, b);
    await observer?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('conversations queued through either node wait in one line and run in order, each started once', async () => {
    const limits = await call(b.url, KEY, 'GET', '/api/account/limits');
    assert.deepEqual([limits.body.data.max_running_turns, limits.body.data.own.max_running_turns], [1, null]);

    const first = await start(a.url, 'run: echo first');
    const request = await until(
      async () => (await turnsOf(b.url, first.id))[0]?.pending_permission?.request_id as string | undefined,
      'the first turn asking',
      120_000,
    );
    // Queued through B, then through A: A counts B's entry ahead of its own.
    const second = await start(b.url, 'echo second');
    const third = await start(a.url, 'echo third');
    assert.equal(second.queue?.position, 1);
    assert.equal(third.queue?.position, 2);
    const seenFromA = (await call(a.url, KEY, 'GET', `/api/conversations/${second.id}`)).body.data;
    const seenFromB = (await call(b.url, KEY, 'GET', `/api/conversations/${third.id}`)).body.data;
    assert.deepEqual([seenFromA.queue?.position, seenFromB.queue?.position], [1, 2]);
    assert.equal((await turnsOf(b.url, second.id))[0]!.queue_position, 1);

    // Answered through B (carried to A, which drives the turn); the slot frees and the line moves.
    const yes = await call(b.url, KEY, 'POST', `/api/conversations/${first.id}/requests/${request}`, {
      option_id: 'allow_once',
    });
    assert.equal(yes.status, 200, JSON.stringify(yes.body));
    const t1 = await completed(a.url, first.id);
    const t2 = await completed(b.url, second.id);
    const t3 = await completed(a.url, third.id);
    assert.ok(Date.parse(t2.started_at) >= Date.parse(t1.ended_at), `${t2.started_at} after ${t1.ended_at}`);
    assert.ok(Date.parse(t3.started_at) >= Date.parse(t2.ended_at), `${t3.started_at} after ${t2.ended_at}`);

    const db = observer.db as unknown as EngineDb;
    for (const conv of [second.id, third.id]) {
      const stages = (await allEvents(db, conv)).filter((e) => e.kind === 'stage');
      const count = (stage: string, state: string) =>
        stages.filter((e) => e.stage === stage && e.state === state).length;
      assert.deepEqual(
        [count('queue', 'done'), count('provision', 'started'), count('turn', 'started'), count('turn', 'done')],
        [1, 1, 1, 1],
        `${conv}: left the queue, provisioned and ran once: ${stages.map((e) => `${e.stage}/${e.state}`).join(' ')}`,
      );
    }
    assert.equal((await call(a.url, KEY, 'GET', '/api/account/limits')).body.data.waiting, 0);
  });
});
