/**
 * Turn recovery end to end: the real server, a real `fountain runner` child
 * process dialing through a loopback TCP proxy the test severs and restores, and the demo agent.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { slowAnswer } from '../src/acp/demo/agent.ts';
import { allEvents, answerText, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import type { EngineConfig } from '../src/server/conversations/config.ts';
import type { EventRow } from '../src/server/store/conversation-schema.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { type CutProxy, assertStoredOnce, runnerBehindProxy } from './helpers/recovery.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('turn recovery across runner drops and a server restart', { timeout: 900_000 }, () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let proxy: CutProxy;
  let agentId: string;
  const timings: Record<string, number> = {};

  const LONG: Partial<EngineConfig> = {
    recoveryWindowMs: 60_000,
    recoveryRetryMs: 100,
    askTimeoutMs: 60_000,
    idleTimeoutMs: 0,
  };

  const boot = (engine: Partial<EngineConfig>) => startServer({ dataDir: join(tmp, 'data'), port: 0, env: {}, engine });

  async function api(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: Json; headers: Headers }> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(srv.url + path, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
  }

  const events = (convId: string): Promise<EventRow[]> => allEvents(srv.database.db as unknown as EngineDb, convId);
  const stage = async (convId: string, name: string, state: string, afterId = 0, timeoutMs = 60_000) => {
    try {
      return await until(
        async () => (await events(convId)).find((e) => e.id > afterId && e.stage === name && e.state === state),
        `${name}/${state}`,
        timeoutMs,
      );
    } catch (e) {
      // Say what did happen, so a failure reads as a story rather than a timeout.
      // The last few before the mark too: an event published out of order shows up there.
      const stages = (await events(convId)).filter((x) => x.kind === 'stage');
      const first = stages.findIndex((x) => x.id > afterId);
      const seen = stages
        .slice(Math.max(0, (first === -1 ? stages.length : first) - 3))
        .map((x) => `${x.id} ${x.stage}/${x.state} ${x.data}`);
      throw new Error(`${(e as Error).message} (after event ${afterId}); stage events: ${seen.join(' | ')}`);
    }
  };
  const lastId = async (convId: string) => (await events(convId)).at(-1)?.id ?? 0;
  const runnerOnline = async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online);
  const data = (e: EventRow): Json => JSON.parse(e.data);

  async function newConversation(prompt: string): Promise<{ id: string; turnId: string }> {
    const created = await api('POST', '/api/conversations', { agent_id: agentId, prompt });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.data.id as string;
    const done = await stage(id, 'turn', 'done');
    return { id, turnId: data(done).turn_id };
  }

  async function prompt(convId: string, text: string): Promise<string> {
    const r = await api('POST', `/api/conversations/${convId}/prompts`, { prompt: text });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.turn_id as string;
  }

  async function chunksStored(convId: string, turnId: string, n: number): Promise<void> {
    await until(
      async () => answerText(await events(convId), turnId).split('\n').length > n,
      `${n} chunks stored`,
      60_000,
    );
  }

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-recovery-')));
    srv = await boot(LONG);
    key = srv.bootstrapKey!;
    ({ proxy, runner } = await runnerBehindProxy(srv.port, key, tmp));
    await until(runnerOnline, 'the runner to come online', 60_000);
    const agent = await api('POST', '/api/agents', {
      name: 'demo',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { execute: 'ask' },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    agentId = agent.body.data.id;
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    await proxy?.close();
    rmSync(tmp, { recursive: true, force: true });
    process.stdout.write(`# recovery timings (ms): ${JSON.stringify(timings)}\n`);
  });

  it('a cut mid-turn, restored inside the window: the turn completes, every line stored once', async () => {
    const conv = await newConversation('hello');
    const turnId = await prompt(conv.id, 'slow: 30 100ms');
    await chunksStored(conv.id, turnId, 3);
    const cutAt = Date.now();
    proxy.sever();
    const started = await stage(conv.id, 'connection', 'started');
    assert.deepEqual(data(started), { reason: 'runner_disconnected', turn_id: turnId, timeout_ms: 60_000 });
    const busy = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'me too' });
    assert.deepEqual([busy.status, busy.body.error], [400, 'conversation_busy']);
    assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.status, 'running');
    // The agent keeps writing into the daemon's journal while nobody listens.
    await new Promise((r) => setTimeout(r, 400));
    proxy.restore();
    const attached = await stage(conv.id, 'reattach', 'done');
    timings.dropToReattachMs = Date.now() - cutAt;
    assert.equal(data(attached).outcome, 'session_attached');
    assert.equal(data(attached).turn_id, turnId);
    // initialize 0, session/new 1, the first prompt 2: the journal boundary is the reply to 2.
    assert.equal(data(attached).acp_prompt_id, 3);
    const reconnected = await stage(conv.id, 'connection', 'done');
    assert.deepEqual(data(reconnected), { reason: 'runner_reconnect', outcome: 'session_attached' });
    await stage(conv.id, 'turn', 'done', attached.id);
    timings.dropToTurnDoneMs = Date.now() - cutAt;
    const all = await events(conv.id);
    assert.equal(answerText(all, turnId), slowAnswer(30).join(''));
    assertStoredOnce(all, turnId);
    const turns = (await api('GET', `/api/conversations/${conv.id}/turns`)).body.data as Json[];
    assert.equal(turns.at(-1).status, 'completed');
    // The conversation goes on with the same agent process.
    const next = await prompt(conv.id, 'recall');
    await until(
      async () =>
        (await events(conv.id)).find((e) => e.stage === 'turn' && e.state === 'done' && data(e).turn_id === next),
      'the next turn',
    );
  });

  it('a pending permission survives a cut: same request, same asked_at; answered after the reconnect, it reaches the agent', async () => {
    const conv = await newConversation('hello');
    const mark = await lastId(conv.id);
    const turnId = await prompt(conv.id, 'run: echo perm-survived');
    const asked = await stage(conv.id, 'permission', 'started', mark);
    const requestId = data(asked).request_id as string;
    const before = ((await api('GET', `/api/conversations/${conv.id}/turns`)).body.data as Json[]).at(
      -1,
    ).pending_permission;
    proxy.sever();
    await stage(conv.id, 'connection', 'started', mark);
    const early = await api('POST', `/api/conversations/${conv.id}/requests/${requestId}`, { option_id: 'allow_once' });
    assert.deepEqual([early.status, early.body.error, early.headers.get('retry-after')], [503, 'runner_offline', '30']);
    proxy.restore();
    const reconnected = await stage(conv.id, 'connection', 'done', mark);
    assert.equal(data(reconnected).outcome, 'session_attached');
    const after = ((await api('GET', `/api/conversations/${conv.id}/turns`)).body.data as Json[]).at(
      -1,
    ).pending_permission;
    assert.deepEqual(after, before, 'the request and its asked_at (its deadline) are unchanged');
    const yes = await api('POST', `/api/conversations/${conv.id}/requests/${requestId}`, { option_id: 'allow_once' });
    assert.deepEqual([yes.status, yes.body], [200, { ok: true }]);
    await stage(conv.id, 'turn', 'done', reconnected.id);
    const all = await events(conv.id);
    assert.match(
      answerText(all, turnId),
      /I ran `echo perm-survived`; it exited with code 0\. Its output:\nperm-survived/,
    );
    assert.equal(
      all.filter((e) => e.turnId === turnId && e.stage === 'permission' && e.state === 'started').length,
      1,
      'asked once, not again',
    );
    assertStoredOnce(all, turnId);
  });

  it('interrupt during recovery cancels it; after the runner returns the conversation takes a new prompt', async () => {
    const conv = await newConversation('hello');
    const mark = await lastId(conv.id);
    const turnId = await prompt(conv.id, 'slow: 200 50ms');
    await chunksStored(conv.id, turnId, 2);
    proxy.sever();
    await stage(conv.id, 'connection', 'started', mark);
    const stop = await api('POST', `/api/conversations/${conv.id}/interrupt`);
    assert.equal(stop.status, 204, JSON.stringify(stop.body));
    const interrupted = await stage(conv.id, 'turn', 'interrupted', mark);
    assert.equal(data(interrupted).turn_id, turnId);
    const cancelled = await stage(conv.id, 'connection', 'done', mark);
    assert.deepEqual(data(cancelled), { reason: 'runner_reconnect', outcome: 'cancelled' });
    // Idle now, and its runner is away: a prompt gets 503 runner_offline with Retry-After.
    const offline = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'recall' });
    assert.deepEqual(
      [offline.status, offline.body.error, offline.headers.get('retry-after')],
      [503, 'runner_offline', '30'],
    );
    proxy.restore();
    await until(runnerOnline, 'the runner to return');
    const next = await prompt(conv.id, 'remember: after the interrupt');
    const done = await stage(conv.id, 'turn', 'done', interrupted.id);
    assert.equal(data(done).turn_id, next);
    assert.match(answerText(await events(conv.id), next), /I will remember that: after the interrupt/);
    assert.equal((await events(conv.id)).filter((e) => e.stage === 'reattach').length, 0, 'recovery never reattached');
  });

  it('a server restart mid-turn: the new server reattaches at boot and the turn completes, every line stored once', async () => {
    const conv = await newConversation('hello');
    const turnId = await prompt(conv.id, 'slow: 40 100ms');
    await chunksStored(conv.id, turnId, 3);
    const t0 = Date.now();
    await srv.stop();
    srv = await boot(LONG);
    proxy.upstreamPort = srv.port;
    timings.restartMs = Date.now() - t0;
    const started = await stage(conv.id, 'connection', 'started');
    assert.deepEqual(data(started), { reason: 'runner_offline', turn_id: turnId, timeout_ms: 60_000 });
    const attached = await stage(conv.id, 'reattach', 'done');
    assert.equal(data(attached).acp_prompt_id, 3);
    await stage(conv.id, 'turn', 'done', attached.id);
    timings.restartToTurnDoneMs = Date.now() - t0;
    const all = await events(conv.id);
    assert.equal(answerText(all, turnId), slowAnswer(40).join(''));
    assertStoredOnce(all, turnId);
  });

  it('past the window the turn fails with runner_reconnect_timeout and a new prompt works; a permission keeps its original deadline', async () => {
    // A second restart with a short window and a short ask timeout.
    await srv.stop();
    srv = await boot({ ...LONG, recoveryWindowMs: 8000, askTimeoutMs: 1500 });
    proxy.upstreamPort = srv.port;
    await until(runnerOnline, 'the runner to reconnect', 60_000);

    const conv = await newConversation('hello');
    let mark = await lastId(conv.id);
    const turnId = await prompt(conv.id, 'slow: 400 50ms');
    await chunksStored(conv.id, turnId, 2);
    const cutAt = Date.now();
    proxy.sever();
    const failed = await stage(conv.id, 'turn', 'failed', mark);
    timings.windowToFailMs = Date.now() - cutAt;
    assert.equal(data(failed).error, 'runner_reconnect_timeout');
    assert.match(data(failed).reason, /^sandbox connection lost: runner_reconnect_timeout/);
    const ended = await stage(conv.id, 'connection', 'done', mark);
    assert.deepEqual(data(ended), { reason: 'runner_reconnect', outcome: 'failed', error: 'runner_reconnect_timeout' });
    const turns = (await api('GET', `/api/conversations/${conv.id}/turns`)).body.data as Json[];
    assert.equal(turns.at(-1).status, 'failed');
    assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.status, 'idle');
    proxy.restore();
    await until(runnerOnline, 'the runner to return');
    const next = await prompt(conv.id, 'recall');
    const done = await stage(conv.id, 'turn', 'done', failed.id);
    assert.equal(data(done).turn_id, next);

    // The deadline runs on while the runner is away: a request whose time ran out is denied on restore.
    mark = await lastId(conv.id);
    const permTurn = await prompt(conv.id, 'run: echo never-runs');
    const asked = await stage(conv.id, 'permission', 'started', mark);
    const askedAt = Date.parse(
      ((await api('GET', `/api/conversations/${conv.id}/turns`)).body.data as Json[]).at(-1).pending_permission
        .asked_at,
    );
    proxy.sever();
    await stage(conv.id, 'connection', 'started', mark);
    // Wait (not measure) until the original deadline has passed, then let the runner back in inside the window.
    await until(() => Date.now() > askedAt + 1600, 'the ask deadline to pass');
    proxy.restore();
    await stage(conv.id, 'reattach', 'done', mark);
    const resolved = await stage(conv.id, 'permission', 'done', asked.id);
    assert.equal(data(resolved).outcome, 'timeout');
    await stage(conv.id, 'turn', 'done', resolved.id);
    assert.match(
      answerText(await events(conv.id), permTurn),
      /You did not allow it, so I did not run `echo never-runs`\./,
    );
  });
});
