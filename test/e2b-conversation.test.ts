/**
 * Issue 7's last "Done when": a full conversation with the demo agent on the `e2b` provider,
 * against the loopback E2B stub (real HTTP, real Connect envelopes, real processes), over the public API.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2BAdapter } from '../src/providers/e2b/index.ts';
import { until } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { E2BStub } from './stubs/e2b/server.ts';

import { answer, call, openStream, type Json, type Reply, type SseEvent } from './helpers/http.ts';

describe('a conversation on the e2b provider against the stub', () => {
  const KEY = `e2b_conv_${randomBytes(8).toString('hex')}`;
  const schema = uniqueSchemaName();
  let tmp: string;
  let stub: E2BStub;
  let adapter: E2BAdapter;
  let srv: RunningServer;
  let key: string;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-e2b-conv-')));
    stub = await E2BStub.start({ apiKey: KEY });
    const urls = { E2B_BASE_URL: stub.apiUrl, E2B_SANDBOX_URL: stub.sandboxUrl };
    adapter = new E2BAdapter({
      apiKey: KEY,
      baseUrl: stub.apiUrl,
      sandboxUrl: stub.sandboxUrl,
      requestTimeoutMs: 15_000,
    });
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, E2B_API_KEY: KEY, ...urls, SANDBOX_PROVIDER: 'e2b' },
      databaseSchema: schema,
      adapters: [adapter],
      engine: { idleTimeoutMs: 1500, sweepIntervalMs: 250, askTimeoutMs: 60_000 },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    await srv?.stop();
    adapter?.close();
    await stub?.stop();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('runs a turn, a permission, idle park, wake, recall and terminate on e2b', async () => {
    const catalog = await api('GET', '/api/catalog');
    assert.equal(catalog.body.data.sandbox_providers.default, 'e2b');
    assert.ok(catalog.body.data.sandbox_providers.enabled.includes('e2b'));

    const agent = await api('POST', '/api/agents', {
      name: 'demo-e2b',
      runtime: 'demo',
      model: 'fountain/demo',
      sandbox_provider: 'e2b',
      permission_policy: { execute: 'ask' },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));

    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id, prompt: 'remember: blue' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const conv = created.body.data;
    assert.equal(conv.sandbox.provider, 'e2b');

    const s = openStream(`${srv.url}/api/conversations/${conv.id}/stream`, key);
    try {
      await s.stage('provision', 'done');
      const t1 = await s.stage('turn', 'done');
      assert.match(answer(s.events, t1.data.turn_id), /I will remember that: blue/);
      // The sandbox the stub made is the one the conversation names.
      assert.ok(
        stub.requests.some((r) => r.server === 'api' && r.method === 'POST' && r.path === '/sandboxes'),
        'the stub created a sandbox',
      );

      // The turn's events read back over the paged /events endpoint.
      const page = await api('GET', `/api/conversations/${conv.id}/events?after=0&limit=1000`);
      assert.equal(page.status, 200);
      assert.ok((page.body.data as Json[]).some((e) => e.turn_id === t1.data.turn_id && e.stream === 'acp'));

      // A permission, answered over HTTP.
      const p2 = await api('POST', `/api/conversations/${conv.id}/prompts`, {
        prompt: 'run: echo e2b-sandbox-says-hi',
      });
      assert.equal(p2.status, 200, JSON.stringify(p2.body));
      const asked = await s.stage('permission', 'started', t1.id!);
      const request = JSON.parse(asked.data.data);
      const yes = await api('POST', `/api/conversations/${conv.id}/requests/${request.request_id}`, {
        option_id: 'allow_once',
      });
      assert.deepEqual([yes.status, yes.body], [200, { ok: true }]);
      const t2 = await s.stage('turn', 'done', asked.id!);
      assert.equal(t2.data.turn_id, p2.body.turn_id);
      assert.match(answer(s.events, p2.body.turn_id), /e2b-sandbox-says-hi/);

      // Idle: the sweep parks the sandbox (E2B pause).
      await s.stage('sandbox', 'done', t2.id!);
      await until(
        async () =>
          (await api('GET', `/api/conversations/${conv.id}`)).body.data.sandbox.status === 'suspended' || null,
        'the sandbox to park',
      );
      assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.status, 'idle');

      // Wake on the next prompt; the demo agent's memory survived the pause.
      const mark = s.events.at(-1)!.id!;
      const p3 = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'recall' });
      assert.equal(p3.status, 200, JSON.stringify(p3.body));
      await s.stage('turn', 'done', mark);
      assert.match(answer(s.events, p3.body.turn_id), /blue/);
      const turns = await api('GET', `/api/conversations/${conv.id}/turns`);
      assert.deepEqual(
        turns.body.data.map((t: Json) => t.status),
        ['completed', 'completed', 'completed'],
      );

      const term = await api('POST', `/api/conversations/${conv.id}/terminate`);
      assert.equal(term.status, 204);
      await s.stage('terminate', 'done');
      assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.status, 'terminated');
      assert.ok(
        stub.requests.some((r) => r.server === 'api' && r.method === 'DELETE' && r.path.startsWith('/sandboxes/')),
        'the stub was asked to kill the sandbox',
      );
    } finally {
      s.close();
    }
  });
});
