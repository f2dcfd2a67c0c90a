/**
 * What a user sees of a real agent's work, over the public API with a real runner and the demo agent
 * speaking Claude's shapes: the permission policy matched on the runtime's tool name,
 * automatic allows that answer allow_once, usage and titles recorded, a running tool call not taken for
 * silence, and tool calls shown merged with their updates.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { answer, call, openStream, type Json, type SseEvent } from './helpers/http.ts';

/** Long enough that a loaded machine does not trip it; the sleeping command outlasts it twice. */
const SILENCE_MS = 3000;

describe('agent work as a user sees it (real runner, demo agent in Claude shapes)', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-ux-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      // A wide gap between `event: conversations` signals: a burst's count is then certain, whatever the machine's load.
      engine: {
        idleTimeoutMs: 0,
        askTimeoutMs: 60_000,
        turnSilenceTimeoutMs: SILENCE_MS,
        conversationsSignalGapMs: 600_000,
      },
      sseHeartbeatMs: 1000,
    });
    key = srv.bootstrapKey!;
    runner = startRunnerChild({ name: 'ux', root: join(tmp, 'sandboxes'), baseUrl: srv.url, apiKey: key, home: tmp });
    await until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner to come online',
      60_000,
    );
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  const agent = async (name: string, policy?: Record<string, string>) => {
    const r = await api('POST', '/api/agents', {
      name,
      runtime: 'demo',
      model: 'fountain/demo',
      ...(policy ? { permission_policy: policy } : {}),
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.data;
  };

  it('a new agent asks by default', async () => {
    const a = await agent('fresh');
    assert.deepEqual(a.permission_policy, { default: 'ask' });
  });

  it("matches the policy on Claude's tool name, which only the first tool_call carries; an automatic allow answers allow_once", async () => {
    // The permission request itself says neither Bash nor execute: only the remembered tool name can match.
    const a = await agent('claude-shaped', {
      Bash: 'ask',
      Edit: 'auto_allow',
      execute: 'auto_deny',
      default: 'auto_deny',
    });
    const created = await api('POST', '/api/conversations', {
      agent_id: a.id,
      prompt: 'bash: echo tool-name-matched > proof.txt',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const conv = created.body.data;
    const dir: string = conv.sandbox.runner.path;
    const s = openStream(`${srv.url}/api/conversations/${conv.id}/stream`, key);
    try {
      const asked = await s.stage('permission', 'started');
      const req = JSON.parse(asked.data.data);
      assert.equal(req.tool, 'echo tool-name-matched > proof.txt');
      assert.equal(req.tool_name, 'Bash');
      assert.deepEqual(
        req.options.map((o: Json) => o.kind),
        ['allow_always', 'allow_once', 'reject_once'],
      );
      const yes = await api('POST', `/api/conversations/${conv.id}/requests/${encodeURIComponent(req.request_id)}`, {
        option_id: 'allow',
      });
      assert.equal(yes.status, 200, JSON.stringify(yes.body));
      const t1 = await s.stage('turn', 'done', asked.id!);
      assert.equal(readFileSync(join(dir, 'proof.txt'), 'utf8'), 'tool-name-matched\n');

      // Edit is auto_allow by its tool name: answered allow_once although Claude offers allow_always first.
      writeFileSync(join(dir, 'notes.txt'), 'colour: red\n');
      const p2 = await api('POST', `/api/conversations/${conv.id}/prompts`, {
        prompt: 'edit: notes.txt :: red => green',
      });
      assert.equal(p2.status, 200, JSON.stringify(p2.body));
      const allowed = await s.wait(
        (e) => (e.id ?? 0) > t1.id! && e.data?.stage === 'permission' && e.data?.state === 'done',
        'the automatic answer',
      );
      const auto = JSON.parse(allowed.data.data);
      assert.deepEqual([auto.outcome, auto.option_id, auto.tool_name], ['auto_allow', 'allow', 'Edit']);
      const t2 = await s.stage('turn', 'done', allowed.id!);
      assert.equal(readFileSync(join(dir, 'notes.txt'), 'utf8'), 'colour: green\n');
      assert.match(answer(s.events, p2.body.turn_id), /Edited notes\.txt/);

      // A tool the policy does not name falls to its default: refused, the command never runs.
      const p3 = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'run: touch never.txt' });
      const denied = await s.wait(
        (e) => (e.id ?? 0) > t2.id! && e.data?.stage === 'permission' && e.data?.state === 'done',
        'the policy refusal',
      );
      assert.equal(JSON.parse(denied.data.data).outcome, 'auto_deny');
      assert.equal(JSON.parse(denied.data.data).option_id, 'reject_once');
      await s.stage('turn', 'done', denied.id!);
      assert.match(answer(s.events, p3.body.turn_id), /You did not allow it/);

      // Tool calls as they are: each tool block carries its call merged with every update so far.
      const all: Json[] = [];
      for (let after = 0; ; ) {
        const page = await api('GET', `/api/conversations/${conv.id}/events?blocks=true&limit=7&after=${after}`);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        all.push(...page.body.data);
        if (!page.body.meta.has_more) break;
        after = page.body.meta.next_cursor;
      }
      const toolBlocks = all.flatMap((e) => (e.blocks as Json[]).filter((b) => b.kind.startsWith('tool_')));
      const bashEnd = toolBlocks.find((b) => b.kind === 'tool_result' && b.tool.tool_name === 'Bash');
      assert.ok(bashEnd, JSON.stringify(toolBlocks.map((b) => b.kind)));
      assert.deepEqual(
        [bashEnd.tool.title, bashEnd.tool.kind, bashEnd.tool.status, bashEnd.tool.raw_input.command],
        ['echo tool-name-matched > proof.txt', 'execute', 'completed', 'echo tool-name-matched > proof.txt'],
      );
      const bashStart = toolBlocks.find((b) => b.kind === 'tool_use' && b.id === bashEnd.tool_id);
      assert.deepEqual(
        [bashStart.name, bashStart.tool.raw_input],
        ['Terminal', {}],
        'the first tool_call says only "Terminal"',
      );
      const edit = toolBlocks.filter((b) => b.tool.tool_name === 'Edit').at(-1);
      assert.equal(edit.tool.title, 'Edit notes.txt');
      assert.deepEqual(edit.tool.content, [
        { type: 'diff', path: join(dir, 'notes.txt'), old_text: 'colour: red\n', new_text: 'colour: green\n' },
      ]);
      assert.ok(all.every((e) => Array.isArray(e.blocks)));
      const plain = await api('GET', `/api/conversations/${conv.id}/events?limit=3`);
      assert.ok(
        plain.body.data.every((e: Json) => e.blocks === undefined),
        'blocks only when asked for',
      );
      // The stream derives the same views, replaying from the middle of a turn (primed from its earlier tool lines).
      const mid = all.find((e) => e.blocks.some((b: Json) => b.kind === 'tool_update' && b.tool.tool_name === 'Edit'));
      const sse = await fetch(`${srv.url}/api/conversations/${conv.id}/stream?blocks=true&wait=false&after=${mid.id}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      const text = await sse.text();
      const streamed = text
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => JSON.parse(l.slice(6)));
      const editEnd = streamed
        .flatMap((e) => e.blocks)
        .find((b: Json) => b.kind === 'tool_result' && b.tool.tool_name === 'Edit');
      assert.deepEqual(
        [editEnd.tool.title, editEnd.tool.kind, editEnd.tool.status],
        ['Edit notes.txt', 'edit', 'completed'],
      );
    } finally {
      s.close();
    }
  });

  it('records usage per turn and in total, and takes the agent title unless the user gave one', async () => {
    const a = await agent('counted', { default: 'auto_allow' });
    const conv = (await api('POST', '/api/conversations', { agent_id: a.id, prompt: 'remember: three words here' }))
      .body.data;
    const s = openStream(`${srv.url}/api/conversations/${conv.id}/stream`, key);
    try {
      const t1 = await s.stage('turn', 'done');
      assert.equal(JSON.parse(t1.data.data).usage?.input, 4);
      await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'recall' });
      await s.stage('turn', 'done', t1.id!);
    } finally {
      s.close();
    }
    const turns = (await api('GET', `/api/conversations/${conv.id}/turns`)).body.data;
    // The demo counts words: "remember: three words here" is 4 in, "I will remember that: three words here" 7 out.
    assert.deepEqual(turns[0].usage, {
      input: 4,
      output: 7,
      cache_read: 0,
      cache_write: 0,
      context: { used: 11, size: 200_000 },
      cost: { amount: 0.000011, currency: 'USD' },
    });
    assert.equal(turns[1].usage.input, 1);
    const got = (await api('GET', `/api/conversations/${conv.id}`)).body.data;
    assert.equal(got.usage_total.input, 4 + turns[1].usage.input);
    assert.equal(got.usage_total.output, 7 + turns[1].usage.output);
    assert.deepEqual(got.usage_total.cost, turns[1].usage.cost);
    assert.equal(got.title, 'remember: three words here');
    assert.equal(got.title_source, 'agent');

    const named = (await api('POST', '/api/conversations', { agent_id: a.id, title: 'Mine', prompt: 'hello' })).body
      .data;
    await until(
      async () =>
        (await api('GET', `/api/conversations/${named.id}/turns`)).body.data[0]?.status === 'completed' || null,
      'the titled turn',
    );
    const kept = (await api('GET', `/api/conversations/${named.id}`)).body.data;
    assert.deepEqual([kept.title, kept.title_source], ['Mine', 'user']);
    assert.ok(kept.usage_total.output > 0);
  });

  it('a tool call still running is not silence; an agent silent with no tool running is abandoned without blaming the credential', async () => {
    const a = await agent('patient', { default: 'auto_allow' });
    const conv = (
      await api('POST', '/api/conversations', {
        agent_id: a.id,
        prompt: `bash: sleep ${(2 * SILENCE_MS) / 1000} && echo woke`,
      })
    ).body.data;
    const s = openStream(`${srv.url}/api/conversations/${conv.id}/stream`, key);
    try {
      const t1 = await s.wait(
        (e) => e.data?.stage === 'turn' && (e.data?.state === 'done' || e.data?.state === 'failed'),
        'the long command turn',
      );
      assert.equal(t1.data.state, 'done', t1.data.data);
      // `slow: 1 <ms>` pauses before its only line with no tool call running: that is silence.
      await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: `slow: 1 ${4 * SILENCE_MS}ms` });
      const t2 = await s.wait(
        (e) => (e.id ?? 0) > t1.id! && e.data?.stage === 'turn' && e.data?.state !== 'started',
        'the silent turn',
      );
      assert.equal(t2.data.state, 'failed');
      const reason = JSON.parse(t2.data.data).reason as string;
      assert.match(reason, /sent nothing for \d+ s with no tool call running/);
      assert.doesNotMatch(reason, /credential/);
    } finally {
      s.close();
    }
  });

  it('the account stream says `event: conversations` when a conversation is created, titled by the agent, renamed, read, terminated or deleted; a burst is one signal', async () => {
    const isSignal = (e: SseEvent) => e.event === 'conversations' && e.data?.reason === 'changed' && e.id === null;
    /** A fresh account stream (its first signal goes at once), the change, then the signal it must carry. */
    const signalled = async <T>(what: string, change: () => Promise<T>): Promise<T> => {
      const s = openStream(`${srv.url}/api/events/stream`, key);
      try {
        await until(() => s.raw().startsWith(': connected') || null, 'the account stream open');
        const r = await change();
        await s.wait(isSignal, `the signal for ${what}`);
        return r;
      } finally {
        s.close();
      }
    };
    const a = await agent('listed', { default: 'auto_allow' });
    const conv = await signalled('create', async () => {
      const r = await api('POST', '/api/conversations', { agent_id: a.id });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return r.body.data;
    });
    await until(
      async () => (await api('GET', `/api/conversations/${conv.id}`)).body.data.status === 'idle' || null,
      'the sandbox up',
    );
    await signalled("the agent's title", () =>
      api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'remember: a title' }),
    );
    assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.title, 'remember: a title');
    await until(
      async () => (await api('GET', `/api/conversations/${conv.id}`)).body.data.status === 'idle' || null,
      'the turn over',
    );
    assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.unread, true);
    await signalled('read', async () =>
      assert.equal((await api('POST', `/api/conversations/${conv.id}/read`)).status, 204),
    );
    assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.unread, false);
    assert.equal((await api('POST', '/api/conversations/00000000-0000-4000-8000-000000000000/read')).status, 404);
    await signalled('terminate', async () =>
      assert.equal((await api('POST', `/api/conversations/${conv.id}/terminate`)).status, 204),
    );
    await signalled('delete', async () =>
      assert.equal((await api('DELETE', `/api/conversations/${conv.id}`)).status, 204),
    );

    // A teammate's name is its conversation's title.
    const mate = await agent('mate', { default: 'auto_allow' });
    await signalled('a teammate added', async () =>
      assert.equal((await api('POST', '/api/team', { agent_id: mate.id })).status, 201),
    );
    await signalled('rename', async () =>
      assert.equal((await api('PATCH', `/api/team/${mate.id}`, { name: 'Renamed' })).status, 200),
    );
    const mateConv = (await api('GET', `/api/team/${mate.id}`)).body.data.conversation.id as string;

    // A burst: four changes, then a terminate whose stage event comes after them on the same stream.
    const s = openStream(`${srv.url}/api/events/stream`, key);
    try {
      await until(() => s.raw().startsWith(': connected') || null, 'the account stream open');
      for (const name of ['One', 'Two'])
        assert.equal((await api('PATCH', `/api/team/${mate.id}`, { name })).status, 200);
      for (let i = 0; i < 2; i++) assert.equal((await api('POST', `/api/conversations/${mateConv}/read`)).status, 204);
      assert.equal((await api('POST', `/api/conversations/${mateConv}/terminate`)).status, 204);
      const end = await s.wait(
        (e) => e.data?.conversation_id === mateConv && e.data?.stage === 'terminate' && e.data?.state === 'done',
        'the terminate on the account stream',
      );
      const before = s.events.slice(0, s.events.indexOf(end));
      assert.equal(
        before.filter(isSignal).length,
        1,
        `one signal for five changes: ${JSON.stringify(before.map((e) => e.event))}`,
      );
    } finally {
      s.close();
    }
  });
});
