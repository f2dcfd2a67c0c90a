/**
 * Scale-out with two real server nodes on one PostgreSQL schema: node A is a child process holding
 * the runner sockets; node B (this process) reaches those runners only through PostgreSQL NOTIFY.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import WebSocket from 'ws';
import { runConformanceSuite, SHELL_FIXTURES } from '../src/sandbox/conformance/index.ts';
import { mintRunnerName } from '../src/sandbox/index.ts';
import { RunnerAdapter } from '../src/providers/runner/index.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { ClusterRunnerHost } from '../src/server/runners/cluster-host.ts';
import { runnersTopic, type BusEvent } from '../src/server/cluster/bus.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';

const BIN = new URL('../bin/fountain.js', import.meta.url).pathname;
const NODE = new URL('./fixtures/cluster-node.ts', import.meta.url).pathname;
const KEY = `ftn_${'c1'.repeat(32)}`;
const HEARTBEAT_MS = '500';

interface Child {
  child: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
}

function child(args: string[], env: Record<string, string>): Child {
  const c = spawn(process.execPath, args, {
    env: { ...process.env, FOUNTAIN_PROFILE: '', FOUNTAIN_LOG_FORMAT: 'json', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  c.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  c.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  return { child: c, log: () => log, exited: new Promise((r) => c.once('exit', (code) => r(code))) };
}

async function until<T>(check: () => T | Promise<T>, what: string, ms = 60_000): Promise<NonNullable<T>> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface RunnerRow {
  id: string;
  name: string;
  online: boolean;
}

const api = async (url: string, method: string, path: string) => {
  const res = await fetch(url + path, { method, headers: { authorization: `Bearer ${KEY}` } });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as { data?: unknown }) : null };
};
const runners = async (url: string): Promise<RunnerRow[]> =>
  (await api(url, 'GET', '/api/runners')).body!.data as RunnerRow[];

/** A bare WebSocket dialing as a runner (ws answers pings itself; no ops are sent to it here). */
function dial(
  base: string,
  name: string,
): Promise<{ ws: WebSocket; closed: Promise<number> } | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/runners/ws?name=${name}`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    ws.once('open', () => resolve({ ws, closed }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.once('error', reject);
  });
}

const schema = uniqueSchemaName();
const env = {
  FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
  FOUNTAIN_BOOTSTRAP_KEY: KEY,
  FOUNTAIN_RUNNER_HEARTBEAT_MS: HEARTBEAT_MS,
};
let dataDir: string;
let scratch: string;
let nodeA: Child;
let urlA: string;
let nodeB: RunningServer;
let runnerProc: Child;
let runnerId: string;
let adapterB: RunnerAdapter;

before(async () => {
  dataDir = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-nodeb-')));
  scratch = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cluster-')));
  nodeB = await startServer({ dataDir, port: 0, env, databaseSchema: schema });
  nodeA = child(['--import', 'tsx', NODE], { ...env, CLUSTER_NODE_SCHEMA: schema });
  urlA = await until(() => /\{"url":"([^"]+)"\}/.exec(nodeA.log())?.[1], `node A listening (${nodeA.log()})`);
  runnerProc = child([BIN, 'runner', '--name', 'far', '--root', join(scratch, 'sandboxes')], {
    FOUNTAIN_API_KEY: KEY,
    FOUNTAIN_BASE_URL: urlA,
  });
  const row = await until(
    async () => (await runners(nodeB.url)).find((r) => r.name === 'far' && r.online),
    `node B sees the runner on A (${runnerProc.log()})`,
  );
  runnerId = row.id;
  adapterB = new RunnerAdapter(nodeB.host);
});

after(async () => {
  runnerProc?.child.kill('SIGKILL');
  if (nodeA && nodeA.child.exitCode === null && nodeA.child.signalCode === null) {
    nodeA.child.kill('SIGTERM');
    await nodeA.exited;
  }
  await nodeB?.stop();
  await dropSchema(schema);
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

runConformanceSuite('runner adapter on node B → PostgreSQL NOTIFY → node A → real fountain runner', {
  adapter: () => adapterB,
  name: () => {
    const n = mintRunnerName(runnerId);
    if (!n.ok) throw new Error(n.error);
    return n.value;
  },
  timeoutMs: 20_000,
  fixtures: SHELL_FIXTURES,
  // A runner no node holds: the cluster view must say runner_offline, never not_found.
  brokenTransport: async () => {
    const n = mintRunnerName('a0a1a2a3-b0b1-4c0c-8d0d-e0e1e2e3e4e5');
    if (!n.ok) throw new Error(n.error);
    return { adapter: adapterB, handle: adapterB.buildHandle(n.value) };
  },
});

describe('two nodes on one PostgreSQL', () => {
  it('node B reaches the runner through a proxy, not a socket of its own', () => {
    assert.ok(nodeB.host instanceof ClusterRunnerHost);
    assert.ok(nodeB.host.whereis(runnerId), 'whereis answers cluster-wide');
    assert.deepEqual(nodeB.host.localRunners(), []);
  });

  it('an exec whose output is far over the NOTIFY limit arrives whole', async () => {
    const name = mintRunnerName(runnerId);
    assert.ok(name.ok);
    const h = await adapterB.lifecycle.create(name.value);
    assert.ok(h.ok);
    const r = await adapterB.processes.exec(h.value, 'sh', ['-c', 'yes 0123456789abcdef | head -c 3000000']);
    assert.ok(r.ok, JSON.stringify(!r.ok && r.error));
    assert.equal(r.value.exitCode, 0);
    assert.equal(r.value.output.length, 3_000_000);
    assert.equal(Buffer.from(r.value.output).subarray(0, 17).toString(), '0123456789abcdef\n');
  });

  it('presence reaches node B; a same-name runner on B is refused 409; DELETE on B closes the socket on A with 4404', async () => {
    const accounts = await nodeB.database.db.execute<{ id: string }>(sql`SELECT id FROM accounts LIMIT 1`);
    const accountId = (accounts as unknown as { rows: Array<{ id: string }> }).rows[0]!.id;
    const events: BusEvent[] = [];
    const unsubscribe = nodeB.bus.subscribe(runnersTopic(accountId), (e) => events.push(e));
    try {
      const first = await dial(urlA, 'solo');
      assert.ok('ws' in first, 'node A accepts the runner');
      const row = await until(
        async () => (await runners(nodeB.url)).find((r) => r.name === 'solo' && r.online),
        'solo online on B',
      );
      await until(() => events.find((e) => e.type === 'runner_online' && e.runnerId === row.id), 'runner_online on B');

      const twin = await dial(nodeB.url, 'solo');
      assert.ok('status' in twin, 'node B refuses a runner live on node A');
      assert.equal(twin.status, 409);
      assert.match(twin.body, /runner_already_connected/);

      assert.equal((await api(nodeB.url, 'DELETE', `/api/runners/${row.id}`)).status, 204);
      assert.equal(await first.closed, 4404);
      await until(
        () => events.find((e) => e.type === 'runner_offline' && e.runnerId === row.id),
        'runner_offline on B',
      );
      assert.equal(nodeB.host.whereis(row.id), undefined);
    } finally {
      unsubscribe();
    }
  });

  it('a node that dies without stopping: its runners expire cluster-wide and calls to them are unavailable', async () => {
    const name = mintRunnerName(runnerId);
    assert.ok(name.ok);
    const h = adapterB.buildHandle(name.value);
    nodeA.child.kill('SIGKILL');
    await nodeA.exited;
    await until(
      async () => !(await runners(nodeB.url)).find((r) => r.id === runnerId)?.online,
      'the runner expired on B',
    );
    const r = await adapterB.processes.exec(h, 'echo', ['late']);
    assert.ok(!r.ok);
    assert.equal(r.error.code, 'unavailable');
  });
});
