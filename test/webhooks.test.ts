/**
 * Signed webhooks end to end: the real server with a real runner and the demo agent, a local receiver
 * that checks every signature; retries after failures, delivery after a restart, and two server nodes
 * on PostgreSQL delivering each event once.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { FOUNTAIN_BIN, type RunnerChild, startRunnerChild, until } from '../src/server/conversations/testing.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { verifyWebhook } from '../src/server/webhooks/signature.ts';
import { call, type Json } from './helpers/http.ts';

interface Receipt {
  headers: Record<string, string | undefined>;
  body: string;
  json: Json;
}

/** A local receiver: records every request; `answer` decides each status (default 200). */
async function receiver(port = 0): Promise<{
  url: string;
  port: number;
  got: Receipt[];
  answer: (r: Receipt) => number;
  close: () => Promise<void>;
  server: Server;
}> {
  const got: Receipt[] = [];
  const self = {
    url: '',
    port: 0,
    got,
    answer: (_r: Receipt) => 200,
    close: async () => {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
    server: null as unknown as Server,
  };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const r: Receipt = {
        headers: {
          signature: req.headers['x-fountain-signature'] as string | undefined,
          timestamp: req.headers['x-fountain-timestamp'] as string | undefined,
          event: req.headers['x-fountain-event'] as string | undefined,
          eventId: req.headers['x-fountain-event-id'] as string | undefined,
        },
        body,
        json: JSON.parse(body),
      };
      got.push(r);
      const status = self.answer(r);
      res
        .writeHead(status, { 'content-type': 'text/plain' })
        .end(status === 200 ? 'thanks' : 'receiver is down for maintenance');
    });
  });
  self.server = server;
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  self.port = (server.address() as AddressInfo).port;
  self.url = `http://127.0.0.1:${self.port}/hooks/fountain`;
  return self;
}

const FAST = { tickMs: 40, retryDelaysMs: [60, 60, 60, 60, 60, 60, 60], lookBackMs: 2_000 };

