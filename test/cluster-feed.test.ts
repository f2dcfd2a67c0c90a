/**
 * Any node serves any client: two real server processes on one PostgreSQL schema, a real runner
 * dialing node A. Node B's conversation and account streams see A's turns live, in order, once (and
 * B's account stream hears that a conversation was created on A);
 * a prompt, a permission answer and an interrupt posted to B act on A's turn; a node's notification
 * connection killed with pg_terminate_backend mid-turn reconnects and nothing is lost.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import { slowAnswer } from '../src/acp/demo/agent.ts';
import { allEvents, startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { turns, type EventRow } from '../src/server/store/conversation-schema.ts';
import { openDatabase, type Database } from '../src/server/store/db.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { answer, call, openStream, type Json, type SseEvent, type Stream } from './helpers/http.ts';
import { spawnClusterPair, stopClusterNodes, type NodeProcess } from './fixtures/cluster-node-process.ts';

const KEY = `ftn_${randomBytes(32).toString('hex')}`;

describe('two server nodes: streams and commands on B for a turn A drives', { timeout: 600_000 }, () => {
  const schema = uniqueSchemaName();
  const env = {
    FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
    FOUNTAIN_BOOTSTRAP_KEY: KEY,
    FOUNTAIN_RUNNER_HEARTBEAT_MS: '500',
    FOUNTAIN_NODE_HEARTBEAT_MS: '300',
    FOUNTAIN_NODE_EXPIRY_MS: '10000',
  };
  let tmp: string;
  let observer: Database;
  let a: NodeProcess;
  let b: NodeProcess;
  let runner: RunnerChild;
  let conv: string;
  let agentId: string;
  const streams: Stream[] = [];

  const db = () => observer.db as unknown as EngineDb;
  const stored = (id: string): Promise<EventRow[]> => allEvents(db(), id);
  const turnRow = async (id: string) => (await db().select().from(turns).where(eq(turns.id, id)))[0]!;

  /** The backend pid of a node's notification connection (its application_name names the node). */
  const listenerPid = async (node: NodeProcess): Promise<number | undefined> => {
    const r = await observer.db.execute(
      sql`SELECT pid FROM pg_stat_activity WHERE application_name = ${`fountain-notify-${node.id}`}`,
    );
    const rows = (r as unknown as { rows: Array<{ pid: number }> }).rows;
    return rows.length === 1 ? Number(rows[0]!.pid) : undefined;
  };

  /** Kills the node's notification connection and waits for the node to open a new one. */
  async function killListener(node: NodeProcess): Promise<void> {
    const pid = await until(() => listenerPid(node), `the notification connection of ${node.id}`, 10_000);
    await observer.db.execute(sql`SELECT pg_terminate_backend(${pid})`);
    await until(
      async () => {
        const now = await listenerPid(node);
        return now !== undefined && now !== pid;
      },
      `${node.id} to reconnect its notification connection`,
      30_000,
    );
  }

  const stageOf = (e: SseEvent) => `${e.data?.stage}/${e.data?.state}`;
  const turnEnd = (s: Stream, turnId: string, state: string) =>
    s.wait(
      (e) => e.data?.stage === 'turn' && e.data?.state === state && JSON.parse(e.data.data).turn_id === turnId,
      `turn ${turnId} ${state} on the stream`,
    );

  /** A stream's events of one conversation are exactly what the store holds after its cursor: in id order, none twice, none missing. */
  async function assertSameAsStore(s: Stream, from: number, what: string): Promise<void> {
    const got = s.events.filter((e) => e.id !== null && (e.data?.conversation_id ?? conv) === conv).map((e) => e.id!);
    const want = (await stored(conv)).filter((e) => e.id > from).map((e) => e.id);
    assert.deepEqual(got, want, `${what}: streamed ids = stored ids`);
  }

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cluster-feed-')));
    [a, b] = await spawnClusterPair(schema, env);
    observer = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    runner = startRunnerChild({ name: 'r', root: join(tmp, 'sandboxes'), baseUrl: a.url, apiKey: KEY, home: tmp });
    await until(
      async () => ((await call(a.url, KEY, 'GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner on node A',
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
    const created = await call(a.url, KEY, 'POST', '/api/conversations', {
      agent_id: agent.body.data.id,
      prompt: 'remember: the first turn ran on A',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    conv = created.body.data.id;
    await until(
      async () => (await stored(conv)).find((e) => e.stage === 'turn' && e.state === 'done'),
      'the first turn on A',
      90_000,
    );
  });

  after(async () => {
    for (const s of streams) s.close();
    await runner?.stop();
    await stopClusterNodes(a, b);
    await observer?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it("a prompt posted to B runs on A; B's conversation and account streams see it live, in order, once, across a killed notification connection", async () => {
    const from = (await stored(conv)).at(-1)!.id;
    const onB = openStream(`${b.url}/api/conversations/${conv}/stream`, KEY, from);
    const accountB = openStream(`${b.url}/api/events/stream`, KEY, from);
    streams.push(onB, accountB);
    await until(
      () => onB.raw().startsWith(': connected') && accountB.raw().startsWith(': connected'),
      'both streams open',
    );

    // A conversation created on A: B's account stream hears the list changed (the bus, across nodes).
    const other = await call(a.url, KEY, 'POST', '/api/conversations', { agent_id: agentId });
    assert.equal(other.status, 201, JSON.stringify(other.body));
    await accountB.wait(
      (e) => e.event === 'conversations' && e.data?.reason === 'changed' && e.id === null,
      "B's account stream: conversations changed on A",
    );

    const chunks = 60;
    const p = await call(b.url, KEY, 'POST', `/api/conversations/${conv}/prompts`, { prompt: `slow: ${chunks} 100ms` });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    const turnId = p.body.turn_id as string;
    assert.equal((await turnRow(turnId)).nodeId, a.id, 'node A drives the turn posted to B');

    // Live: B streams the turn's output while it is still running on A.
    await onB.wait((e) => e.data?.turn_id === turnId && answer([e], turnId).includes('chunk 3 '), 'chunk 3 on B');
    assert.equal((await turnRow(turnId)).status, 'running', 'B saw output before the turn ended');
    // B's notification connection dies mid-turn; B reconnects and re-reads what it missed.
    await killListener(b);
    await turnEnd(onB, turnId, 'done');
    await turnEnd(accountB, turnId, 'done');
    assert.equal(answer(onB.events, turnId), slowAnswer(chunks).join(''));
    assert.equal(answer(accountB.events, turnId), slowAnswer(chunks).join(''));
    await assertSameAsStore(onB, from, "B's conversation stream");
    await assertSameAsStore(accountB, from, "B's account stream");
    assert.ok(
      accountB.events
        .filter((e) => e.id !== null)
        .every((e) => [conv, other.body.data.id].includes(e.data?.conversation_id)),
    );
  });

  it('a permission answer posted to B reaches the agent on A', async () => {
    const from = (await stored(conv)).at(-1)!.id;
    const onB = openStream(`${b.url}/api/conversations/${conv}/stream`, KEY, from);
    streams.push(onB);
    const p = await call(b.url, KEY, 'POST', `/api/conversations/${conv}/prompts`, {
      prompt: 'run: echo answered-through-b',
    });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    const turnId = p.body.turn_id as string;
    const asked = await onB.stage('permission', 'started', from);
    const request = JSON.parse(asked.data.data);
    assert.equal((await turnRow(turnId)).nodeId, a.id);
    const yes = await call(b.url, KEY, 'POST', `/api/conversations/${conv}/requests/${request.request_id}`, {
      option_id: 'allow_once',
    });
    assert.deepEqual([yes.status, yes.body], [200, { ok: true }]);
    const again = await call(b.url, KEY, 'POST', `/api/conversations/${conv}/requests/${request.request_id}`, {
      option_id: 'allow_once',
    });
    assert.deepEqual([again.status, again.body.error], [409, 'permission_request_resolved']);
    await turnEnd(onB, turnId, 'done');
    assert.match(answer(onB.events, turnId), /answered-through-b/);
    await assertSameAsStore(onB, from, "B's conversation stream");
  });

  it("an interrupt posted to B stops A's turn, after A's own notification connection was killed and came back", async () => {
    await killListener(a);
    const from = (await stored(conv)).at(-1)!.id;
    const onB = openStream(`${b.url}/api/conversations/${conv}/stream`, KEY, from);
    streams.push(onB);
    const p = await call(b.url, KEY, 'POST', `/api/conversations/${conv}/prompts`, { prompt: 'slow: 600 100ms' });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    const turnId = p.body.turn_id as string;
    await onB.wait((e) => e.data?.turn_id === turnId && answer([e], turnId).includes('chunk 2 '), 'chunk 2 on B');
    const busy = await call(b.url, KEY, 'POST', `/api/conversations/${conv}/prompts`, { prompt: 'me too' });
    assert.deepEqual([busy.status, busy.body.error], [400, 'conversation_busy']);
    const stop = await call(b.url, KEY, 'POST', `/api/conversations/${conv}/interrupt`);
    assert.equal(stop.status, 204, JSON.stringify(stop.body));
    await turnEnd(onB, turnId, 'interrupted');
    const row = await turnRow(turnId);
    assert.deepEqual([row.status, row.nodeId], ['interrupted', a.id]);
    assert.ok(answer(onB.events, turnId).split('\n').length < 600, 'the turn stopped early');
    await assertSameAsStore(onB, from, "B's conversation stream");
    assert.deepEqual(
      onB.events
        .filter((e) => e.event === 'stage')
        .map(stageOf)
        .filter((s) => s.startsWith('turn/')),
      ['turn/started', 'turn/interrupted'],
    );
  });
});
