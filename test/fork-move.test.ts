/**
 * Fork and move through the API with the demo agent on two real runners: a fact given in turn 1; the
 * original goes on differently; a fork at turn 1 recalls only the fact; the original moved to the other
 * runner recalls both there. Each refusal has its code: unknown turn, turn not completed, no checkpoint,
 * another account's conversation, a turn running, an unknown or offline target.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { FOUNTAIN_BIN, type RunnerChild, startRunnerChild, until } from '../src/server/conversations/testing.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';
import { answerOf, call, type Json } from './helpers/http.ts';

describe('fork at a turn and move to another runner', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  const runners = new Map<string, RunnerChild>();
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const online = async (name: string, want = true) =>
    until(
      async () =>
        ((await api('GET', '/api/runners')).body.data as Json[]).find((r) => r.name === name && r.online === want),
      `runner ${name} ${want ? 'online' : 'offline'}`,
      60_000,
    );
  const events = async (id: string): Promise<Json[]> =>
    (await api('GET', `/api/conversations/${id}/events?limit=1000`)).body.data as Json[];
  const turns = async (id: string): Promise<Json[]> =>
    (await api('GET', `/api/conversations/${id}/turns`)).body.data as Json[];
  const ended = async (id: string, turnId: string) =>
    until(async () => {
      const t = (await turns(id)).find((x) => x.id === turnId);
      return t && t.status !== 'running' && t.status !== 'pending' ? t : undefined;
    }, `turn ${turnId} to end`);
  /** Sends a message, waits for its turn to complete, and returns the agent's answer. */
  const say = async (id: string, prompt: string): Promise<string> => {
    const p = await api('POST', `/api/conversations/${id}/prompts`, { prompt });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    assert.equal((await ended(id, p.body.turn_id)).status, 'completed');
    return answerOf(await events(id), p.body.turn_id);
  };
  const checkpointed = (conversationId: string, turnId: string) =>
    until(async () => {
      const r = (await srv.database.db.execute(
        sql`SELECT count(*)::int AS n FROM checkpoints WHERE conversation_id = ${conversationId} AND turn_id = ${turnId}`,
      )) as unknown as { rows: Array<{ n: number }> };
      return r.rows[0]!.n > 0;
    }, `the checkpoint after turn ${turnId}`);
  const start = (name: string) =>
    runners.set(
      name,
      startRunnerChild({ name, root: join(tmp, `root-${name}`), baseUrl: srv.url, apiKey: key, home: tmp }),
    );

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-fork-')));
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
    for (const r of runners.values()) await r.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('a fork at turn 1 recalls turn 1 only; the moved original recalls everything on the other runner', async () => {
    start('alpha');
    start('beta');
    await online('alpha');
    await online('beta');
    const agent = (
      await api('POST', '/api/agents', {
        name: 'demo',
        runtime: 'demo',
        model: 'fountain/demo',
        permission_policy: { execute: 'ask' },
      })
    ).body.data;
    const conv = await api('POST', '/api/conversations', {
      agent_id: agent.id,
      prompt: 'remember: the code is 0451',
      model: 'fountain/demo-forked',
    });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const id: string = conv.body.data.id;
    const [first] = await turns(id);
    assert.equal((await ended(id, first.id)).status, 'completed');
    await checkpointed(id, first.id);

    // The original goes on differently.
    assert.match(await say(id, 'remember: the original went on'), /I will remember that/);

    // Refusals: unknown turns, another account's conversation.
    const unknownNumber = await api('POST', `/api/conversations/${id}/fork`, { turn: 99 });
    assert.deepEqual([unknownNumber.status, unknownNumber.body.error], [404, 'turn_not_found']);
    const unknownId = await api('POST', `/api/conversations/${id}/fork`, {
      turn_id: '00000000-0000-4000-8000-000000000000',
    });
    assert.deepEqual([unknownId.status, unknownId.body.error], [404, 'turn_not_found']);
    const other = await api('POST', '/api/admin/accounts', { name: 'someone else' });
    assert.equal(other.status, 201, JSON.stringify(other.body));
    const otherKey: string = other.body.data.key.key;
    for (const [path, body] of [
      [`/api/conversations/${id}/fork`, { turn: 1 }],
      [`/api/conversations/${id}/move`, { runner: 'beta' }],
    ] as const) {
      const foreign = await call(srv.url, otherKey, 'POST', path, body);
      assert.deepEqual([foreign.status, foreign.body.error], [404, 'not_found'], path);
    }
    const bad = await api('POST', `/api/conversations/${id}/move`, {});
    assert.equal(bad.status, 422, JSON.stringify(bad.body));

    // Fork at turn 1: a new conversation whose history is turn 1, restored from its checkpoint.
    const forked = await api('POST', `/api/conversations/${id}/fork`, { turn: 1 });
    assert.equal(forked.status, 201, JSON.stringify(forked.body));
    const forkId: string = forked.body.data.id;
    assert.notEqual(forkId, id);
    assert.equal(forked.body.data.agent_id, agent.id);
    assert.equal(forked.body.data.model, 'fountain/demo-forked', "the fork goes on with its parent's model");
    assert.match(forked.body.data.title, /fork at turn 1/);
    await until(
      async () => (await api('GET', `/api/conversations/${forkId}`)).body.data.status === 'idle',
      'the fork to be ready',
    );
    const forkTurns = await turns(forkId);
    assert.deepEqual(
      forkTurns.map((t) => [t.turn_number, t.status, t.prompt]),
      [[1, 'completed', 'remember: the code is 0451']],
    );
    assert.notEqual(forkTurns[0].id, first.id, 'the copied turn has its own id');
    const forkLog = await events(forkId);
    assert.match(answerOf(forkLog, forkTurns[0].id), /I will remember that: the code is 0451/);
    const turnEnd = forkLog.find((e) => e.stage === 'turn' && e.state === 'done');
    assert.equal(JSON.parse(turnEnd.data).turn_id, forkTurns[0].id, "stage events name the fork's turns");
    const origin = forkLog.find((e) => e.stage === 'fork');
    assert.equal(JSON.parse(origin.data).from_conversation_id, id);
    assert.equal(JSON.parse(origin.data).from_turn_number, 1);
    assert.ok(
      forkLog.find((e) => e.stage === 'sandbox' && JSON.parse(e.data).event === 'restored'),
      'the fork says it was restored',
    );
    const forkRecall = await say(forkId, 'recall');
    assert.match(forkRecall, /0451/);
    assert.doesNotMatch(forkRecall, /original went on/);
    // The agent's session is the checkpoint's: session/load worked, no reset was announced.
    assert.ok(!(await events(forkId)).some((e) => e.stage === 'session' && JSON.parse(e.data).event === 'reset'));
    assert.equal((await api('GET', `/api/conversations/${forkId}`)).body.data.status, 'idle');

    // A turn running: not forkable, not movable.
    const asking = await api('POST', `/api/conversations/${id}/prompts`, { prompt: 'run: echo moved' });
    assert.equal(asking.status, 200, JSON.stringify(asking.body));
    const held = await until(
      async () => (await turns(id)).find((t) => t.id === asking.body.turn_id)?.pending_permission,
      'the permission request',
    );
    const running = await api('POST', `/api/conversations/${id}/fork`, { turn_id: asking.body.turn_id });
    assert.deepEqual([running.status, running.body.error], [409, 'turn_not_completed']);
    const busy = await api('POST', `/api/conversations/${id}/move`, { runner: 'beta' });
    assert.deepEqual([busy.status, busy.body.error], [400, 'conversation_busy']);
    const answered = await api('POST', `/api/conversations/${id}/requests/${held.request_id}`, {
      option_id: 'allow_once',
    });
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    assert.equal((await ended(id, asking.body.turn_id)).status, 'completed');

    // Move to the other runner: unknown and same-place targets refused; the old sandbox removed.
    const before = (await api('GET', `/api/conversations/${id}`)).body.data;
    const from: string = before.sandbox.runner.name;
    const to = from === 'alpha' ? 'beta' : 'alpha';
    const unknown = await api('POST', `/api/conversations/${id}/move`, { runner: 'nowhere' });
    assert.deepEqual([unknown.status, unknown.body.error], [404, 'runner_not_found']);
    const same = await api('POST', `/api/conversations/${id}/move`, { runner: from });
    assert.deepEqual([same.status, same.body.error], [409, 'already_there']);
    const moved = await api('POST', `/api/conversations/${id}/move`, { runner: to });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    assert.equal(moved.body.data.sandbox.runner.name, to);
    assert.equal(moved.body.data.sandbox.status, 'pending');
    assert.ok(!existsSync(join(tmp, `root-${from}`, before.sandbox.name)), 'the old sandbox is removed');
    const note = (await events(id)).find((e) => e.stage === 'sandbox' && JSON.parse(e.data).event === 'moved');
    assert.equal(JSON.parse(note.data).to.runner_name, to);

    const recall = await say(id, 'recall');
    assert.match(recall, /0451/);
    assert.match(recall, /original went on/);
    const now = (await api('GET', `/api/conversations/${id}`)).body.data;
    assert.equal(now.sandbox.runner.name, to);
    assert.equal(now.sandbox.status, 'ready');

    // A target that is offline is refused, and nothing moves.
    await runners.get(from)!.stop();
    await online(from, false);
    const offline = await api('POST', `/api/conversations/${id}/move`, { runner: from });
    assert.deepEqual([offline.status, offline.body.error], [409, 'runner_offline']);
    assert.equal((await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.name, to);

    // Checkpoints are kept for the newest turns only: an older turn's fork is refused, naming those kept.
    const all = await turns(id);
    await checkpointed(id, all.at(-1).id);
    const pruned = await api('POST', `/api/conversations/${id}/fork`, { turn: 1 });
    assert.deepEqual([pruned.status, pruned.body.error], [409, 'no_checkpoint']);
    assert.ok(Array.isArray(pruned.body.forkable_turns) && pruned.body.forkable_turns.length > 0);
    assert.ok(!pruned.body.forkable_turns.includes(1));
  });

  it('the CLI forks and moves, and says what is wrong with its flags', async () => {
    const fountain = (...args: string[]) =>
      new Promise<{ code: number; out: string; err: string }>((resolve) =>
        execFile(
          process.execPath,
          [FOUNTAIN_BIN, ...args],
          {
            env: {
              ...process.env,
              FOUNTAIN_API_KEY: key,
              FOUNTAIN_BASE_URL: srv.url,
              FOUNTAIN_PROFILE: '',
              FOUNTAIN_HOME: tmp,
            },
          },
          (e, out, err) => resolve({ code: e ? Number(e.code ?? 1) : 0, out, err }),
        ),
      );
    start('gamma');
    await online('gamma');
    const agent = (await api('POST', '/api/agents', { name: 'cli', runtime: 'demo', model: 'fountain/demo' })).body
      .data;
    const conv = await api('POST', '/api/conversations', { agent_id: agent.id, prompt: 'remember: cli 42' });
    const id: string = conv.body.data.id;
    const [first] = await turns(id);
    assert.equal((await ended(id, first.id)).status, 'completed');
    await checkpointed(id, first.id);

    const badTurn = await fountain('conversations', 'fork', id, '--turn', 'first');
    assert.equal(badTurn.code, 2, badTurn.err);
    assert.match(badTurn.err, /--turn must be a turn number/);
    const noTarget = await fountain('conversations', 'move', id);
    assert.equal(noTarget.code, 2, noTarget.err);
    assert.match(noTarget.err, /give --runner <name> or --provider <name>/);
    const unknownTurn = await fountain('conversations', 'fork', id, '--turn', '7');
    assert.equal(unknownTurn.code, 1);
    assert.match(unknownTurn.err, /turn_not_found/);

    const forked = await fountain('conversations', 'fork', id, '--turn', '1', '--json');
    assert.equal(forked.code, 0, forked.err);
    const forkId = JSON.parse(forked.out).id as string;
    await until(
      async () => (await api('GET', `/api/conversations/${forkId}`)).body.data.status === 'idle',
      'the CLI fork to be ready',
    );
    assert.match(await say(forkId, 'recall'), /cli 42/);

    const here = (await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.name as string;
    const there = ((await api('GET', '/api/runners')).body.data as Json[]).find((r) => r.online && r.name !== here)!
      .name as string;
    const nowhere = await fountain('conversations', 'move', id, '--runner', 'nowhere');
    assert.equal(nowhere.code, 1);
    assert.match(nowhere.err, /runner_not_found/);
    const moved = await fountain('conversations', 'move', id, '--runner', there);
    assert.equal(moved.code, 0, moved.err);
    assert.match(moved.out, new RegExp(`moved ${id}: on ${there}`));
    assert.match(await say(id, 'recall'), /cli 42/);
    assert.equal((await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.name, there);
  });
});
