/**
 * End to end over the public HTTP API on the `daytona` provider: the real server with the Daytona
 * adapter pointed at the local Daytona stub (real processes per sandbox), and the demo agent.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DaytonaAdapter } from '../src/providers/daytona/adapter.ts';
import { until } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { DaytonaStub } from './stubs/daytona/server.ts';
import { answerOf as answer, call, type Json } from './helpers/http.ts';

const KEY = 'dtn_conversation_secret_8c2e41d07a';

describe('a full conversation on the daytona provider against the Daytona stub', () => {
  let tmp: string;
  let stub: DaytonaStub;
  let srv: RunningServer;
  let key: string;
  const schema = uniqueSchemaName();
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  /** Every event of the conversation so far, read back page by page from /events. */
  async function events(convId: string): Promise<Json[]> {
    const all: Json[] = [];
    let after = 0;
    for (;;) {
      const page = await api('GET', `/api/conversations/${convId}/events?after=${after}&limit=1000`);
      assert.equal(page.status, 200, JSON.stringify(page.body));
      all.push(...page.body.data);
      if (!page.body.meta.has_more) return all;
      after = page.body.meta.next_cursor;
    }
  }

  /** The first stage event `name/state` after event id `afterId`; on a hang guard, the stage history says why. */
  async function stage(convId: string, name: string, state: string, afterId = 0): Promise<Json> {
    try {
      return await until(
        async () => (await events(convId)).find((e) => e.id > afterId && e.stage === name && e.state === state) ?? null,
        `${name}/${state} in /events`,
        60_000,
      );
    } catch (e) {
      const history = (await events(convId))
        .filter((ev) => ev.stage)
        .map((ev) => `${ev.stage}/${ev.state} ${ev.stream === 'acp' ? '' : (ev.data ?? '')}`);
      throw new Error(`${(e as Error).message}; stage history: ${history.join('\n')}`);
    }
  }

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-daytona-conv-')));
    stub = await DaytonaStub.start({ apiKey: KEY, inputEofPerWrite: true, exitCodes: 'missing' });
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, DAYTONA_API_KEY: KEY, SANDBOX_PROVIDER: 'daytona' },
      databaseSchema: schema,
      adapters: [new DaytonaAdapter({ apiKey: KEY, apiUrl: stub.apiUrl, pollIntervalMs: 20, statePollMs: 10 })],
      engine: { idleTimeoutMs: 1500, sweepIntervalMs: 250, askTimeoutMs: 60_000 },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    await srv?.stop();
    await stub?.stop();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('runs a turn, a permission, an idle park and wake with recall, and terminate', async () => {
    const agent = await api('POST', '/api/agents', {
      name: 'demo-daytona',
      runtime: 'demo',
      model: 'fountain/demo',
      sandbox_provider: 'daytona',
      permission_policy: { default: 'ask' },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));

    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id, prompt: 'remember: blue' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const conv = created.body.data;
    assert.equal(conv.sandbox.provider, 'daytona');

    await stage(conv.id, 'provision', 'done');
    const t1 = await stage(conv.id, 'turn', 'done');
    assert.match(answer(await events(conv.id), t1.turn_id), /I will remember that: blue/);
    const box = stub.sandbox(conv.sandbox.name);
    assert.ok(box, `the stub holds a sandbox named ${conv.sandbox.name}`);
    assert.equal(box.state, 'started');

    const p2 = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'run: echo hi' });
    assert.equal(p2.status, 200, JSON.stringify(p2.body));
    const asked = await stage(conv.id, 'permission', 'started', t1.id);
    const request = JSON.parse(asked.data);
    const yes = await api('POST', `/api/conversations/${conv.id}/requests/${request.request_id}`, {
      option_id: 'allow_once',
    });
    assert.deepEqual([yes.status, yes.body], [200, { ok: true }]);
    const t2 = await stage(conv.id, 'turn', 'done', asked.id);
    assert.equal(t2.turn_id, p2.body.turn_id);
    assert.match(answer(await events(conv.id), p2.body.turn_id), /\bhi\b/);

    // Idle: the sweep parks the sandbox (Daytona stop); the next prompt wakes it and the memory survived.
    await stage(conv.id, 'sandbox', 'done', t2.id);
    const parked = await api('GET', `/api/conversations/${conv.id}`);
    assert.equal(parked.body.data.status, 'idle');
    assert.equal(parked.body.data.sandbox.status, 'suspended');
    assert.equal(stub.sandbox(conv.sandbox.name)?.state, 'stopped');
    const mark = (await events(conv.id)).at(-1).id;
    const p3 = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'recall' });
    assert.equal(p3.status, 200, JSON.stringify(p3.body));
    await stage(conv.id, 'turn', 'done', mark);
    assert.match(answer(await events(conv.id), p3.body.turn_id), /blue/);
    const turns = await api('GET', `/api/conversations/${conv.id}/turns`);
    assert.deepEqual(
      turns.body.data.map((t: Json) => t.status),
      ['completed', 'completed', 'completed'],
    );

    const term = await api('POST', `/api/conversations/${conv.id}/terminate`);
    assert.equal(term.status, 204);
    await stage(conv.id, 'terminate', 'done');
    await until(
      () => (stub.sandbox(conv.sandbox.name) === undefined ? true : null),
      'the Daytona sandbox to be deleted',
      30_000,
    );
    assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.status, 'terminated');
  });
});
