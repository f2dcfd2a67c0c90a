/**
 * Turn ownership with two real server processes on one PostgreSQL schema, a real `fountain runner`
 * child dialing through a loopback proxy the test retargets, and the demo agent: a node that boots
 * mid-turn leaves the other node's turn alone; a node killed mid-turn has its turn adopted exactly once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { slowAnswer } from '../src/acp/demo/agent.ts';
import { ClusterRunnerHost } from '../src/server/runners/cluster-host.ts';
import { allEvents, answerText, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { turns, type EventRow } from '../src/server/store/conversation-schema.ts';
import { openDatabase, type Database } from '../src/server/store/db.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { call, type Json } from './helpers/http.ts';
import { spawnClusterNode, stopClusterNode, type NodeProcess } from './fixtures/cluster-node-process.ts';
import { type CutProxy, assertStoredOnce, runnerBehindProxy } from './helpers/recovery.ts';

const KEY = `ftn_${randomBytes(32).toString('hex')}`;
const SLOW = 120;

describe('turn ownership across two server processes', { timeout: 600_000 }, () => {
  const schema = uniqueSchemaName();
  const env = {
    FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
    FOUNTAIN_BOOTSTRAP_KEY: KEY,
    FOUNTAIN_RUNNER_HEARTBEAT_MS: '500',
    // A short expiry, so a killed node's turn is adopted soon; still many beats long, so a busy node is not lost.
    FOUNTAIN_NODE_HEARTBEAT_MS: '200',
    FOUNTAIN_NODE_EXPIRY_MS: '3000',
  };
  let tmp: string;
  let observer: Database;
  let nodeA: NodeProcess;
  let nodeB: RunningServer | undefined;
  let proxy: CutProxy;
  let runner: RunnerChild;
  let agentId: string;

  const db = () => observer.db as unknown as EngineDb;
  const events = (conv: string): Promise<EventRow[]> => allEvents(db(), conv);
  const data = (e: EventRow): Json => JSON.parse(e.data);
  const turnRow = async (id: string) => (await db().select().from(turns).where(eq(turns.id, id)))[0]!;
  const stage = async (conv: string, name: string, state: string, afterId = 0) => {
    try {
      return await until(
        async () => (await events(conv)).find((e) => e.id > afterId && e.stage === name && e.state === state),
        `${name}/${state}`,
        90_000,
      );
    } catch (e) {
      const seen = (await events(conv)).filter((x) => x.kind === 'stage').map((x) => `${x.stage}/${x.state} ${x.data}`);
      throw new Error(`${(e as Error).message}; stage events: ${seen.join(' | ')}`);
    }
  };
  const turnEnded = (conv: string, turnId: string, state = 'done') =>
    until(
      async () =>
        (await events(conv)).find((e) => e.stage === 'turn' && e.state === state && data(e).turn_id === turnId),
      `turn ${turnId} ${state}`,
      90_000,
    );
  const chunksStored = (conv: string, turnId: string, n: number) =>
    until(async () => answerText(await events(conv), turnId).split('\n').length > n, `${n} chunks stored`, 60_000);

  async function newConversation(base: string): Promise<string> {
    const created = await call(base, KEY, 'POST', '/api/conversations', { agent_id: agentId, prompt: 'hello' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    await stage(id, 'turn', 'done');
    return id;
  }

  async function prompt(base: string, conv: string, text: string): Promise<string> {
    const r = await call(base, KEY, 'POST', `/api/conversations/${conv}/prompts`, { prompt: text });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.turn_id as string;
  }

  /** What would show that something other than the turn's own node touched it. */
  const interference = (all: readonly EventRow[], turnId: string) =>
    all.filter(
      (e) =>
        e.turnId === turnId &&
        (e.stage === 'connection' || e.stage === 'reattach' || (e.stage === 'turn' && e.state === 'failed')),
    );

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cluster-turns-')));
    nodeA = await spawnClusterNode('A', schema, env);
    const url = nodeA.url;
    observer = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    ({ proxy, runner } = await runnerBehindProxy(Number(new URL(url).port), KEY, tmp));
    await until(
      async () => ((await call(url, KEY, 'GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner on node A',
      60_000,
    );
    const agent = await call(url, KEY, 'POST', '/api/agents', {
      name: 'demo',
      runtime: 'demo',
      model: 'fountain/demo',
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    agentId = agent.body.data.id;
  });

  after(async () => {
    await runner?.stop();
    await stopClusterNode(nodeA);
    await nodeB?.stop();
    await proxy?.close();
    await observer?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('node B boots while node A runs a turn: A finishes it untouched, every line stored once', async () => {
    const conv = await newConversation(nodeA.url);
    const turnId = await prompt(nodeA.url, conv, `slow: ${SLOW} 50ms`);
    await chunksStored(conv, turnId, 3);
    const owner = (await turnRow(turnId)).nodeId;
    assert.ok(owner, 'the running turn names its node');

    nodeB = await startServer({ dataDir: join(tmp, 'b'), port: 0, env, databaseSchema: schema });
    // B's boot pass is over and the turn is still open: otherwise this test would prove nothing.
    assert.equal((await turnRow(turnId)).status, 'running');
    assert.notEqual(nodeB.engine.nodeId, owner);
    assert.equal(await nodeB.engine.adoptLost(), 0, 'a live node’s turn is not lost work');

    await turnEnded(conv, turnId);
    const all = await events(conv);
    assert.equal(answerText(all, turnId), slowAnswer(SLOW).join(''));
    assertStoredOnce(all, turnId);
    assert.deepEqual(interference(all, turnId), []);
    assert.equal((await turnRow(turnId)).nodeId, owner);
  });

  it('node A is killed mid-turn: node B adopts the turn once A’s heartbeat expired, reattaches, and it completes', async () => {
    const b = nodeB!;
    // The runner moves to node B; node A goes on reaching it through B.
    proxy.upstreamPort = b.port;
    proxy.sever();
    proxy.restore();
    await until(() => (b.host as ClusterRunnerHost).localRunners().length === 1, 'the runner on node B', 60_000);
    await until(
      async () => ((await call(nodeA.url, KEY, 'GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'node A sees it',
      60_000,
    );

    const conv = await newConversation(nodeA.url);
    const turnId = await prompt(nodeA.url, conv, `slow: ${SLOW} 50ms`);
    await chunksStored(conv, turnId, 3);
    const lost = (await turnRow(turnId)).nodeId;
    assert.ok(lost && lost !== b.engine.nodeId, 'node A drives the turn');

    nodeA.child.kill('SIGKILL');
    await nodeA.exited;
    const started = await stage(conv, 'connection', 'started');
    assert.deepEqual(data(started), { reason: 'server_node_lost', turn_id: turnId, timeout_ms: 120_000 });
    const attached = await stage(conv, 'reattach', 'done');
    assert.equal(data(attached).outcome, 'session_attached');
    assert.equal(data(attached).turn_id, turnId);
    await turnEnded(conv, turnId);

    const all = await events(conv);
    assert.equal(answerText(all, turnId), slowAnswer(SLOW).join(''));
    assertStoredOnce(all, turnId);
    assert.equal(all.filter((e) => e.turnId === turnId && e.stage === 'turn' && e.state === 'failed').length, 0);
    assert.equal(all.filter((e) => e.stage === 'reattach').length, 1, 'adopted once');
    assert.equal((await turnRow(turnId)).nodeId, b.engine.nodeId);

    // The conversation goes on, on node B.
    const next = await prompt(b.url, conv, 'recall');
    await turnEnded(conv, next);
  });
});
