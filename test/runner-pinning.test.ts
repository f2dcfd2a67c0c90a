/**
 * Placement a user can choose, over the public API: two real `fountain runner` children on one real
 * server; an agent pinned to a runner lands there, is refused naming it while it is away; unpinned goes to the newest.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { call, openStream, type Json } from './helpers/http.ts';

describe('an agent pinned to a runner (two real runners, one real server)', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let a: RunnerChild;
  let b: RunnerChild;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const online = async (name: string) =>
    ((await api('GET', '/api/runners')).body.data as Json[]).find((r) => r.name === name)?.online === true;
  const runnerId = async (name: string) =>
    ((await api('GET', '/api/runners')).body.data as Json[]).find((r) => r.name === name)!.id as string;
  const start = (name: string) =>
    startRunnerChild({ name, root: join(tmp, name), baseUrl: srv.url, apiKey: key, home: tmp });

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-pin-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      engine: { askTimeoutMs: 60_000 },
    });
    key = srv.bootstrapKey!;
    // B first, then A: A is the most recently connected, so it is what an unpinned agent gets.
    b = start('b');
    await until(() => online('b'), 'runner b online', 60_000);
    a = start('a');
    await until(() => online('a'), 'runner a online', 60_000);
  });

  after(async () => {
    await a?.stop();
    await b?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('stores a pin given by name as the id, and refuses an unknown runner naming it', async () => {
    const bId = await runnerId('b');
    const made = await api('POST', '/api/agents', {
      name: 'by-name',
      runtime: 'demo',
      model: 'fountain/demo',
      runner_id: 'b',
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal(made.body.data.runner_id, bId);
    const byId = await api('POST', '/api/agents', {
      name: 'by-id',
      runtime: 'demo',
      model: 'fountain/demo',
      runner_id: bId,
    });
    assert.equal(byId.body.data.runner_id, bId);
    const unknown = await api('POST', '/api/agents', {
      name: 'nowhere',
      runtime: 'demo',
      model: 'fountain/demo',
      runner_id: 'mars',
    });
    assert.deepEqual([unknown.status, unknown.body.error], [422, 'runner_not_found']);
    assert.match(unknown.body.message, /"mars"/);
    assert.equal(
      (await api('GET', '/api/agents')).body.data.some((x: Json) => x.name === 'nowhere'),
      false,
    );
    const badPatch = await api('PATCH', `/api/agents/${made.body.data.id}`, { runner_id: 'mars' });
    assert.deepEqual([badPatch.status, badPatch.body.error], [422, 'runner_not_found']);
    assert.equal(
      (await api('GET', `/api/agents/${made.body.data.id}`)).body.data.runner_id,
      bId,
      'a refused update changes nothing',
    );
    const unpinned = await api('PATCH', `/api/agents/${made.body.data.id}`, { runner_id: null });
    assert.equal(unpinned.body.data.runner_id, null);
  });

  it('places a pinned agent on its runner, an unpinned one on the newest; refuses 409 naming the pinned runner while it is away', async () => {
    const pinned = (
      await api('POST', '/api/agents', { name: 'pinned', runtime: 'demo', model: 'fountain/demo', runner_id: 'b' })
    ).body.data;
    const free = (await api('POST', '/api/agents', { name: 'free', runtime: 'demo', model: 'fountain/demo' })).body
      .data;

    const onB = await api('POST', '/api/conversations', { agent_id: pinned.id });
    assert.equal(onB.status, 201, JSON.stringify(onB.body));
    assert.equal(onB.body.data.sandbox.runner.name, 'b');
    const onA = await api('POST', '/api/conversations', { agent_id: free.id });
    assert.equal(onA.status, 201, JSON.stringify(onA.body));
    assert.equal(onA.body.data.sandbox.runner.name, 'a');

    const s = openStream(`${srv.url}/api/conversations/${onB.body.data.id}/stream`, key);
    await s.stage('provision', 'done');
    s.close();
    await b.stop();
    await until(async () => !(await online('b')), 'runner b offline');

    const refused = await api('POST', '/api/conversations', { agent_id: pinned.id });
    assert.deepEqual([refused.status, refused.body.error], [409, 'runner_offline'], JSON.stringify(refused.body));
    assert.match(refused.body.message, /"b"/);
    assert.equal(refused.body.runner_name, 'b');
    // Nothing falls back to A, and no conversation was recorded for the refusal.
    const list = (await api('GET', `/api/conversations?agent_id=${pinned.id}`)).body.data as Json[];
    assert.equal(list.filter((c) => c.agent_id === pinned.id).length, 1);

    // The parked conversation on B keeps its 503, now naming the runner it waits for.
    const parked = await api('POST', `/api/conversations/${onB.body.data.id}/prompts`, { prompt: 'anyone?' });
    assert.deepEqual([parked.status, parked.body.error], [503, 'runner_offline'], JSON.stringify(parked.body));
    assert.match(parked.body.message, /"b"/);

    // Unpinned still goes to A.
    const again = await api('POST', '/api/conversations', { agent_id: free.id });
    assert.equal(again.status, 201, JSON.stringify(again.body));
    assert.equal(again.body.data.sandbox.runner.name, 'a');
  });
});
