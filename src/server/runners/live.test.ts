import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startServer, type RunningServer } from '../start.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../store/testing.ts';
import { listAudit } from '../account/audit.ts';
import { runnersTopic, type BusEvent } from '../cluster/bus.ts';

/** Polls until `fn` returns a truthy value; the timeout only guards against a hang. */
async function until<T>(fn: () => T | Promise<T>, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

interface Daemon {
  ws: WebSocket;
  closed: Promise<{ code: number; reason: string }>;
}

/** A real ws client dialing as a runner daemon would (it answers pings; no ops are sent here). */
function connect(base: string, key: string, query: string): Promise<Daemon> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/runners/ws?${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.once('close', (code, reason) => r({ code, reason: reason.toString() })),
    );
    ws.once('open', () => resolve({ ws, closed }));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`refused with ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

function refusal(base: string, key: string, query: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/runners/ws?${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    ws.once('open', () => {
      ws.close();
      reject(new Error('accepted'));
    });
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    ws.once('error', reject);
  });
}

describe('runner hub with live sockets', () => {
  let dir: string;
  let schema: string;
  let srv: RunningServer;
  let owner: string;
  let ownerId: string;
  const events: BusEvent[] = [];
  const daemons: Daemon[] = [];
  const get = async (path: string, key = owner) =>
    (await (await fetch(srv.url + path, { headers: { authorization: `Bearer ${key}` } })).json()) as any;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-live-'));
    schema = uniqueSchemaName();
    srv = await startServer({
      dataDir: dir,
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, FOUNTAIN_RUNNER_HEARTBEAT_MS: '100' },
      databaseSchema: schema,
    });
    owner = srv.bootstrapKey!;
    ownerId = (await get('/api/auth/me')).data.id;
    srv.bus.subscribe(runnersTopic(ownerId), (e) => events.push(e));
  });
  after(async () => {
    for (const d of daemons) d.ws.terminate();
    await srv?.stop();
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers, shows online with its fields, publishes runner_online, and the heartbeat stamps last_seen_at', async () => {
    const d = await connect(
      srv.url,
      owner,
      'name=box&hostname=box.local&os=linux&arch=amd64&version=0.1.0&root=/srv/sandboxes',
    );
    daemons.push(d);
    const [row] = (await until(async () => {
      const list = (await get('/api/runners')).data;
      return list.length === 1 && list[0].online ? list : null;
    }, 'box online')) as any[];
    assert.equal(row.name, 'box');
    assert.deepEqual(
      [row.hostname, row.os, row.arch, row.version, row.root],
      ['box.local', 'linux', 'amd64', '0.1.0', '/srv/sandboxes'],
    );
    assert.ok(row.connected_at);
    await until(() => events.find((e) => e.type === 'runner_online' && e.runnerId === row.id), 'runner_online');
    await until(async () => {
      const r = (await get('/api/runners')).data[0];
      return new Date(r.last_seen_at) > new Date(r.connected_at);
    }, 'a heartbeat to stamp last_seen_at');
    assert.equal((await listAudit(srv.database.db, ownerId, 'runner.registered')).length, 1);
  });

  it('refuses a second connection with the same name with 409 while the first is online', async () => {
    const r = await refusal(srv.url, owner, 'name=box');
    assert.deepEqual([r.status, r.body.error], [409, 'runner_already_connected']);
    assert.equal(daemons[0]!.ws.readyState, WebSocket.OPEN);
  });

  it('lists the most recently connected first, and another account sees none of them', async () => {
    const d = await connect(srv.url, owner, 'name=alpha');
    daemons.push(d);
    await until(
      async () =>
        (await get('/api/runners')).data.every((r: any) => r.online) && (await get('/api/runners')).data.length === 2,
      'two online',
    );
    assert.deepEqual(
      (await get('/api/runners')).data.map((r: any) => r.name),
      ['alpha', 'box'],
    );

    const created = await fetch(`${srv.url}/api/admin/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bob' }),
    });
    const bob = ((await created.json()) as any).data.key.key as string;
    assert.deepEqual((await get('/api/runners', bob)).data, []);
    // Names are per account: bob's "box" is a different runner and is not "already connected".
    const bobBox = await connect(srv.url, bob, 'name=box');
    daemons.push(bobBox);
    const bobList = await until(async () => {
      const l = (await get('/api/runners', bob)).data;
      return l.length === 1 && l[0].online ? l : null;
    }, 'bob box online');
    const ownerBox = (await get('/api/runners')).data.find((r: any) => r.name === 'box');
    assert.notEqual(bobList[0].id, ownerBox.id);
    const foreign = await fetch(`${srv.url}/api/runners/${ownerBox.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${bob}` },
    });
    assert.equal(foreign.status, 404);
    assert.equal(daemons[0]!.ws.readyState, WebSocket.OPEN);
  });

  it('DELETE closes the live socket with 4404, publishes runner_offline, and a reconnect re-registers', async () => {
    const box = (await get('/api/runners')).data.find((r: any) => r.name === 'box');
    const res = await fetch(`${srv.url}/api/runners/${box.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${owner}` },
    });
    assert.equal(res.status, 204);
    const closed = await daemons[0]!.closed;
    assert.deepEqual(closed, { code: 4404, reason: 'runner deleted' });
    await until(() => events.find((e) => e.type === 'runner_offline' && e.runnerId === box.id), 'runner_offline');
    assert.deepEqual(
      (await get('/api/runners')).data.map((r: any) => r.name),
      ['alpha'],
    );
    assert.equal((await listAudit(srv.database.db, ownerId, 'runner.deleted')).length, 1);

    const again = await connect(srv.url, owner, 'name=box');
    daemons.push(again);
    const list = await until(async () => {
      const l = (await get('/api/runners')).data;
      return l.length === 2 && l.every((r: any) => r.online) ? l : null;
    }, 'box back online');
    assert.deepEqual(
      list.map((r: any) => r.name),
      ['box', 'alpha'],
    );
    assert.notEqual(list[0].id, box.id);
    assert.equal((await listAudit(srv.database.db, ownerId, 'runner.registered')).length, 3);
  });

  it('a daemon that drops goes offline; reconnecting by name is silent (no new audit) and keeps its id', async () => {
    const alpha = daemons[1]!;
    const before = (await get('/api/runners')).data.find((r: any) => r.name === 'alpha');
    alpha.ws.close(1000);
    await alpha.closed;
    await until(
      async () => (await get('/api/runners')).data.find((r: any) => r.name === 'alpha')?.online === false,
      'alpha offline',
    );
    await until(
      () => events.find((e) => e.type === 'runner_offline' && e.runnerId === before.id),
      'alpha runner_offline',
    );
    const back = await connect(srv.url, owner, 'name=alpha');
    daemons.push(back);
    const after = await until(async () => {
      const r = (await get('/api/runners')).data.find((x: any) => x.name === 'alpha');
      return r?.online ? r : null;
    }, 'alpha online again');
    assert.equal(after.id, before.id);
    assert.ok(new Date(after.connected_at) > new Date(before.connected_at));
    assert.equal((await listAudit(srv.database.db, ownerId, 'runner.registered')).length, 3);
  });

  it('stopping the server closes runner sockets with 1001', async () => {
    const last = daemons[daemons.length - 1]!;
    await srv.stop();
    assert.equal((await last.closed).code, 1001);
  });
});
