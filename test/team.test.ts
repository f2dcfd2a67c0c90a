/**
 * The team over HTTP with the real server, a real `fountain runner` child process and the demo agent:
 * roster and presence (machine_offline while the runner is away), messages (busy, 503 runner_offline,
 * replacement of a finished conversation), the team stream, and schedules that wait out a busy teammate.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { scheduleRuns, schedules } from '../src/server/store/team-schema.ts';
import { conversations, turns } from '../src/server/store/conversation-schema.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { call, messageTeammate, openStream, stageIs, type Json, type Stream } from './helpers/http.ts';

describe('the team with a real runner and the demo agent', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let stream: Stream;
  let alpha: string;
  let beta: string;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const db = () => srv.database.db as unknown as EngineDb;
  const startRunner = () =>
    startRunnerChild({ name: 't', root: join(tmp, 'sandboxes'), baseUrl: srv.url, apiKey: key, home: tmp });
  const teammate = async (agentId: string): Promise<Json> => (await api('GET', `/api/team/${agentId}`)).body.data;
  const presence = async (agentId: string, state: string) =>
    until(async () => ((await teammate(agentId)).presence.state === state ? true : false), `presence ${state}`, 60_000);
  /** Sends a message and waits for its turn to finish on the team stream. */
  const message = async (agentId: string, prompt: string) => {
    const from = stream.events.length;
    const r = await messageTeammate(srv.url, key, agentId, prompt);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    await stream.wait(stageIs('turn', 'done', agentId), `turn/done for ${prompt}`, from);
    return r.body;
  };
  const makeAgent = async (name: string) => {
    const r = await api('POST', '/api/agents', {
      name,
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { execute: 'ask' },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.data.id as string;
  };

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-team-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      engine: { idleTimeoutMs: 0, askTimeoutMs: 120_000 },
      sseHeartbeatMs: 300,
      scheduler: { tickMs: 100, snoozeMs: 200, patienceMs: 120_000 },
    });
    key = srv.bootstrapKey!;
    runner = startRunner();
    await until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner to come online',
      60_000,
    );
    stream = openStream(`${srv.url}/api/team/stream`, key);
  });

  after(async () => {
    stream?.close();
    await runner?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('adds teammates, shows where they run, and carries their events on the team stream', async () => {
    await until(() => stream.raw().length > 0, 'the stream to open');
    assert.ok(stream.raw().startsWith(': connected\n\n'), JSON.stringify(stream.raw().slice(0, 40)));
    alpha = await makeAgent('alpha');
    beta = await makeAgent('beta');
    const added = await api('POST', '/api/team', { agent_id: alpha, name: 'Al' });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    assert.equal(added.body.data.name, 'Al');
    assert.equal(added.body.data.conversation.channel_id, 'fountain:team');
    await stream.wait((e) => e.event === 'team' && e.data?.reason === 'changed', 'team changed on add');
    const again = await api('POST', '/api/team', { agent_id: alpha, name: 'ignored' });
    assert.equal(again.status, 200);
    assert.equal(again.body.data.name, 'Al');
    assert.equal((await api('POST', '/api/team', { agent_id: beta })).status, 201);
    assert.equal((await api('POST', '/api/team', { agent_id: '00000000-0000-4000-8000-000000000000' })).status, 404);

    await presence(alpha, 'online');
    await presence(beta, 'online');
    const t = await teammate(alpha);
    assert.deepEqual(t.presence, { state: 'online', label: 'online' });
    assert.equal(t.sandbox.provider, 'runner');
    assert.equal(t.sandbox.runner.name, 't');
    assert.equal(t.sandbox.runner.online, true);
    assert.equal(t.sandbox.runner.path, join(tmp, 'sandboxes', t.conversation.sandbox.name));
    assert.equal(t.preview, null);
    assert.equal(t.agent.id, alpha);

    const sent = await message(alpha, 'remember: the code is 7');
    assert.equal(sent.status, 'queued');
    assert.equal(sent.conversation_id, t.conversation.id);
    await message(beta, 'hello beta');
    const done = stream.events.filter(stageIs('turn', 'done'));
    assert.deepEqual(new Set(done.map((e) => e.data.agent_id)), new Set([alpha, beta]));
    for (const e of done) assert.equal(typeof e.data.conversation_id, 'string');

    const roster = (await api('GET', '/api/team')).body.data as Json[];
    assert.deepEqual(
      roster.map((m) => m.agent_id),
      [beta, alpha],
      'most recently active first',
    );
    const a = roster.find((m) => m.agent_id === alpha);
    assert.deepEqual(a.preview, { kind: 'them', text: 'I will remember that: the code is 7' });
    assert.equal(a.last_turn.status, 'completed');
    assert.equal(a.last_turn.prompt, 'remember: the code is 7');

    // Last-Event-ID replays both teammates' events in id order.
    const first = stream.events.find((e) => e.id !== null)!;
    const replay = openStream(`${srv.url}/api/team/stream`, key, first.id! - 1);
    try {
      await replay.wait(stageIs('turn', 'done', beta), 'replayed turn/done of beta');
      const ids = replay.events.filter((e) => e.id !== null).map((e) => e.id!);
      assert.deepEqual(
        ids,
        [...ids].sort((x, y) => x - y),
      );
      assert.deepEqual(
        replay.events.filter(stageIs('turn', 'done')).map((e) => e.data.agent_id),
        done.map((e) => e.data.agent_id),
      );
    } finally {
      replay.close();
    }
    await until(() => stream.heartbeats() > 0, 'a heartbeat');
  });

  it('refuses a second message while a turn runs, and renames', async () => {
    const from = stream.events.length;
    assert.equal((await api('POST', `/api/team/${alpha}/messages`, { prompt: 'run: echo held' })).status, 202);
    const ask = await stream.wait(stageIs('permission', 'started', alpha), 'the permission request', from);
    assert.equal((await teammate(alpha)).presence.state, 'working');
    assert.equal((await teammate(alpha)).preview.kind, 'typing');
    const busy = await api('POST', `/api/team/${alpha}/messages`, { prompt: 'are you there' });
    assert.deepEqual([busy.status, busy.body.error], [400, 'conversation_busy']);
    const req = JSON.parse(ask.data.data);
    const allow = req.options.find((o: Json) => o.kind.startsWith('allow'));
    const conv = ask.data.conversation_id;
    assert.equal(
      (await api('POST', `/api/conversations/${conv}/requests/${req.request_id}`, { option_id: allow.option_id }))
        .status,
      200,
    );
    await stream.wait(stageIs('turn', 'done', alpha), 'the held turn to finish', from);

    const mark = stream.events.length;
    const renamed = await api('PATCH', `/api/team/${alpha}`, { name: 'Alice' });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.data.name, 'Alice');
    await stream.wait((e) => e.event === 'team', 'team changed on rename', mark);
    assert.equal((await api('PATCH', `/api/team/${alpha}`, { name: '  ' })).body.data.name, 'alpha');
    assert.equal((await api('PATCH', `/api/team/${alpha}`, { name: 'Al' })).body.data.name, 'Al');
  });

  it('reads machine_offline while the runner is away, answers 503 runner_offline, and wakes on its return', async () => {
    const mark = stream.events.length;
    await runner.stop();
    await stream.wait(
      (e) => e.event === 'team' && e.data?.reason === 'changed',
      'team changed on the runner drop',
      mark,
    );
    const t = await teammate(alpha);
    assert.deepEqual(t.presence, {
      state: 'machine_offline',
      label: 'machine offline · wakes when the runner reconnects',
    });
    assert.equal(t.sandbox.runner.online, false);
    const refused = await api('POST', `/api/team/${alpha}/messages`, { prompt: 'recall' });
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error, 'runner_offline');
    assert.equal(refused.headers.get('retry-after'), '30');

    const back = stream.events.length;
    runner = startRunner();
    await stream.wait((e) => e.event === 'team', 'team changed on the runner return', back);
    await presence(alpha, 'online');
    await message(alpha, 'recall');
    const preview = (await teammate(alpha)).preview;
    assert.equal(preview.kind, 'them');
    assert.match(preview.text, /the code is 7/);
  });

  it('replaces a finished conversation with a fresh one seeded with the message', async () => {
    const old = (await teammate(alpha)).conversation.id;
    assert.equal((await api('POST', `/api/conversations/${old}/terminate`)).status, 204);
    assert.deepEqual((await teammate(alpha)).presence, {
      state: 'offline',
      label: 'offline · new computer on message',
    });
    const mark = stream.events.length;
    const r = await api('POST', `/api/team/${alpha}/messages`, { prompt: 'hello again' });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.notEqual(r.body.conversation_id, old);
    await stream.wait(stageIs('turn', 'done', alpha), 'the fresh conversation’s first turn', mark);
    const t = await teammate(alpha);
    assert.equal(t.conversation.id, r.body.conversation_id);
    assert.equal(t.name, 'Al', 'the name carries over');
    const history = (await api('GET', `/api/team/${alpha}/conversations`)).body.data as Json[];
    assert.deepEqual(
      history.map((c) => [c.id, c.current]),
      [
        [r.body.conversation_id, true],
        [old, false],
      ],
    );
  });

  it('rotates a teammate onto a fresh conversation on the same sandbox: files kept, new agent session, the old one released', async () => {
    await message(alpha, 'remember: the rotation word is ferns');
    const old = (await teammate(alpha)).conversation;
    const oldSession = (await db().select().from(conversations).where(eq(conversations.id, old.id)))[0]!
      .runtimeSessionId;
    assert.ok(oldSession);

    // Not while a turn holds the sandbox.
    let from = stream.events.length;
    assert.equal((await api('POST', `/api/team/${alpha}/messages`, { prompt: 'run: echo held' })).status, 202);
    const ask = await stream.wait(stageIs('permission', 'started', alpha), 'the permission request', from);
    const busy = await api('POST', `/api/team/${alpha}/conversations`, {});
    assert.deepEqual([busy.status, busy.body.error], [400, 'conversation_busy']);
    const req = JSON.parse(ask.data.data);
    const deny = req.options.find((o: Json) => o.kind.startsWith('reject'));
    assert.equal(
      (await api('POST', `/api/conversations/${old.id}/requests/${req.request_id}`, { option_id: deny.option_id }))
        .status,
      200,
    );
    await stream.wait(stageIs('turn', 'done', alpha), 'the held turn to finish', from);
    assert.equal((await api('POST', `/api/team/${alpha}/conversations`, { name: 42 })).status, 422);

    from = stream.events.length;
    const rotated = await api('POST', `/api/team/${alpha}/conversations`, {});
    assert.equal(rotated.status, 201, JSON.stringify(rotated.body));
    const fresh = rotated.body.data;
    assert.notEqual(fresh.id, old.id);
    assert.equal(fresh.sandbox_id, old.sandbox_id, 'the successor runs on the same sandbox');
    assert.equal(fresh.channel_id, 'fountain:team');
    assert.equal(fresh.title, 'Al', 'the name carries over');
    await stream.wait((e) => e.event === 'team' && e.data?.reason === 'changed', 'team changed on rotation', from);
    assert.equal((await api('GET', `/api/conversations/${old.id}`)).body.data.status, 'terminated');
    const released = (await api('GET', `/api/conversations/${old.id}/events`)).body.data as Json[];
    const end = released.find((e) => e.stage === 'terminate' && e.state === 'done');
    assert.deepEqual(JSON.parse(end.data), { event: 'released', successor_id: fresh.id });
    assert.equal((await teammate(alpha)).conversation.id, fresh.id);
    const prompted = await api('POST', `/api/conversations/${old.id}/prompts`, { prompt: 'still there?' });
    assert.deepEqual([prompted.status, prompted.body.error], [410, 'conversation_terminated']);

    // The agent's memory lives on the sandbox's disk, so it survives; the ACP session is new.
    await message(alpha, 'recall');
    const t = await teammate(alpha);
    assert.equal(t.conversation.id, fresh.id);
    assert.match(t.preview.text, /the rotation word is ferns/);
    const newSession = (await db().select().from(conversations).where(eq(conversations.id, fresh.id)))[0]!
      .runtimeSessionId;
    assert.ok(newSession);
    assert.notEqual(newSession, oldSession);
    const history = (await api('GET', `/api/team/${alpha}/conversations`)).body.data as Json[];
    assert.deepEqual(
      history.slice(0, 2).map((c) => [c.id, c.current]),
      [
        [fresh.id, true],
        [old.id, false],
      ],
    );

    // A sandbox that is gone: the successor gets a new one.
    assert.equal((await api('POST', `/api/conversations/${fresh.id}/terminate`)).status, 204);
    const anew = await api('POST', `/api/team/${alpha}/conversations`, {});
    assert.equal(anew.status, 201, JSON.stringify(anew.body));
    assert.notEqual(anew.body.data.sandbox_id, fresh.sandbox_id);
    await message(alpha, 'recall');
    assert.match((await teammate(alpha)).preview.text, /I remember nothing/);
  });

  it('manages schedules: validation, next_run_at, enable, run now, schedule events', async () => {
    const base = `/api/team/${beta}/schedules`;
    for (const [cron, msg] of [
      ['@reboot', /@reboot/],
      ['61 * * * *', /minute/],
      ['* * *', /5 fields/],
    ] as const) {
      const r = await api('POST', base, { cron, prompt: 'x' });
      assert.equal(r.status, 422, cron);
      assert.match(JSON.stringify(r.body.errors.cron), msg);
    }
    assert.equal((await api('POST', base, { cron: '@daily', prompt: '' })).status, 422);
    const mark = stream.events.length;
    const created = await api('POST', base, { name: 'nightly', cron: '@daily', prompt: 'hello from the schedule' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const s = created.body.data;
    await stream.wait((e) => e.event === 'schedule' && e.data?.reason === 'changed', 'schedule changed', mark);
    const midnight = new Date();
    midnight.setUTCHours(24, 0, 0, 0);
    assert.equal(s.next_run_at, midnight.toISOString());
    assert.deepEqual([s.one_off, s.enabled, s.last_run_at, s.last_error], [false, true, null, null]);

    const off = await api('PATCH', `${base}/${s.id}`, { enabled: false });
    assert.equal(off.body.data.next_run_at, null);
    const on = await api('PATCH', `${base}/${s.id}`, { enabled: true, cron: '30 6 * * 1' });
    assert.notEqual(on.body.data.next_run_at, null);
    assert.equal(new Date(on.body.data.next_run_at).getUTCDay(), 1);
    assert.equal((await api('GET', '/api/team/schedules')).body.data.length, 1);
    assert.equal((await api('GET', `/api/team/${alpha}/schedules/${s.id}`)).status, 404, 'address is (agent_id, id)');

    const run = await api('POST', `${base}/${s.id}/run`);
    assert.equal(run.status, 202, JSON.stringify(run.body));
    assert.equal(run.body.conversation_id, (await teammate(beta)).conversation.id);
    await stream.wait(stageIs('turn', 'done', beta), 'the manual run’s turn', mark);
    const after = (await api('GET', `${base}/${s.id}`)).body.data;
    assert.notEqual(after.last_run_at, null);
    assert.equal(after.last_error, null);
    assert.equal(after.last_conversation_id, run.body.conversation_id);
    assert.equal((await api('DELETE', `${base}/${s.id}`)).status, 204);
    assert.equal((await api('GET', `${base}/${s.id}`)).status, 404);
  });

  it('fires a due schedule once, waiting out a busy teammate, and gives up past its window', async () => {
    const conv = (await teammate(beta)).conversation.id;
    const from = stream.events.length;
    assert.equal((await api('POST', `/api/team/${beta}/messages`, { prompt: 'run: echo busy' })).status, 202);
    const ask = await stream.wait(stageIs('permission', 'started', beta), 'beta held in a permission request', from);

    const s = (await api('POST', `/api/team/${beta}/schedules`, { cron: '* * * * *', prompt: 'remember: scheduled' }))
      .body.data;
    const late = (await api('POST', `/api/team/${beta}/schedules`, { cron: '* * * * *', prompt: 'remember: too late' }))
      .body.data;
    // Their due times arrive now: one just passed, one long past the patience window.
    await db()
      .update(schedules)
      .set({ nextRunAt: new Date(Date.now() - 1000) })
      .where(eq(schedules.id, s.id));
    await db()
      .update(schedules)
      .set({ nextRunAt: new Date(Date.now() - 10 * 60_000) })
      .where(eq(schedules.id, late.id));

    const snoozed = await until(async () => {
      const [r] = await db().select().from(scheduleRuns).where(eq(scheduleRuns.scheduleId, s.id));
      return r && r.status === 'pending' && r.attempts >= 2 ? r : undefined;
    }, 'the run to snooze at least twice');
    assert.equal(snoozed.error, 'teammate was busy');

    const req = JSON.parse(ask.data.data);
    const deny = req.options.find((o: Json) => o.kind.startsWith('reject')) ?? req.options[0];
    assert.equal(
      (await api('POST', `/api/conversations/${conv}/requests/${req.request_id}`, { option_id: deny.option_id }))
        .status,
      200,
    );

    const delivered = await until(async () => {
      const [r] = await db().select().from(scheduleRuns).where(eq(scheduleRuns.scheduleId, s.id));
      return r?.status === 'delivered' ? r : undefined;
    }, 'the run to be delivered');
    assert.equal(delivered.conversationId, conv);
    await until(
      async () => (await api('GET', `/api/team/${beta}/schedules/${s.id}`)).body.data.last_run_at !== null,
      'last_run_at',
    );
    const view = (await api('GET', `/api/team/${beta}/schedules/${s.id}`)).body.data;
    assert.equal(view.last_error, null);
    assert.equal(view.last_conversation_id, conv);
    assert.ok(new Date(view.next_run_at) > new Date(), 'the next due time is in the future');

    const lateView = (await api('GET', `/api/team/${beta}/schedules/${late.id}`)).body.data;
    assert.equal(lateView.last_error, 'teammate was busy');
    const [lateRun] = await db().select().from(scheduleRuns).where(eq(scheduleRuns.scheduleId, late.id));
    assert.equal(lateRun!.status, 'given_up');

    await until(async () => {
      const rows = await db().select().from(turns).where(eq(turns.conversationId, conv));
      return rows.find((t) => t.prompt === 'remember: scheduled' && t.status === 'completed');
    }, 'the scheduled turn to complete');
    const rows = await db().select().from(turns).where(eq(turns.conversationId, conv));
    assert.equal(rows.filter((t) => t.prompt === 'remember: scheduled').length, 1);
    assert.equal(rows.filter((t) => t.prompt === 'remember: too late').length, 0);
  });

  it('takes an agent off the team: conversation terminated, unbound, schedules deleted', async () => {
    const s = (await api('POST', `/api/team/${beta}/schedules`, { cron: '@hourly', prompt: 'tick' })).body.data;
    const conv = (await teammate(beta)).conversation.id;
    const mark = stream.events.length;
    assert.equal((await api('DELETE', `/api/team/${beta}`)).status, 204);
    await stream.wait((e) => e.event === 'team', 'team changed on removal', mark);
    assert.equal((await api('GET', `/api/team/${beta}`)).status, 404);
    assert.equal((await api('GET', `/api/team/${beta}/schedules/${s.id}`)).status, 404);
    const c = (await api('GET', `/api/conversations/${conv}`)).body.data;
    assert.deepEqual([c.status, c.channel_id], ['terminated', null]);
    assert.deepEqual(
      ((await api('GET', '/api/team')).body.data as Json[]).map((m) => m.agent_id),
      [alpha],
    );
    assert.equal((await api('DELETE', `/api/team/${beta}`)).status, 404);
  });
});