describe('signed webhooks with a real runner and the demo agent', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild | undefined;
  let rx: Awaited<ReturnType<typeof receiver>>;
  const statements: string[] = [];
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-webhooks-')));
    rx = await receiver();
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      engine: { askTimeoutMs: 60_000 },
      webhooks: FAST,
      queryLogger: { logQuery: (q) => void statements.push(q) },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    await rx?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('refuses bad endpoints in words and keeps nothing of them', async () => {
    for (const [body, field] of [
      [{ url: 'ftp://example.test/x', events: ['turn.ended'] }, 'url'],
      [{ url: 'not a url', events: ['turn.ended'] }, 'url'],
      [{ url: 'http://user:pw@127.0.0.1/x', events: ['turn.ended'] }, 'url'],
      [{ url: rx.url, events: [] }, 'events'],
      [{ url: rx.url, events: ['turn.started'] }, 'events.0'],
      [{ url: rx.url, events: ['turn.ended'], secret: 'short' }, 'secret'],
      [{ url: rx.url, events: ['turn.ended'], extra: 1 }, '_'],
    ] as const) {
      const r = await api('POST', '/api/webhooks', body);
      assert.equal(r.status, 422, JSON.stringify(r.body));
      assert.equal(r.body.error, 'validation_failed');
      assert.ok(
        Object.keys(r.body.errors).some((f) => f === field || f.startsWith(field)),
        JSON.stringify(r.body),
      );
    }
    assert.deepEqual((await api('GET', '/api/webhooks')).body.data, []);
    assert.equal((await api('GET', '/api/webhooks/not-a-uuid')).status, 404);
    assert.equal((await api('DELETE', `/api/webhooks/${'0'.repeat(8)}-0000-0000-0000-${'0'.repeat(12)}`)).status, 404);
  });

  it('without an endpoint, a tick queues and claims nothing (it reads no events)', async () => {
    const from = statements.length;
    const ticks = () => statements.slice(from).filter((q) => q.includes('max(id) AS m FROM events')).length;
    await until(async () => ticks() >= 10, 'ten webhook ticks');
    const work = statements.slice(from).filter((q) => /webhook_deliveries/.test(q));
    assert.deepEqual(work, [], 'no delivery statement while no endpoint exists');
  });

  it('delivers every event kind signed with the secret, ids only', async () => {
    const created = await api('POST', '/api/webhooks', {
      url: rx.url,
      events: ['conversation.created', 'turn.ended', 'permission.requested', 'conversation.failed', 'runner.offline'],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const secret: string = created.body.secret;
    assert.match(secret, /^whsec_/);
    const hook = created.body.data;
    assert.equal((await api('GET', `/api/webhooks/${hook.id}`)).body.data.secret, undefined, 'never shown again');

    runner = startRunnerChild({ name: 'w', root: join(tmp, 'sandboxes'), baseUrl: srv.url, apiKey: key, home: tmp });
    await until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'runner online',
      60_000,
    );
    const agent = await api('POST', '/api/agents', {
      name: 'demo',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { execute: 'ask' },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const conv = await api('POST', '/api/conversations', { agent_id: agent.body.data.id, prompt: 'run: echo hooked' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id = conv.body.data.id;

    const ask = await until(() => rx.got.find((r) => r.json.type === 'permission.requested'), 'permission.requested');
    assert.equal(ask.json.data.conversation_id, id);
    const turns = await api('GET', `/api/conversations/${id}/turns`);
    const pending = turns.body.data[0].pending_permission;
    const yes = await api('POST', `/api/conversations/${id}/requests/${pending.request_id}`, {
      option_id: 'allow_once',
    });
    assert.equal(yes.status, 200, JSON.stringify(yes.body));
    const ended = await until(() => rx.got.find((r) => r.json.type === 'turn.ended'), 'turn.ended');
    assert.deepEqual(
      { conversation: ended.json.data.conversation_id, turn: ended.json.data.turn_id, status: ended.json.data.status },
      { conversation: id, turn: turns.body.data[0].id, status: 'completed' },
    );
    await until(() => rx.got.find((r) => r.json.type === 'conversation.created'), 'conversation.created');

    // A failed provisioning as the engine stores it: the scan reads stage events, whoever wrote them.
    await srv.database.db.execute(
      sql`INSERT INTO events (conversation_id, kind, stream, data, stage, state) VALUES (${id}, 'stage', '', '{"reason":"test"}', 'provision', 'failed')`,
    );
    await until(() => rx.got.find((r) => r.json.type === 'conversation.failed'), 'conversation.failed');

    await runner.stop();
    runner = undefined;
    const offline = await until(() => rx.got.find((r) => r.json.type === 'runner.offline'), 'runner.offline');
    assert.equal(offline.json.data.name, 'w');

    for (const r of rx.got) {
      assert.ok(
        verifyWebhook(secret, { signature: r.headers.signature, timestamp: r.headers.timestamp }, r.body),
        r.body,
      );
      assert.ok(
        !verifyWebhook(secret, { signature: r.headers.signature, timestamp: r.headers.timestamp }, `${r.body} `),
      );
      assert.ok(
        !verifyWebhook('whsec_other', { signature: r.headers.signature, timestamp: r.headers.timestamp }, r.body),
      );
      assert.equal(r.headers.event, r.json.type);
      assert.equal(r.headers.eventId, r.json.id);
      assert.ok(!r.body.includes('echo hooked'), 'ids, not contents');
    }
    const kinds = rx.got.map((r) => r.json.id);
    assert.equal(new Set(kinds).size, kinds.length, 'each event once');
    const log = await api('GET', `/api/webhooks/${hook.id}/deliveries`);
    assert.equal(log.status, 200);
    assert.ok((log.body.data as Json[]).every((d) => d.status === 'delivered' && d.attempt_log[0].status_code === 200));
  });

  it('retries a receiver that answers 500 three times and delivers exactly once more; redelivery on request', async () => {
    const flaky = await receiver();
    try {
      let failures = 0;
      flaky.answer = () => (failures++ < 3 ? 500 : 200);
      const hook = (await api('POST', '/api/webhooks', { url: flaky.url, events: ['conversation.failed'] })).body.data;
      const conv = (await api('GET', '/api/conversations')).body.data[0];
      await srv.database.db.execute(
        sql`INSERT INTO events (conversation_id, kind, stream, data, stage, state) VALUES (${conv.id}, 'stage', '', '{}', 'provision', 'failed')`,
      );
      await until(() => flaky.got.length >= 4, 'four attempts');
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(flaky.got.length, 4, 'nothing after the success');
      assert.equal(new Set(flaky.got.map((r) => r.json.id)).size, 1);
      const [d] = (await api('GET', `/api/webhooks/${hook.id}/deliveries`)).body.data as Json[];
      assert.equal(d.status, 'delivered');
      assert.equal(d.attempts, 4);
      assert.deepEqual(
        (d.attempt_log as Json[]).map((a) => a.status_code),
        [500, 500, 500, 200],
      );
      assert.equal(d.attempt_log[0].response_excerpt, 'receiver is down for maintenance');
      assert.equal((await api('GET', `/api/webhooks/${hook.id}`)).body.data.failing_since, null, 'the streak ended');

      const again = await api('POST', `/api/webhooks/${hook.id}/deliveries/${d.id}/redeliver`);
      assert.equal(again.status, 202, JSON.stringify(again.body));
      await until(() => flaky.got.length === 5, 'the redelivery');
      assert.equal(flaky.got[4]!.json.id, d.event_id);
      await api('DELETE', `/api/webhooks/${hook.id}`);
    } finally {
      await flaky.close();
    }
  });

  it('the CLI adds, lists, shows deliveries of and removes an endpoint, and says what is wrong with bad input', async () => {
    const cli = (...args: string[]) =>
      new Promise<{ code: number; out: string; err: string }>((resolve) => {
        execFile(
          process.execPath,
          [FOUNTAIN_BIN, 'webhooks', ...args],
          { env: { ...process.env, HOME: tmp, FOUNTAIN_BASE_URL: srv.url, FOUNTAIN_API_KEY: key } },
          (e, out, err) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out, err }),
        );
      });
    const added = await cli('add', rx.url, '--event', 'turn.ended,conversation.created');
    assert.equal(added.code, 0, added.err);
    const m =
      /added (\S+) for turn\.ended, conversation\.created\nsigning secret \(shown once; keep it with the receiver\): (whsec_\S+)/.exec(
        added.out,
      );
    assert.ok(m, added.out);
    const listed = await cli('list');
    assert.match(
      listed.out,
      new RegExp(`${m[1]}\\s+${rx.url.replace(/[.]/g, '\\.')}\\s+turn\\.ended,conversation\\.created\\s+enabled`),
    );
    assert.equal((await cli('deliveries', m[1]!)).code, 0);
    const bad = await cli('add', rx.url, '--event', 'turn.started');
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /each event must be one of conversation\.created/);
    assert.match((await cli('deliveries', m[1]!, '--limit', '0')).err, /--limit takes 1 to 500/);
    const removed = await cli('rm', m[1]!);
    assert.equal(removed.code, 0, removed.err);
    assert.equal((await api('GET', `/api/webhooks/${m[1]}`)).status, 404);
  });

  it('a delivery pending when the server stops goes out after it starts again', async () => {
    // A port with nothing listening: the first attempts are refused.
    const probe = await receiver();
    const port = probe.port;
    await probe.close();
    const hook = await api('POST', '/api/webhooks', {
      url: `http://127.0.0.1:${port}/late`,
      events: ['conversation.failed'],
    });
    const conv = (await api('GET', '/api/conversations')).body.data[0];
    await srv.database.db.execute(
      sql`INSERT INTO events (conversation_id, kind, stream, data, stage, state) VALUES (${conv.id}, 'stage', '', '{}', 'provision', 'failed')`,
    );
    await until(async () => {
      const d = (await api('GET', `/api/webhooks/${hook.body.data.id}/deliveries`)).body.data as Json[];
      return d[0]?.attempt_log.length >= 1 && d[0].attempt_log[0].error;
    }, 'a refused attempt');
    await srv.stop();
    const late = await receiver(port);
    try {
      srv = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: {}, acceptRunnerSocket, webhooks: FAST });
      const got = await until(() => late.got[0], 'the delivery after the restart');
      assert.equal(got.json.type, 'conversation.failed');
      assert.ok(
        verifyWebhook(
          hook.body.secret,
          { signature: got.headers.signature, timestamp: got.headers.timestamp },
          got.body,
        ),
      );
    } finally {
      await late.close();
    }
  });
});

