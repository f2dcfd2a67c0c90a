/**
 * Two real server processes on one PostgreSQL schema: a key revoked on one node is refused by the
 * other at once; an account stream misses no row when one node's insert commits after the other's.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import pg from 'pg';
import { allEvents, startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { conversations, events, turns } from '../src/server/store/conversation-schema.ts';
import { openDatabase, type Database } from '../src/server/store/db.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { call, openStream, type Json, type Stream } from './helpers/http.ts';
import { spawnClusterPair, stopClusterNodes, type NodeProcess } from './fixtures/cluster-node-process.ts';

const KEY = `ftn_${randomBytes(32).toString('hex')}`;
/** The advisory lock the test holds to keep one node's event insert from committing. */
const LATE_LOCK = 7_342_001;

describe('two server nodes agree on keys and on the account stream', { timeout: 600_000 }, () => {
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
  let runner: RunnerChild | undefined;
  const streams: Stream[] = [];
  const db = () => observer.db as unknown as EngineDb;

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cluster-consistency-')));
    [a, b] = await spawnClusterPair(schema, env);
    observer = await openDatabase({ url: TEST_POSTGRES_URL, schema });
  });

  after(async () => {
    for (const s of streams) s.close();
    await runner?.stop();
    await stopClusterNodes(a, b);
    await observer?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('a key revoked on A is refused by B at once, though B had just accepted it', async () => {
    const created = await call(a.url, KEY, 'POST', '/api/auth/api-keys', { name: 'short-lived', scopes: ['full'] });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const key = created.body.data.key as string;
    // B reads the key once and remembers it; a second request is served from that memory.
    for (let i = 0; i < 2; i++) assert.equal((await call(b.url, key, 'GET', '/api/agents')).status, 200);
    const revoked = await call(a.url, KEY, 'DELETE', `/api/auth/api-keys/${created.body.data.id}`);
    assert.equal(revoked.status, 204, JSON.stringify(revoked.body));
    // Before the revocation went on the cluster bus, B answered 200 here for up to 2 s.
    const onB = await call(b.url, key, 'GET', '/api/agents');
    assert.deepEqual([onB.status, onB.body?.error], [401, 'api_key_revoked']);
    assert.equal((await call(a.url, key, 'GET', '/api/agents')).status, 401);
  });

  it("B's account stream delivers a row of A's that commits after B's later rows", async () => {
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
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    // One conversation driven by each node, both of the one account; each has run a turn.
    const open = async (node: NodeProcess) => {
      const c = await call(node.url, KEY, 'POST', '/api/conversations', {
        agent_id: agent.body.data.id,
        prompt: 'remember: warm',
      });
      assert.equal(c.status, 201, JSON.stringify(c.body));
      const id = c.body.data.id as string;
      await until(
        async () => (await allEvents(db(), id)).find((e) => e.stage === 'turn' && e.state === 'done'),
        `the first turn of the conversation on ${node === a ? 'A' : 'B'}`,
        90_000,
      );
      return id;
    };
    const onA = await open(a);
    const onB = await open(b);
    const driver = async (conv: string) => (await db().select().from(turns).where(eq(turns.conversationId, conv)))[0]!;
    assert.equal((await driver(onA)).nodeId, a.id);
    assert.equal((await driver(onB)).nodeId, b.id);

    const from = Number(
      (
        await db()
          .select({ id: sql<number>`max(${events.id})` })
          .from(events)
      )[0]!.id,
    );
    const account = openStream(`${b.url}/api/events/stream`, KEY, from);
    streams.push(account);
    await until(() => account.raw().startsWith(': connected'), 'the account stream open');

    // A's inserts of onA's events are written (ids and a transaction taken), then wait for the test's lock to commit.
    await observer.db.execute(
      sql.raw(`CREATE FUNCTION late_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.conversation_id = '${onA}' THEN PERFORM pg_advisory_xact_lock_shared(${LATE_LOCK}); END IF;
          RETURN NEW;
        END $$`),
    );
    await observer.db.execute(
      sql.raw('CREATE TRIGGER late_commit AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION late_commit()'),
    );
    const holder = new pg.Client({ connectionString: TEST_POSTGRES_URL });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [LATE_LOCK]);
      const prompted = call(a.url, KEY, 'POST', `/api/conversations/${onA}/prompts`, { prompt: 'remember: late' });
      await until(async () => {
        const r = await holder.query(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted",
          [LATE_LOCK],
        );
        return r.rows[0].n > 0;
      }, "A's insert waiting with its id taken");
      // B drives a whole turn meanwhile: its rows take higher ids and commit first.
      const p = await call(b.url, KEY, 'POST', `/api/conversations/${onB}/prompts`, { prompt: 'remember: early' });
      assert.equal(p.status, 200, JSON.stringify(p.body));
      await until(
        async () =>
          (await allEvents(db(), onB)).find(
            (e) => e.turnId === p.body.turn_id && e.stage === 'turn' && e.state === 'done',
          ),
        "B's turn stored",
      );
      // The stream on B has had every chance to read them (its notices are local to B).
      await new Promise((r) => setTimeout(r, 500));

      await holder.query('SELECT pg_advisory_unlock($1)', [LATE_LOCK]);
      const late = await prompted;
      assert.equal(late.status, 200, JSON.stringify(late.body));
      await account.wait(
        (e) => e.data?.stage === 'turn' && e.data?.state === 'done' && e.data?.conversation_id === onA,
        "A's late turn done on B's account stream",
      );
    } finally {
      await holder.end();
      await observer.db.execute(sql.raw('DROP TRIGGER IF EXISTS late_commit ON events'));
    }

    // The scene happened: a row of A's late turn has an id below rows of B's turn that committed before it.
    const rows = await db().select().from(events).where(sql`${events.id} > ${from}`);
    const lateA = Math.min(...rows.filter((e) => e.conversationId === onA).map((e) => e.id));
    const earlyB = Math.max(...rows.filter((e) => e.conversationId === onB).map((e) => e.id));
    assert.ok(lateA < earlyB, `A's first late row ${lateA} is below B's last row ${earlyB}`);

    const mine = await db()
      .select({ id: events.id })
      .from(events)
      .innerJoin(conversations, eq(conversations.id, events.conversationId))
      .where(sql`${events.id} > ${from}`)
      .orderBy(events.id);
    const want = mine.map((r) => r.id);
    const last = want.at(-1)!;
    await until(() => account.events.some((e) => e.id === last), 'the stream caught up with the store');
    const got = account.events.filter((e) => e.id !== null).map((e) => e.id!);
    assert.deepEqual(got, want, "B's account stream: every stored row of the account, in id order, once");
  });
});
