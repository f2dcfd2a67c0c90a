import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startServer, type RunningServer } from '../start.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../store/testing.ts';
import type { AcceptRunnerSocket } from './hub.ts';
import { listRunners } from './store.ts';

const noSockets: AcceptRunnerSocket = () => assert.fail('no upgrade is expected in this test');

/** Dials the runner endpoint with a real ws client and returns the HTTP refusal it got. */
function dial(base: string, query: string, key?: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/runners/ws${query}`, {
      headers: key ? { authorization: `Bearer ${key}` } : {},
    });
    ws.on('open', () => {
      ws.close();
      reject(new Error('the upgrade was accepted'));
    });
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    ws.on('error', (e) => reject(e));
  });
}

/** An upgrade request for some other protocol. */
function rawUpgrade(base: string, path: string, key: string, protocol: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, {
      headers: { authorization: `Bearer ${key}`, connection: 'Upgrade', upgrade: protocol },
    });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('upgrade', () => reject(new Error('upgraded')));
    req.on('error', reject);
    req.end();
  });
}

interface Fixture {
  srv: RunningServer;
  owner: string;
  sandboxKey: string;
  dispose(): Promise<void>;
}

async function fixture(env: Record<string, string> = {}): Promise<Fixture> {
  const dir = mkdtempSync(join(tmpdir(), 'fountain-hub-'));
  const schema = uniqueSchemaName();
  const srv = await startServer({
    dataDir: dir,
    port: 0,
    env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, ...env },
    databaseSchema: schema,
    acceptRunnerSocket: noSockets,
  });
  const owner = srv.bootstrapKey!;
  const res = await fetch(`${srv.url}/api/auth/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'sbx', scopes: ['sandbox'] }),
  });
  const sandboxKey = ((await res.json()) as { data: { key: string } }).data.key;
  return {
    srv,
    owner,
    sandboxKey,
    dispose: async () => {
      await srv.stop();
      await dropSchema(schema);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('runner WebSocket refusals (before the upgrade)', () => {
  let f: Fixture;
  let off: Fixture;
  before(async () => {
    [f, off] = await Promise.all([fixture(), fixture({ SANDBOX_RUNNERS_ENABLED: 'false' })]);
  });
  after(async () => {
    await Promise.all([f?.dispose(), off?.dispose()]);
  });

  it('401 without a key or with an unknown one', async () => {
    const none = await dial(f.srv.url, '?name=box');
    assert.deepEqual([none.status, none.body.error], [401, 'api_key_missing']);
    const bad = await dial(f.srv.url, '?name=box', `ftn_${'0'.repeat(64)}`);
    assert.deepEqual([bad.status, bad.body.error], [401, 'api_key_invalid']);
  });

  it('403 for a sandbox-scope key, even with runners disabled', async () => {
    const r = await dial(f.srv.url, '?name=box', f.sandboxKey);
    assert.deepEqual([r.status, r.body.error, r.body.required_scope], [403, 'insufficient_scope', 'full']);
    // Authentication comes first, so a disabled server still says 401 to a stranger.
    assert.equal((await dial(off.srv.url, '?name=box')).status, 401);
  });

  it('404 runners_disabled when SANDBOX_RUNNERS_ENABLED=false, for an upgrade and a plain GET', async () => {
    const r = await dial(off.srv.url, '?name=box', off.owner);
    assert.deepEqual([r.status, r.body.error], [404, 'runners_disabled']);
    const plain = await fetch(`${off.srv.url}/api/runners/ws?name=box`, {
      headers: { authorization: `Bearer ${off.owner}` },
    });
    assert.equal(plain.status, 404);
    assert.equal(((await plain.json()) as { error: string }).error, 'runners_disabled');
  });

  it('400 not_a_websocket for a plain GET or another upgrade protocol', async () => {
    const plain = await fetch(`${f.srv.url}/api/runners/ws?name=box`, {
      headers: { authorization: `Bearer ${f.owner}` },
    });
    assert.equal(plain.status, 400);
    assert.equal(((await plain.json()) as { error: string }).error, 'not_a_websocket');
    const other = await rawUpgrade(f.srv.url, '/api/runners/ws?name=box', f.owner, 'h2c');
    assert.deepEqual([other.status, other.body.error], [400, 'not_a_websocket']);
  });

  it('400 with field errors for a bad or missing name and over-long fields; nothing is stored', async () => {
    for (const [query, field] of [
      ['', 'name'],
      ['?name=', 'name'],
      ['?name=Big-Box', 'name'],
      ['?name=-box', 'name'],
      [`?name=${'a'.repeat(64)}`, 'name'],
      [`?name=box&os=${'x'.repeat(41)}`, 'os'],
      [`?name=box&root=${'r'.repeat(1025)}`, 'root'],
    ] as const) {
      const r = await dial(f.srv.url, query, f.owner);
      assert.equal(r.status, 400, query);
      assert.equal(r.body.error, 'invalid_runner');
      assert.ok(r.body.errors[field], `${query}: ${JSON.stringify(r.body)}`);
    }
    const me = (await (
      await fetch(`${f.srv.url}/api/auth/me`, { headers: { authorization: `Bearer ${f.owner}` } })
    ).json()) as {
      data: { id: string };
    };
    assert.deepEqual(await listRunners(f.srv.database.db, me.data.id), []);
  });

  it('upgrades on other paths are refused with 404 JSON', async () => {
    const r = await rawUpgrade(f.srv.url, '/api/elsewhere', f.owner, 'websocket');
    assert.deepEqual([r.status, r.body.error], [404, 'not_found']);
  });
});
