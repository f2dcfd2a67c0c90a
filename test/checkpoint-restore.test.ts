/**
 * Memory that survives losing the sandbox, end to end with the demo agent: a fact given in turn 1 is
 * checkpointed after the turn; the runner's disk is wiped and the runner deleted; with no runner left a
 * prompt is refused in words; on another runner the next prompt restores the checkpoint into a new
 * sandbox and the agent recalls the fact, also for an agent that was pinned to the deleted runner.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { type RunnerChild, startRunnerChild, until } from '../src/server/conversations/testing.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';
import { answerOf, call, type Json, watchOver } from './helpers/http.ts';

describe('a conversation whose runner was deleted goes on from its checkpoint', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  const runners: RunnerChild[] = [];
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const { online, events, turnEnd: turnDone } = watchOver(api);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-restore-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      engine: { askTimeoutMs: 60_000 },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    for (const r of runners) await r.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('restores on another runner and recalls; refuses in words while none is there', async () => {
    const start = (name: string) => {
      const r = startRunnerChild({ name, root: join(tmp, `root-${name}`), baseUrl: srv.url, apiKey: key, home: tmp });
      runners.push(r);
      return r;
    };
    const a = start('first');
    const runnerA = await online('first');
    const agent = (await api('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' })).body
      .data;
    const pinned = (
      await api('POST', '/api/agents', {
        name: 'pinned',
        runtime: 'demo',
        model: 'fountain/demo',
        runner_id: runnerA.id,
      })
    ).body.data;
    const conv = await api('POST', '/api/conversations', {
      agent_id: agent.id,
      prompt: 'remember: the launch code is 0451',
    });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id = conv.body.data.id;
    const first = (await api('GET', `/api/conversations/${id}/turns`)).body.data[0];
    await turnDone(id, first.id);
    const pinnedConv = await api('POST', '/api/conversations', { agent_id: pinned.id, prompt: 'remember: pinned' });
    assert.equal(pinnedConv.status, 201, JSON.stringify(pinnedConv.body));
    await turnDone(
      pinnedConv.body.data.id,
      (await api('GET', `/api/conversations/${pinnedConv.body.data.id}/turns`)).body.data[0].id,
    );

    // The checkpoint is taken after the turn's done, off its path: wait for its row.
    for (const c of [id, pinnedConv.body.data.id])
      await until(async () => {
        const r = (await srv.database.db.execute(
          sql`SELECT count(*)::int AS n FROM checkpoints WHERE conversation_id = ${c}`,
        )) as unknown as { rows: Array<{ n: number }> };
        return r.rows[0]!.n > 0;
      }, `a checkpoint of ${c}'s turn 1`);

    // The machine is wiped and the runner deleted.
    await a.stop();
    rmSync(join(tmp, 'root-first'), { recursive: true, force: true });
    assert.equal((await api('DELETE', `/api/runners/${runnerA.id}`)).status, 204);

    const none = await api('POST', `/api/conversations/${id}/prompts`, { prompt: 'recall' });
    assert.equal(none.status, 503, JSON.stringify(none.body));
    assert.equal(none.body.error, 'runner_offline');
    assert.match(none.body.message, /No runner is connected; the conversation wakes when a runner connects/);
    assert.doesNotMatch(none.body.message, /first/, 'it does not name the deleted runner');

    start('second');
    await online('second');
    // Deleting a runner unpins the agents pinned to it: their conversations go on elsewhere too.
    assert.equal((await api('GET', `/api/agents/${pinned.id}`)).body.data.runner_id, null);
    const pin = await api('POST', `/api/conversations/${pinnedConv.body.data.id}/prompts`, { prompt: 'recall' });
    assert.equal(pin.status, 200, JSON.stringify(pin.body));
    const pinEnd = await turnDone(pinnedConv.body.data.id, pin.body.turn_id);
    assert.equal(pinEnd.state, 'done');
    assert.match(answerOf(await events(pinnedConv.body.data.id), pin.body.turn_id), /pinned/);

    const p = await api('POST', `/api/conversations/${id}/prompts`, { prompt: 'recall' });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    await turnDone(id, p.body.turn_id);
    const all = await events(id);
    assert.match(answerOf(all, p.body.turn_id), /0451/);
    const restored = all.find((e) => e.stage === 'sandbox' && JSON.parse(e.data).event === 'restored');
    assert.ok(restored, 'the conversation says it was restored');
    assert.equal(JSON.parse(restored.data).from_turn, first.id);
    const now = (await api('GET', `/api/conversations/${id}`)).body.data;
    assert.equal(now.sandbox.runner.name, 'second');
  });
});

describe('terminate while a checkpoint waits for quiet', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild | undefined;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const { online, turnEnd: turnDone } = watchOver(api);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-terminate-checkpoint-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      checkpointQuietMs: 60_000,
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('terminated at once after a turn: that turn is checkpointed before its sandbox goes, and the sandbox goes', async () => {
    runner = startRunnerChild({
      name: 'only',
      root: join(tmp, 'root'),
      baseUrl: srv.url,
      apiKey: key,
      home: tmp,
    });
    await online('only');
    const agent = (await api('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' })).body
      .data;
    const conv = await api('POST', '/api/conversations', { agent_id: agent.id, prompt: 'remember: 1138' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id = conv.body.data.id;
    const first = (await api('GET', `/api/conversations/${id}/turns`)).body.data[0];
    await turnDone(id, first.id);
    const dir = (await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.path;
    assert.ok(existsSync(dir), dir);
    // The quiet wait after the turn has not ended (a minute here): its checkpoint still waits.
    assert.equal((await api('POST', `/api/conversations/${id}/terminate`)).status, 204);
    const r = (await srv.database.db.execute(
      sql`SELECT count(*)::int AS n FROM checkpoints WHERE conversation_id = ${id} AND turn_id = ${first.id}`,
    )) as unknown as { rows: Array<{ n: number }> };
    assert.equal(r.rows[0]!.n, 1, "the turn's checkpoint was taken before the sandbox was destroyed");
    assert.ok(!existsSync(dir), 'the sandbox directory was removed');
  });
});
