/**
 * Moving a conversation between providers: from a real runner to the e2b provider (the loopback E2B
 * stub: real HTTP, real processes) and back, the demo agent recalling its fact on each; a provider this
 * instance has not configured is refused.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { E2BAdapter } from '../src/providers/e2b/index.ts';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { type RunnerChild, startRunnerChild, until } from '../src/server/conversations/testing.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';
import { answerOf, call, type Json } from './helpers/http.ts';
import { E2BStub } from './stubs/e2b/server.ts';

describe('move between a runner and a hosted provider', () => {
  const KEY = `e2b_move_${randomBytes(8).toString('hex')}`;
  let tmp: string;
  let stub: E2BStub;
  let adapter: E2BAdapter;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild | undefined;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const turns = async (id: string): Promise<Json[]> =>
    (await api('GET', `/api/conversations/${id}/turns`)).body.data as Json[];
  const completed = (id: string, turnId: string) =>
    until(
      async () => (await turns(id)).find((t) => t.id === turnId && t.status !== 'running' && t.status !== 'pending'),
      `turn ${turnId}`,
    );
  const say = async (id: string, prompt: string): Promise<string> => {
    const p = await api('POST', `/api/conversations/${id}/prompts`, { prompt });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    assert.equal((await completed(id, p.body.turn_id)).status, 'completed');
    return answerOf((await api('GET', `/api/conversations/${id}/events?limit=1000`)).body.data, p.body.turn_id);
  };

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-move-provider-')));
    stub = await E2BStub.start({ apiKey: KEY });
    adapter = new E2BAdapter({
      apiKey: KEY,
      baseUrl: stub.apiUrl,
      sandboxUrl: stub.sandboxUrl,
      requestTimeoutMs: 15_000,
    });
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { E2B_API_KEY: KEY, E2B_BASE_URL: stub.apiUrl, E2B_SANDBOX_URL: stub.sandboxUrl },
      adapters: [adapter],
      acceptRunnerSocket,
      engine: { askTimeoutMs: 60_000 },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    adapter?.close();
    await stub?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('moves to e2b and back, recalling each time', async () => {
    runner = startRunnerChild({ name: 'desk', root: join(tmp, 'root'), baseUrl: srv.url, apiKey: key, home: tmp });
    await until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).find((r) => r.name === 'desk' && r.online),
      'runner desk',
      60_000,
    );
    const agent = (await api('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' })).body
      .data;
    const conv = await api('POST', '/api/conversations', { agent_id: agent.id, prompt: 'remember: to the cloud' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id: string = conv.body.data.id;
    const [first] = await turns(id);
    assert.equal((await completed(id, first.id)).status, 'completed');
    await until(async () => {
      const r = (await srv.database.db.execute(
        sql`SELECT count(*)::int AS n FROM checkpoints WHERE turn_id = ${first.id}`,
      )) as unknown as { rows: Array<{ n: number }> };
      return r.rows[0]!.n > 0;
    }, 'the checkpoint after turn 1');

    const off = await api('POST', `/api/conversations/${id}/move`, { provider: 'daytona' });
    assert.deepEqual([off.status, off.body.error], [422, 'sandbox_provider_disabled']);

    const up = await api('POST', `/api/conversations/${id}/move`, { provider: 'e2b' });
    assert.equal(up.status, 200, JSON.stringify(up.body));
    assert.deepEqual([up.body.data.sandbox.provider, up.body.data.sandbox.status], ['e2b', 'pending']);
    assert.match(await say(id, 'recall'), /to the cloud/);
    const there = (await api('GET', `/api/conversations/${id}`)).body.data.sandbox;
    assert.deepEqual([there.provider, there.status], ['e2b', 'ready']);
    assert.equal(stub.list().length, 1, 'one e2b sandbox');

    assert.match(await say(id, 'remember: and back'), /I will remember/);
    const down = await api('POST', `/api/conversations/${id}/move`, { runner: 'desk' });
    assert.equal(down.status, 200, JSON.stringify(down.body));
    assert.equal(stub.list().length, 0, 'the e2b sandbox is removed');
    const back = await say(id, 'recall');
    assert.match(back, /to the cloud/);
    assert.match(back, /and back/);
    assert.equal((await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.name, 'desk');
  });
});
