/**
 * A warm pool shared by two real server processes on one PostgreSQL schema, a real runner on node A and
 * the demo agent: conversations created at once through both nodes never get the same member (the take
 * is atomic), each answers, and the nodes between them keep the pool at its size, not past it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { openDatabase, type Database } from '../src/server/store/db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { call, type Json } from './helpers/http.ts';
import { spawnClusterPair, stopClusterNodes, type NodeProcess } from './fixtures/cluster-node-process.ts';

const KEY = `ftn_${randomBytes(32).toString('hex')}`;

describe('a warm pool across two server nodes', { timeout: 600_000 }, () => {
  const schema = uniqueSchemaName();
  const env = {
    FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
    FOUNTAIN_BOOTSTRAP_KEY: KEY,
    FOUNTAIN_RUNNER_HEARTBEAT_MS: '500',
    FOUNTAIN_NODE_HEARTBEAT_MS: '200',
    FOUNTAIN_NODE_EXPIRY_MS: '3000',
  };
  let tmp: string;
  let observer: Database;
  let a: NodeProcess;
  let b: NodeProcess;
  let runner: RunnerChild;
  let agentId: string;

  const members = async (): Promise<Array<{ id: string; status: string; sandbox_status: string }>> =>
    (
      (await observer.db.execute(
        sql`SELECT c.id, c.status, s.status AS sandbox_status FROM conversations c JOIN sandboxes s ON s.id = c.sandbox_id
          WHERE c.pool_agent_id = ${agentId} AND c.status IN ('pending', 'idle', 'running')`,
      )) as unknown as { rows: Array<{ id: string; status: string; sandbox_status: string }> }
    ).rows;
  const ready = (n: number) =>
    until(
      async () => {
        const m = await members();
        return m.length === n && m.every((x) => x.status === 'idle' && x.sandbox_status === 'ready') ? m : undefined;
      },
      `${n} ready members`,
      180_000,
    );

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cluster-pool-')));
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
      permission_policy: { default: 'auto_allow' },
      warm_pool: 1,
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

  it('gives one member to one of two conversations created at once through both nodes, and refills to its size', async () => {
    const [member] = await ready(1);
    const [viaA, viaB] = await Promise.all([
      call(a.url, KEY, 'POST', '/api/conversations', { agent_id: agentId, prompt: 'through A' }),
      call(b.url, KEY, 'POST', '/api/conversations', { agent_id: agentId, prompt: 'through B' }),
    ]);
    assert.equal(viaA.status, 201, JSON.stringify(viaA.body));
    assert.equal(viaB.status, 201, JSON.stringify(viaB.body));
    const ids = [viaA.body.data.id, viaB.body.data.id];
    assert.notEqual(ids[0], ids[1]);
    assert.equal(ids.filter((id) => id === member!.id).length, 1, `exactly one took ${member!.id}: ${ids}`);
    for (const [base, id] of [
      [a.url, ids[0]],
      [b.url, ids[1]],
    ] as const)
      await until(
        async () => {
          const t = (await call(base, KEY, 'GET', `/api/conversations/${id}/turns`)).body.data as Json[];
          return t[0]?.status === 'completed' || undefined;
        },
        `${id} answered`,
        180_000,
      );
    // Both nodes look at the pool (a take, an agent save, their timers): it is filled to one, not two.
    const patched = await call(b.url, KEY, 'PATCH', `/api/agents/${agentId}`, { description: 'seen by B' });
    assert.equal(patched.status, 200);
    const [refill] = await ready(1);
    assert.ok(!ids.includes(refill!.id));
  });
});
