/**
 * The capacity queue end to end over the public HTTP API: the real server, a real `fountain runner`
 * child (process backend) and the demo agent, on an account limited to one running turn. Conversations
 * beyond the limit wait and run one after another in order, showing their place in line; a cancelled
 * one never starts; one that waits past the expiry fails in words.
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

interface Rig {
  srv: RunningServer;
  key: string;
  runner: RunnerChild;
  tmp: string;
  agentId: string;
  api: (method: string, path: string, body?: unknown) => ReturnType<typeof call>;
}

/** A server whose queue expires after `queueExpiryMs`, a runner, a demo agent that asks before running a command, and the account limited to one running turn. */
async function rig(queueExpiryMs: number): Promise<Rig> {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-queue-')));
  const srv = await startServer({
    dataDir: join(tmp, 'data'),
    port: 0,
    env: {},
    acceptRunnerSocket,
    engine: { askTimeoutMs: 120_000, queueExpiryMs, queuePollMs: 100 },
    sseHeartbeatMs: 300,
  });
  const key = srv.bootstrapKey!;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const runner = startRunnerChild({
    name: 'q',
    root: join(tmp, 'sandboxes'),
    baseUrl: srv.url,
    apiKey: key,
    home: tmp,
  });
  await until(
    async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
    'the runner to come online',
    60_000,
  );
  const agent = await api('POST', '/api/agents', {
    name: 'demo',
    runtime: 'demo',
    model: 'fountain/demo',
    permission_policy: { execute: 'ask' },
  });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  const account = await api('GET', '/api/account');
  const limited = await api('PUT', `/api/admin/accounts/${account.body.data.id}/limits`, { max_running_turns: 1 });
  assert.equal(limited.status, 200, JSON.stringify(limited.body));
  assert.equal(limited.body.data.max_running_turns, 1);
  assert.equal(limited.body.data.own.max_sandboxes, null, 'a limit not given keeps the default');
  return { srv, key, runner, tmp, agentId: agent.body.data.id, api };
}

async function teardown(r: Rig | undefined): Promise<void> {
  await r?.runner.stop();
  await r?.srv.stop();
  if (r) rmSync(r.tmp, { recursive: true, force: true });
}

async function start(r: Rig, prompt: string): Promise<Json> {
  const created = await r.api('POST', '/api/conversations', { agent_id: r.agentId, prompt });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.data;
}

const turnsOf = async (r: Rig, conv: string): Promise<Json[]> =>
  (await r.api('GET', `/api/conversations/${conv}/turns`)).body.data as Json[];

/** Waits for the conversation's first turn to hold a permission request; its request id. */
async function asking(r: Rig, conv: string): Promise<string> {
  return until(
    async () => (await turnsOf(r, conv))[0]?.pending_permission?.request_id as string | undefined,
    `a permission request on ${conv}`,
    90_000,
  );
}

const ended = (r: Rig, conv: string, status: string) =>
  until(
    async () => {
      const t = (await turnsOf(r, conv))[0];
      return t && t.status === status ? t : undefined;
    },
    `${conv}'s turn ${status}`,
    90_000,
  );

