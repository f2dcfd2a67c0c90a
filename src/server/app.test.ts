import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from './start.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from './store/testing.ts';
import { listAudit } from './account/audit.ts';
import { mintApiKey } from './core/keys-store.ts';
import { upsertRunner } from './runners/store.ts';
import type { AcceptRunnerSocket } from './runners/hub.ts';

const noSockets: AcceptRunnerSocket = () => assert.fail('no upgrade is expected in this test');

interface Json {
  status: number;
  body: any;
  headers: Headers;
}

async function call(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; raw?: string; type?: string } = {},
): Promise<Json> {
  const headers: Record<string, string> = {};
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | undefined;
  if (opts.raw !== undefined) {
    body = opts.raw;
    headers['content-type'] = opts.type ?? 'application/json';
  } else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(base + path, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

describe('server HTTP API (PostgreSQL)', () => {
  let dir: string;
  let schema: string;
  let srv: RunningServer;
  let owner: string;
  const api = (method: string, path: string, opts?: Parameters<typeof call>[3]) => call(srv.url, method, path, opts);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-server-'));
    schema = uniqueSchemaName();
    srv = await startServer({
      dataDir: dir,
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
      acceptRunnerSocket: noSockets,
    });
    assert.ok(srv.bootstrapKey);
    owner = srv.bootstrapKey;
  });
  after(async () => {
    await srv?.stop();
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  it('listens on loopback with an ephemeral port and answers health without auth', async () => {
    assert.match(srv.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(srv.port, 0);
    const r = await api('GET', '/api/health');
    assert.deepEqual([r.status, r.body], [200, { status: 'ok' }]);
  });

  it('writes the bootstrap key once, mode 0600, and it authenticates as the owner', async () => {
    assert.equal(srv.bootstrapCreated, true);
    assert.equal(statSync(srv.bootstrapKeyFile).mode & 0o777, 0o600);
    assert.equal(readFileSync(srv.bootstrapKeyFile, 'utf8').trim(), owner);
    const me = await api('GET', '/api/auth/me', { key: owner });
    assert.equal(me.status, 200);
    assert.equal(me.body.data.role, 'owner');
    assert.deepEqual(me.body.data.key.scopes, ['full']);
    assert.equal(me.body.data.key.prefix, owner.slice(0, 12));
  });

  it('refuses missing, malformed, unknown and revoked keys with 401 and a code', async () => {
    const missing = await api('GET', '/api/auth/me');
    assert.equal(missing.status, 401);
    assert.equal(missing.body.error, 'api_key_missing');
    assert.equal(typeof missing.body.message, 'string');
    assert.equal(missing.headers.get('www-authenticate'), 'Bearer');
    const malformed = await call(srv.url, 'GET', '/api/auth/me', { key: 'ftn_nothex' });
    assert.deepEqual([malformed.status, malformed.body.error], [401, 'api_key_invalid']);
    const unknown = await api('GET', '/api/auth/me', { key: mintApiKey() });
    assert.deepEqual([unknown.status, unknown.body.error], [401, 'api_key_invalid']);

    const made = await api('POST', '/api/auth/api-keys', { key: owner, body: { name: 'short-lived' } });
    assert.equal(made.status, 201);
    // Used first, so the node remembers it (key-cache-store.ts): the revocation must still take effect at once.
    assert.equal((await api('GET', '/api/auth/me', { key: made.body.data.key })).status, 200);
    assert.equal((await api('DELETE', `/api/auth/api-keys/${made.body.data.id}`, { key: owner })).status, 204);
    const revoked = await api('GET', '/api/auth/me', { key: made.body.data.key });
    assert.deepEqual([revoked.status, revoked.body.error], [401, 'api_key_revoked']);
  });

  it('creates keys shown once, lists them without the plaintext, stamps last_used_at', async () => {
    const made = await api('POST', '/api/auth/api-keys', { key: owner, body: { name: 'laptop' } });
    assert.equal(made.status, 201);
    const k = made.body.data;
    assert.match(k.key, /^ftn_[0-9a-f]{64}$/);
    assert.equal(k.prefix, k.key.slice(0, 12));
    assert.deepEqual(k.scopes, ['full']);
    assert.equal((await api('GET', '/api/auth/me', { key: k.key })).status, 200);
    const list = await api('GET', '/api/auth/api-keys', { key: owner });
    assert.equal(list.status, 200);
    const listed = list.body.data.find((x: any) => x.id === k.id);
    assert.ok(listed);
    assert.equal(listed.key, undefined);
    assert.ok(!JSON.stringify(list.body).includes(k.key));
    assert.ok(list.body.data.some((x: any) => x.name === 'bootstrap'));
  });

  it('sandbox-scope keys can ask who they are but not manage keys, runners or accounts', async () => {
    const made = await api('POST', '/api/auth/api-keys', { key: owner, body: { name: 'sbx', scopes: ['sandbox'] } });
    assert.equal(made.status, 201);
    const sbx = made.body.data.key;
    assert.equal((await api('GET', '/api/auth/me', { key: sbx })).status, 200);
    for (const [m, p, body] of [
      ['GET', '/api/auth/api-keys', undefined],
      ['POST', '/api/auth/api-keys', { name: 'x' }],
      ['GET', '/api/runners', undefined],
      ['POST', '/api/admin/accounts', { name: 'x' }],
    ] as const) {
      const r = await api(m, p, { key: sbx, ...(body ? { body } : {}) });
      assert.equal(r.status, 403, `${m} ${p}`);
      assert.equal(r.body.error, 'insufficient_scope');
      assert.equal(r.body.required_scope, 'full');
    }
  });

  it('bad bodies answer 4xx with codes, never 500', async () => {
    const noName = await api('POST', '/api/auth/api-keys', { key: owner, body: {} });
    assert.equal(noName.status, 422);
    assert.equal(noName.body.error, 'validation_failed');
    assert.deepEqual(noName.body.errors.name, ['name is required']);
    const badScope = await api('POST', '/api/auth/api-keys', { key: owner, body: { name: 'x', scopes: ['root'] } });
    assert.deepEqual([badScope.status, badScope.body.error], [422, 'validation_failed']);
    assert.ok(badScope.body.errors['scopes.0']);
    const extra = await api('POST', '/api/auth/api-keys', { key: owner, body: { name: 'x', admin: true } });
    assert.equal(extra.status, 422);
    const past = await api('POST', '/api/auth/api-keys', {
      key: owner,
      body: { name: 'x', expires_at: '2001-01-01T00:00:00Z' },
    });
    assert.deepEqual([past.status, past.body.error], [422, 'validation_failed']);
    const broken = await api('POST', '/api/auth/api-keys', { key: owner, raw: '{"name":' });
    assert.deepEqual([broken.status, broken.body.error], [400, 'invalid_json']);
    const notJson = await api('POST', '/api/auth/api-keys', { key: owner, raw: 'name=x', type: 'text/plain' });
    assert.deepEqual([notJson.status, notJson.body.error], [415, 'unsupported_media_type']);
    const array = await api('POST', '/api/auth/api-keys', { key: owner, body: [1, 2] });
    assert.equal(array.status, 422);
    const huge = await api('POST', '/api/auth/api-keys', { key: owner, body: { name: 'x'.repeat(2 * 1024 * 1024) } });
    assert.deepEqual([huge.status, huge.body.error], [413, 'payload_too_large']);
  });

  it('unknown routes and ids answer 404 JSON', async () => {
    const r = await api('GET', '/api/nope');
    assert.deepEqual([r.status, r.body.error], [404, 'not_found']);
    const r2 = await api('GET', '/elsewhere', { key: owner });
    assert.deepEqual([r2.status, r2.body.error], [404, 'not_found']);
    const notUuid = await api('DELETE', '/api/auth/api-keys/not-a-uuid', { key: owner });
    assert.deepEqual([notUuid.status, notUuid.body.error], [404, 'not_found']);
    const unknown = await api('DELETE', '/api/runners/00000000-0000-4000-8000-000000000000', { key: owner });
    assert.deepEqual([unknown.status, unknown.body.error], [404, 'not_found']);
  });

  it('only the owner creates accounts; another account’s keys and runners answer 404', async () => {
    const created = await api('POST', '/api/admin/accounts', {
      key: owner,
      body: { name: 'bob', email: 'bob@example.test' },
    });
    assert.equal(created.status, 201);
    const bob = created.body.data.key.key as string;
    assert.match(bob, /^ftn_[0-9a-f]{64}$/);
    assert.deepEqual(created.body.data.key.scopes, ['full']);
    const bobMe = await api('GET', '/api/auth/me', { key: bob });
    assert.deepEqual(
      [bobMe.body.data.role, bobMe.body.data.email, bobMe.body.data.name],
      ['user', 'bob@example.test', 'bob'],
    );
    const again = await api('POST', '/api/admin/accounts', {
      key: owner,
      body: { name: 'bob2', email: 'bob@example.test' },
    });
    assert.deepEqual([again.status, again.body.error], [409, 'email_taken']);
    const badEmail = await api('POST', '/api/admin/accounts', { key: owner, body: { name: 'c', email: 'nope' } });
    assert.equal(badEmail.status, 422);
    const notOwner = await api('POST', '/api/admin/accounts', { key: bob, body: { name: 'eve' } });
    assert.deepEqual([notOwner.status, notOwner.body.error], [403, 'owner_only']);

    // Bob cannot see or revoke the owner's keys.
    const ownerKeys = (await api('GET', '/api/auth/api-keys', { key: owner })).body.data as any[];
    const bobKeys = (await api('GET', '/api/auth/api-keys', { key: bob })).body.data as any[];
    assert.equal(bobKeys.length, 1);
    assert.ok(!bobKeys.some((k) => ownerKeys.some((o) => o.id === k.id)));
    const foreign = await api('DELETE', `/api/auth/api-keys/${ownerKeys[0].id}`, { key: bob });
    assert.deepEqual([foreign.status, foreign.body.error], [404, 'not_found']);
    assert.equal((await api('GET', '/api/auth/me', { key: owner })).status, 200);

    // Runners likewise.
    const ownerId = (await api('GET', '/api/auth/me', { key: owner })).body.data.id;
    const { runner } = await upsertRunner(srv.database.db, ownerId, { name: 'owner-box', os: 'linux' });
    assert.deepEqual((await api('GET', '/api/runners', { key: bob })).body.data, []);
    const del = await api('DELETE', `/api/runners/${runner.id}`, { key: bob });
    assert.deepEqual([del.status, del.body.error], [404, 'not_found']);
    const listed = (await api('GET', '/api/runners', { key: owner })).body.data;
    assert.equal(listed.length, 1);
    assert.equal(listed[0].name, 'owner-box');
    assert.equal(listed[0].online, false);
    assert.equal((await api('DELETE', `/api/runners/${runner.id}`, { key: owner })).status, 204);
    assert.deepEqual((await api('GET', '/api/runners', { key: owner })).body.data, []);
    assert.equal((await listAudit(srv.database.db, ownerId, 'runner.deleted')).length, 1);
  });

  it('serves an OpenAPI document generated from the route schemas', async () => {
    const r = await api('GET', '/api/openapi.json');
    assert.equal(r.status, 200);
    const paths = Object.keys(r.body.paths).sort();
    assert.deepEqual(paths, [
      '/api/account',
      '/api/account/inference-credentials',
      '/api/account/inference-credentials/{provider}',
      '/api/account/limits',
      '/api/admin/accounts',
      '/api/admin/accounts/{id}/limits',
      '/api/agents',
      '/api/agents/{id}',
      '/api/auth/api-keys',
      '/api/auth/api-keys/{id}',
      '/api/auth/me',
      '/api/catalog',
      '/api/conversations',
      '/api/conversations/{id}',
      '/api/conversations/{id}/events',
      '/api/conversations/{id}/fork',
      '/api/conversations/{id}/interrupt',
      '/api/conversations/{id}/labels',
      '/api/conversations/{id}/labels/{key}',
      '/api/conversations/{id}/move',
      '/api/conversations/{id}/prompts',
      '/api/conversations/{id}/push',
      '/api/conversations/{id}/read',
      '/api/conversations/{id}/requests/{request_id}',
      '/api/conversations/{id}/settings',
      '/api/conversations/{id}/stream',
      '/api/conversations/{id}/terminate',
      '/api/conversations/{id}/turns',
      '/api/conversations/{id}/turns/{turn_id}/images/{position}',
      '/api/environments',
      '/api/environments/{id}',
      '/api/environments/{id}/branches',
      '/api/environments/{id}/secrets',
      '/api/environments/{id}/secrets/{key}',
      '/api/events/stream',
      '/api/health',
      '/api/mcp/team/{conversation_id}',
      '/api/runners',
      '/api/runners/register',
      '/api/runners/registrations',
      '/api/runners/ws',
      '/api/runners/{id}',
      '/api/team',
      '/api/team/schedules',
      '/api/team/stream',
      '/api/team/{agent_id}',
      '/api/team/{agent_id}/conversations',
      '/api/team/{agent_id}/messages',
      '/api/team/{agent_id}/schedules',
      '/api/team/{agent_id}/schedules/{id}',
      '/api/team/{agent_id}/schedules/{id}/run',
      '/api/usage',
      '/api/usage/calls',
      '/api/usage/limits',
      '/api/webhooks',
      '/api/webhooks/{id}',
      '/api/webhooks/{id}/deliveries',
      '/api/webhooks/{id}/deliveries/{delivery_id}/redeliver',
      '/api/webhooks/{id}/rotate-secret',
    ]);
    const body = r.body.paths['/api/auth/api-keys'].post.requestBody.content['application/json'].schema;
    const schema = body.$ref ? r.body.components.schemas[body.$ref.split('/').pop()] : body;
    assert.deepEqual(schema.required, ['name']);
    assert.ok(r.body.components.securitySchemes.bearer);
  });

  it('every /api route has a spec entry', async () => {
    const doc = (await api('GET', '/api/openapi.json')).body;
    const routes = srv.app.routes.filter(
      (r) => r.path.startsWith('/api/') && r.method !== 'ALL' && r.path !== '/api/openapi.json',
    );
    assert.ok(routes.length >= 8);
    for (const r of routes) {
      const path = r.path.replace(/:([A-Za-z_]+)/g, '{$1}');
      assert.ok(doc.paths[path]?.[r.method.toLowerCase()], `${r.method} ${r.path} has no OpenAPI entry`);
    }
  });
});

describe('default store: embedded PGlite under the data dir', () => {
  let dir: string;
  let srv: RunningServer;
  let owner: string;
  const api = (method: string, path: string, opts?: Parameters<typeof call>[3]) => call(srv.url, method, path, opts);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-server-'));
    srv = await startServer({ dataDir: dir, port: 0, env: {}, acceptRunnerSocket: noSockets });
    owner = srv.bootstrapKey!;
  });
  after(async () => {
    await srv?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('bootstraps the owner on PGlite: key file 0600, key works', async () => {
    assert.equal(srv.database.kind, 'pglite');
    assert.ok(statSync(join(dir, 'pgdata')).isDirectory());
    assert.equal(srv.bootstrapCreated, true);
    assert.equal(statSync(join(dir, 'bootstrap-key')).mode & 0o777, 0o600);
    assert.equal((await api('GET', '/api/auth/me', { key: owner })).body.data.role, 'owner');
    const made = await api('POST', '/api/auth/api-keys', { key: owner, body: { name: 'kept' } });
    assert.equal(made.status, 201);
  });

  it('a restart keeps the owner and reads the key back instead of minting another', async () => {
    // A second server on the same data dir must wait for the first to release PGlite.
    await srv.stop();
    srv = await startServer({
      dataDir: dir,
      port: 0,
      env: { FOUNTAIN_BOOTSTRAP_KEY: mintApiKey() },
      acceptRunnerSocket: noSockets,
    });
    assert.equal(srv.bootstrapCreated, false);
    assert.equal(srv.bootstrapKey, owner);
    assert.equal((await api('GET', '/api/auth/me', { key: owner })).body.data.role, 'owner');
    const names = (await api('GET', '/api/auth/api-keys', { key: owner })).body.data.map((k: any) => k.name).sort();
    assert.deepEqual(names, ['bootstrap', 'kept']);
  });
});

describe('bootstrap on PostgreSQL', () => {
  it('uses FOUNTAIN_BOOTSTRAP_KEY on first start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-server-'));
    const schema = uniqueSchemaName();
    const preset = mintApiKey();
    const srv = await startServer({
      dataDir: dir,
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, FOUNTAIN_BOOTSTRAP_KEY: preset },
      databaseSchema: schema,
      acceptRunnerSocket: noSockets,
    });
    try {
      assert.equal(srv.database.kind, 'postgres');
      assert.equal(srv.bootstrapKey, preset);
      assert.equal(statSync(join(dir, 'bootstrap-key')).mode & 0o777, 0o600);
      const me = await call(srv.url, 'GET', '/api/auth/me', { key: preset });
      assert.equal(me.body.data.role, 'owner');
    } finally {
      await srv.stop();
      await dropSchema(schema);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a malformed FOUNTAIN_BOOTSTRAP_KEY naming the variable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-server-'));
    try {
      await assert.rejects(
        startServer({
          dataDir: dir,
          port: 0,
          env: { FOUNTAIN_BOOTSTRAP_KEY: 'ftn_123' },
          acceptRunnerSocket: noSockets,
        }),
        /FOUNTAIN_BOOTSTRAP_KEY: must be ftn_/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
