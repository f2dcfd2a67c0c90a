/**
 * The cluster host's arbitration on real PostgreSQL: two hosts (two nodes, each with its own
 * sessions) behind two loopback hubs, fake daemons racing for one runner id, and frames over the limit.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { FakeDaemon } from '../../providers/runner/fake-daemon.ts';
import { startRunnerTestHub, type RunnerTestHub } from '../../providers/runner/test-hub.ts';
import { PgNotify } from '../cluster/notify.ts';
import { mintNodeId } from '../cluster/node.ts';
import { ClusterRunnerHost } from './cluster-host.ts';
import { EventBus } from '../cluster/bus.ts';
import { openDatabase, type Database } from '../store/db.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../store/testing.ts';

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const RUNNER_ID = '5a5b5c5d-0000-4000-8000-00000000beef';

async function until<T>(check: () => T | Promise<T>, what: string, ms = 20_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('ClusterRunnerHost on PostgreSQL', () => {
  const schema = uniqueSchemaName();
  let database: Database;
  let hosts: ClusterRunnerHost[];
  let hubs: RunnerTestHub[];
  const daemons: FakeDaemon[] = [];
  const notifies: PgNotify[] = [];

  before(async () => {
    database = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    const start = async () => {
      const notify = await PgNotify.open({ url: TEST_POSTGRES_URL, schema, logger });
      notifies.push(notify);
      return ClusterRunnerHost.start({
        nodeId: mintNodeId(),
        notify,
        schema,
        db: database.db,
        bus: new EventBus(),
        logger,
        heartbeatMs: 300,
        callTimeoutMs: 5_000,
        nodeExpiryMs: 30_000,
      });
    };
    hosts = [await start(), await start()];
    // refuseOnline off: both dials reach register(), so the table has to arbitrate.
    hubs = await Promise.all(hosts.map((host) => startRunnerTestHub({ logger, host, refuseOnline: false })));
    for (const hub of hubs) hub.enroll('racer', RUNNER_ID);
  });

  after(async () => {
    for (const d of daemons) await d.stop();
    for (const h of hosts) await h.shutdown();
    for (const hub of hubs) await hub.close();
    for (const n of notifies) await n.close();
    await database.close();
    await dropSchema(schema);
  });

  it('two nodes racing for one runner: exactly one holds it, and both agree which', async () => {
    for (const hub of hubs)
      daemons.push(new FakeDaemon({ runnerId: RUNNER_ID, name: 'racer', logger, reconnect: false }, hub, false));
    await Promise.all(daemons.map((d) => d.dial().catch(() => undefined)));
    await until(
      () =>
        hosts[0]!.localRunners().length + hosts[1]!.localRunners().length === 1 &&
        hosts.every((h) => h.online().length === 1),
      'one winner',
    );
    const winner = hosts.findIndex((h) => h.localRunners().length === 1);
    const loser = hosts[1 - winner]!;
    // Settle: a late presence or refresh must not resurrect the loser's claim.
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(hosts[winner]!.localRunners().length, 1);
    assert.equal(loser.localRunners().length, 0);
    assert.ok(loser.whereis(RUNNER_ID), 'the loser routes to the winner');
    const rows = await database.db.execute(
      sql`SELECT node_id FROM runner_registrations WHERE runner_id = ${RUNNER_ID}`,
    );
    const nodeIds = (rows as unknown as { rows: Array<{ node_id: string }> }).rows.map((r) => r.node_id);
    assert.deepEqual(nodeIds, [hosts[winner]!.nodeId]);
  });

  it('a request and a stream frame far over the NOTIFY payload limit cross nodes intact', async () => {
    const winnerIdx = hosts.findIndex((h) => h.localRunners().length === 1);
    const other = hosts[1 - winnerIdx]!;
    const daemon = daemons.find((d) => d.hub === hubs[winnerIdx])!;
    const conn = other.whereis(RUNNER_ID);
    assert.ok(conn);
    const created = await conn.call({ op: 'create', name: 'big' });
    assert.ok(created.ok, JSON.stringify(!created.ok && created.error));
    const payload = Buffer.alloc(200_000, 7);
    const wrote = await conn.call({ op: 'write_file', name: 'big', path: '/blob', data: payload.toString('base64') });
    assert.ok(wrote.ok, JSON.stringify(!wrote.ok && wrote.error));
    assert.ok(daemon.file('big', '/blob')?.equals(payload), 'the owning daemon got every byte');

    const big = 'y'.repeat(100_000);
    const out: Buffer[] = [];
    let exit: number | undefined;
    const spawned = await conn.call(
      { op: 'spawn', name: 'big', cmd: 'fake', args: [`out:${big}`, 'exit:0'], env: [] },
      {
        listener: {
          output: (_s, d) => out.push(d),
          exit: (c) => (exit = c),
          disconnected: () => assert.fail('not disconnected'),
        },
      },
    );
    assert.ok(spawned.ok, JSON.stringify(!spawned.ok && spawned.error));
    await until(() => exit !== undefined, 'the forwarded exit');
    assert.equal(exit, 0);
    assert.equal(Buffer.concat(out).toString(), big);
  });

  it('a stream served for a node whose heartbeat expired ends; one for a live node goes on', async () => {
    const winnerIdx = hosts.findIndex((h) => h.localRunners().length === 1);
    const owner = hosts[winnerIdx]!;
    const other = hosts[1 - winnerIdx]!;
    const conn = other.whereis(RUNNER_ID)!;
    assert.ok((await conn.call({ op: 'create', name: 'echo' })).ok);
    const out: string[] = [];
    const spawned = await conn.call(
      { op: 'spawn', name: 'echo', cmd: 'fake', args: ['stay'], env: [] },
      { listener: { output: (_s, d) => out.push(d.toString()), exit: () => {}, disconnected: () => {} } },
    );
    assert.ok(spawned.ok, JSON.stringify(!spawned.ok && spawned.error));
    const session = spawned.value.session_id as string;
    // The daemon answers a write before echoing it: once the next write is answered, the previous echo
    // has crossed back (one socket, one NOTIFY sender), or it never will.
    const write = async (text: string) => {
      const r = await conn.call({
        op: 'stdin',
        name: 'echo',
        session_id: session,
        data: Buffer.from(text).toString('base64'),
      });
      assert.ok(r.ok, JSON.stringify(!r.ok && r.error));
    };
    const roundTrip = async (text: string) => {
      await write(text);
      await write(`${text}-barrier`);
    };

    await database.db.execute(sql`INSERT INTO server_nodes (node_id) VALUES (${other.nodeId})`);
    await owner.forgetLostNodes();
    await roundTrip('alive');
    assert.ok(out.join('').includes('echo:alive'), 'a live node keeps its stream');

    await database.db.execute(
      sql`UPDATE server_nodes SET heartbeat_at = now() - interval '1 hour' WHERE node_id = ${other.nodeId}`,
    );
    await owner.forgetLostNodes();
    await roundTrip('lost');
    assert.ok(!out.join('').includes('echo:lost'), 'nothing is forwarded to a lost node');
  });
});
