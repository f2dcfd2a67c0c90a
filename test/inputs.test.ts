/**
 * Inputs that cannot hurt (issue 22 #7, #8, #9, #13), against the real server on its embedded
 * database: NUL bytes in every stored text field, metadata depth and size, the body limit and form
 * types on every route (the unauthenticated /signin included), and SSE headers sent at once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { insertConversation } from '../src/server/conversations/store.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { call, type Json } from './helpers/http.ts';

describe('inputs that cannot hurt', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let agentId: string;
  const api = (method: string, path: string, body?: unknown, raw?: string) =>
    call(srv.url, key, method, path, body, raw);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-inputs-')));
    srv = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: {}, sseHeartbeatMs: 600_000 });
    key = srv.bootstrapKey!;
    const agent = await api('POST', '/api/agents', { name: 'inputs', runtime: 'demo', model: 'fountain/demo' });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    agentId = agent.body.data.id;
  });
  after(async () => {
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('a NUL byte in any stored text field answers 422 naming the field, and stores nothing (#7)', async () => {
    const agent = (extra: Json) => ({ name: 'n', runtime: 'demo', model: 'fountain/demo', ...extra });
    const cases: Array<[string, string, Json, string]> = [
      ['POST', '/api/agents', agent({ name: 'bad\u0000name' }), 'name'],
      ['POST', '/api/agents', agent({ description: 'd\u0000' }), 'description'],
      ['POST', '/api/agents', agent({ system: 'be\u0000good' }), 'system'],
      ['POST', '/api/agents', agent({ metadata: { 'k\u0000ey': 1 } }), 'metadata.k\\u0000ey'],
      ['POST', '/api/agents', agent({ metadata: { list: ['ok', 'v\u0000'] } }), 'metadata.list.1'],
      ['PATCH', `/api/agents/AGENT`, { description: '\u0000' }, 'description'],
      ['POST', '/api/auth/api-keys', { name: 'key\u0000name' }, 'name'],
      ['POST', '/api/admin/accounts', { name: 'acc\u0000ount', email: 'nul@example.com' }, 'name'],
      ['POST', '/api/conversations', { agent_id: 'AGENT', prompt: 'hi\u0000' }, 'prompt'],
      ['POST', '/api/conversations', { agent_id: 'AGENT', title: 't\u0000' }, 'title'],
      ['POST', `/api/team/AGENT/messages`, { prompt: 'to\u0000you' }, 'prompt'],
      ['POST', `/api/team/AGENT/schedules`, { cron: '0 * * * *', prompt: 'tick\u0000' }, 'prompt'],
    ];
    for (const [method, path, body, field] of cases) {
      const r = await api(method, path.replace('AGENT', agentId), body);
      assert.equal(r.status, 422, `${method} ${path}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error, 'validation_failed');
      assert.deepEqual(r.body.errors, { [field]: ['must not contain NUL bytes'] }, `${method} ${path}`);
    }
    const agents = (await api('GET', '/api/agents')).body.data as Json[];
    assert.deepEqual(
      agents.map((a) => a.name),
      ['inputs'],
      'nothing was stored',
    );
  });

  it('metadata is bounded in depth and size at validation: 422, never 500 (#8)', async () => {
    const deep = (n: number): Json => (n === 0 ? 1 : { a: deep(n - 1) });
    const body = (metadata: Json) => ({ name: `m${Math.random()}`, runtime: 'demo', model: 'fountain/demo', metadata });
    // 5,000 levels: refused before the body is parsed.
    const raw = `{"name":"m","runtime":"demo","model":"fountain/demo","metadata":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
    const r1 = await api('POST', '/api/agents', undefined, raw);
    assert.equal(r1.status, 422, JSON.stringify(r1.body));
    assert.match(r1.body.message, /nest at most 32 levels/);
    const r2 = await api('POST', '/api/agents', body(deep(20)));
    assert.deepEqual([r2.status, r2.body.errors?.metadata], [422, ['may nest at most 8 levels']]);
    const r3 = await api('POST', '/api/agents', body({ blob: 'x'.repeat(20_000) }));
    assert.equal(r3.status, 422);
    assert.match(r3.body.errors.metadata[0], /at most 16384/);
    const fine = await api('POST', '/api/agents', body(deep(7)));
    assert.equal(fine.status, 201, JSON.stringify(fine.body));
    const patched = await api('PATCH', `/api/agents/${fine.body.data.id}`, { metadata: deep(9) });
    assert.equal(patched.status, 422);
  });

  it('every route takes at most 1 MiB, /signin included, and answers a form type it does not take in words (#9)', async () => {
    // /signin needs no key: a large body is refused while it is read, not read whole before a 401.
    const big = 'api_key=' + 'x'.repeat(2 * 1024 * 1024);
    const signin = await fetch(`${srv.url}/signin`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: srv.url },
      body: big,
    });
    assert.equal(signin.status, 413);
    assert.equal((await signin.json()).error, 'payload_too_large');
    // The same without a Content-Length: chunked, refused once past the limit.
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${srv.url}/signin`,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            origin: srv.url,
            'transfer-encoding': 'chunked',
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      const chunk = 'x'.repeat(64 * 1024);
      let sent = 0;
      const pump = () => {
        while (sent < 4 * 1024 * 1024) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    }).catch(() => 413);
    assert.equal(chunked, 413);

    const form = new FormData();
    form.set('api_key', 'ftn_x');
    for (const path of ['/signin', '/api/agents']) {
      const r = await fetch(`${srv.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, origin: srv.url },
        body: form,
      });
      assert.equal(r.status, 415, path);
      const b = (await r.json()) as Json;
      assert.equal(b.error, 'unsupported_media_type');
      assert.match(b.message, /multipart\/form-data is not taken here/);
    }
    const urlencoded = await fetch(`${srv.url}/api/agents`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=x',
    });
    assert.equal(urlencoded.status, 415);
    assert.match(((await urlencoded.json()) as Json).message, /send application\/json/);
  });

  it('an SSE response sends its headers and a first comment at once, before any event (#13)', async () => {
    // A conversation with no events yet and heartbeats 10 minutes apart: only the first comment can flush the headers.
    const db = srv.database.db as unknown as EngineDb;
    const accountId = (await api('GET', '/api/auth/me')).body.data.id as string;
    const { conversation } = await insertConversation(
      db,
      { accountId, agentId, status: 'idle', runtime: 'demo', permissionPolicy: {}, source: 'api' },
      { provider: 'runner', name: `runner-${'0'.repeat(32)}-00000000`, status: 'suspended' },
    );
    for (const path of [`/api/conversations/${conversation.id}/stream`, '/api/team/stream']) {
      const ac = new AbortController();
      const guard = setTimeout(() => ac.abort(), 60_000);
      try {
        const res = await fetch(`${srv.url}${path}`, {
          headers: { authorization: `Bearer ${key}` },
          signal: ac.signal,
        });
        assert.equal(res.status, 200, path);
        assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
        const first = await res.body!.getReader().read();
        assert.equal(Buffer.from(first.value!).toString(), ': connected\n\n', path);
      } finally {
        clearTimeout(guard);
        ac.abort();
      }
    }
  });
});