describe('webhooks with two server nodes on PostgreSQL', () => {
  let tmp: string;
  let schema: string;
  let a: RunningServer;
  let b: RunningServer;
  let rx: Awaited<ReturnType<typeof receiver>>;

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-webhooks-pg-')));
    schema = uniqueSchemaName();
    rx = await receiver();
    const env = {
      FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
      FOUNTAIN_SECRET_KEY: randomBytes(32).toString('hex'),
      FOUNTAIN_BOOTSTRAP_KEY: `ftn_${randomBytes(32).toString('hex')}`,
    };
    a = await startServer({
      dataDir: join(tmp, 'a'),
      port: 0,
      env,
      databaseSchema: schema,
      webhooks: { ...FAST, tickMs: 15 },
    });
    b = await startServer({
      dataDir: join(tmp, 'b'),
      port: 0,
      env,
      databaseSchema: schema,
      webhooks: { ...FAST, tickMs: 15 },
    });
  });

  after(async () => {
    await a?.stop();
    await b?.stop();
    await rx?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('each event is delivered once although both nodes scan and send', async () => {
    const key = a.bootstrapKey!;
    const hook = await call(a.url, key, 'POST', '/api/webhooks', { url: rx.url, events: ['conversation.failed'] });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));
    const account = (await a.database.db.execute(sql`SELECT id FROM accounts LIMIT 1`)) as unknown as {
      rows: Array<{ id: string }>;
    };
    const accountId = account.rows[0]!.id;
    const N = 30;
    for (let i = 0; i < N; i++) {
      const db = (i % 2 ? a : b).database.db;
      const conv = (await db.execute(
        sql`INSERT INTO conversations (account_id, runtime, status) VALUES (${accountId}, 'demo', 'failed') RETURNING id`,
      )) as unknown as { rows: Array<{ id: string }> };
      await db.execute(
        sql`INSERT INTO events (conversation_id, kind, stream, data, stage, state) VALUES (${conv.rows[0]!.id}, 'stage', '', '{}', 'provision', 'failed')`,
      );
    }
    await until(() => rx.got.length >= N, `${N} deliveries`, 60_000);
    await new Promise((r) => setTimeout(r, 600));
    const ids = rx.got.map((r) => r.json.id);
    assert.equal(ids.length, N, 'no event twice');
    assert.equal(new Set(ids).size, N);
  });
});