describe('the capacity queue with a real runner and the demo agent', { timeout: 300_000 }, () => {
  let r: Rig;
  before(async () => {
    r = await rig(3_600_000);
  });
  after(() => teardown(r));

  it('runs three conversations on an account limited to one, one after another in order, showing the place in line', async () => {
    // The first holds the only slot until its permission request is answered.
    const a = await start(r, 'run: echo first');
    assert.equal(a.queue, null, 'the first starts at once');
    const request = await asking(r, a.id);

    const b = await start(r, 'echo second');
    const stream = openStream(`${r.srv.url}/api/conversations/${b.id}/stream`, r.key);
    try {
      const c = await start(r, 'echo third');
      assert.deepEqual([b.status, b.queue?.position, b.queue?.kind], ['pending', 1, 'conversation']);
      assert.equal(b.sandbox.status, 'pending', 'no sandbox is created while it waits');
      assert.equal(c.queue?.position, 2);

      // While it waits: its turn says queued, with its place; its stream carried the queue event.
      const [bTurn] = await turnsOf(r, b.id);
      assert.deepEqual([bTurn!.status, bTurn!.queue_position], ['queued', 1]);
      assert.ok(Date.parse(bTurn!.queue_expires_at) > Date.now());
      const queued = await stream.stage('queue', 'started');
      assert.equal(JSON.parse(queued.data.data).position, 1);
      const listed = (await r.api('GET', '/api/conversations')).body.data as Json[];
      assert.deepEqual(
        [a.id, b.id, c.id].map((id) => listed.find((x) => x.id === id)?.queue?.position ?? null),
        [null, 1, 2],
      );
      const limits = await r.api('GET', '/api/account/limits');
      assert.deepEqual(
        [limits.body.data.max_running_turns, limits.body.data.running_turns, limits.body.data.waiting],
        [1, 1, 2],
      );
      // A prompt to a conversation that waits is refused in words, not queued twice.
      const twice = await r.api('POST', `/api/conversations/${b.id}/prompts`, { prompt: 'again' });
      assert.equal(twice.status, 400);
      assert.match(twice.body.message, /queue|already queued/);

      const yes = await r.api('POST', `/api/conversations/${a.id}/requests/${request}`, { option_id: 'allow_once' });
      assert.equal(yes.status, 200, JSON.stringify(yes.body));
      await stream.stage('queue', 'done');
      const tA = await ended(r, a.id, 'completed');
      const tB = await ended(r, b.id, 'completed');
      const tC = await ended(r, c.id, 'completed');
      // One at a time, in the order they came: each started after the one before it ended.
      assert.ok(Date.parse(tB.started_at) >= Date.parse(tA.ended_at), `${tB.started_at} after ${tA.ended_at}`);
      assert.ok(Date.parse(tC.started_at) >= Date.parse(tB.ended_at), `${tC.started_at} after ${tB.ended_at}`);
      assert.equal((await r.api('GET', `/api/conversations/${c.id}`)).body.data.queue, null);
    } finally {
      stream.close();
    }
  });

  it('a prompt beyond the limit waits with its place; cancelled (interrupt), it never starts', async () => {
    const a = await start(r, 'run: echo holder');
    const request = await asking(r, a.id);
    const idle = await start(r, 'echo warm');
    // `idle` waits for the slot too; once it ran, its next prompt is the one cancelled.
    assert.equal(idle.queue?.position, 1);
    const yes = await r.api('POST', `/api/conversations/${a.id}/requests/${request}`, { option_id: 'allow_once' });
    assert.equal(yes.status, 200);
    await ended(r, idle.id, 'completed');

    const again = await r.api('POST', `/api/conversations/${a.id}/prompts`, { prompt: 'run: echo hold again' });
    assert.equal(again.status, 200);
    assert.equal(again.body.queue, null);
    const request2 = await until(
      async () => (await turnsOf(r, a.id))[1]?.pending_permission?.request_id as string | undefined,
      'the second permission request',
    );
    const waiting = await r.api('POST', `/api/conversations/${idle.id}/prompts`, { prompt: 'echo never' });
    assert.equal(waiting.status, 200, JSON.stringify(waiting.body));
    assert.equal(waiting.body.status, 'queued');
    assert.equal(waiting.body.queue.position, 1);
    const cancel = await r.api('POST', `/api/conversations/${idle.id}/interrupt`);
    assert.equal(cancel.status, 204, JSON.stringify(cancel.body));
    const cancelled = (await turnsOf(r, idle.id))[1]!;
    assert.deepEqual([cancelled.status, cancelled.started_at, cancelled.queue_position], ['interrupted', null, null]);
    assert.match(cancelled.reason, /cancelled while queued/);

    // The slot frees: nothing of the cancelled prompt starts.
    await r.api('POST', `/api/conversations/${a.id}/requests/${request2}`, { option_id: 'allow_once' });
    await until(async () => (await turnsOf(r, a.id))[1]?.status === 'completed', 'the holder done');
    await r.srv.engine.drainQueue();
    const after = await turnsOf(r, idle.id);
    assert.equal(after.length, 2);
    assert.equal(after[1]!.status, 'interrupted');
    assert.equal(after[1]!.started_at, null);
    const events = (await r.api('GET', `/api/conversations/${idle.id}/events`)).body.data as Json[];
    const startedTurns = events
      .filter((e) => e.stage === 'turn' && e.state === 'started')
      .map((e) => JSON.parse(e.data).turn_id);
    assert.ok(!startedTurns.includes(waiting.body.turn_id), 'the cancelled turn never started');
    assert.equal((await r.api('GET', '/api/account/limits')).body.data.waiting, 0);
  });
});

describe('the capacity queue expires what waits too long', { timeout: 300_000 }, () => {
  let r: Rig;
  before(async () => {
    r = await rig(1_500);
  });
  after(() => teardown(r));

  it('a conversation that waited past the expiry fails in words and never starts', async () => {
    const a = await start(r, 'run: echo holder');
    const request = await asking(r, a.id);
    const b = await start(r, 'echo too late');
    assert.equal(b.queue?.position, 1);
    const failed = await ended(r, b.id, 'failed');
    assert.match(failed.reason, /waited \d+ min in the queue for capacity .* expired without starting/);
    assert.equal(failed.started_at, null);
    const conv = (await r.api('GET', `/api/conversations/${b.id}`)).body.data;
    assert.equal(conv.status, 'failed');
    assert.match(conv.failure_reason, /in the queue for capacity and expired/);
    assert.equal(conv.queue, null);
    await r.api('POST', `/api/conversations/${a.id}/requests/${request}`, { option_id: 'allow_once' });
    await ended(r, a.id, 'completed');
  });
});
