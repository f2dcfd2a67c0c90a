import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseRunnerName } from '../../sandbox/index.ts';
import { listTurns } from './store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import type { ConversationEngine } from './engine.ts';
import { startEngineRig, type EngineRig } from './test-rig.ts';
import type { RunnerAdapter } from '../../providers/runner/index.ts';
import type { SandboxAdapter } from '../../sandbox/index.ts';
import { allEvents, answerText, until, waitForStage } from './testing.ts';

describe('ConversationEngine on a real runner with the demo agent', () => {
  let rig: EngineRig;
  let db: EngineDb;
  let engine: ConversationEngine;
  let accountId: string;
  let tmp: string;
  const root = () => rig.root;

  before(async () => {
    rig = await startEngineRig('engine', { idleTimeoutMs: 200, sweepIntervalMs: 60_000, askTimeoutMs: 1500 });
    ({ db, engine, accountId, tmp } = rig);
  });

  after(async () => {
    await rig?.stop();
  });

  /**
   * A dependency-free NDJSON agent script: it answers initialize and session/new, and runs `onPrompt`
   * (JavaScript lines with `m`, the request, and `send`) for each session/prompt; none ignores them.
   */
  const ndjsonAgent = (file: string, sessionId: string, onPrompt: readonly string[]): string => {
    const script = join(tmp, file);
    writeFileSync(
      script,
      [
        "import { createInterface } from 'node:readline';",
        'const send = (m) => process.stdout.write(JSON.stringify(m) + "\\n");',
        'createInterface({ input: process.stdin }).on("line", (l) => {',
        '  const m = JSON.parse(l);',
        '  if (m.method === "initialize") send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: 1, agentCapabilities: {}, authMethods: [] } });',
        `  else if (m.method === "session/new") send({ jsonrpc: "2.0", id: m.id, result: { sessionId: "${sessionId}" } });`,
        '  else if (m.method === "session/prompt") {',
        ...onPrompt.map((l) => `    ${l}`),
        '  }',
        '});',
      ].join('\n'),
    );
    return script;
  };

  it('runs a turn, a permission, the idle park, a wake that remembers, and terminate', async () => {
    const agent = await rig.demoAgent('demo', { execute: 'ask' }, 'Be brief.');
    const created = await engine.create(accountId, { agentId: agent.id, prompt: 'remember: the answer is 42' });
    assert.ok(created.ok, JSON.stringify(created));
    const conv = created.value;
    assert.equal(conv.sandbox?.provider, 'runner');
    assert.equal(conv.sandbox?.runner?.id, rig.runnerId);
    assert.equal(conv.sandbox?.runner?.online, true);
    const dir = join(root(), conv.sandbox!.name);
    assert.equal(parseRunnerName(conv.sandbox!.name).ok, true);

    await waitForStage(db, conv.id, 'provision', 'done');
    const t1 = await waitForStage(db, conv.id, 'turn', 'done');
    assert.ok(existsSync(join(dir, 'AGENTS.md')), 'instructions file written');
    assert.match(answerText(await allEvents(db, conv.id), t1.turnId!), /I will remember that: the answer is 42/);

    // A permission request: asked, answered, the command runs.
    const p = await engine.prompt(accountId, conv.id, 'run: echo hello-from-sandbox');
    assert.ok(p.ok);
    const asked = await waitForStage(db, conv.id, 'permission', 'started');
    const req = JSON.parse(asked.data) as { request_id: string; options: Array<{ option_id: string }> };
    assert.equal((await engine.prompt(accountId, conv.id, 'again')).ok, false, 'busy while the turn runs');
    const bad = await engine.answerPermission(accountId, conv.id, req.request_id, 'nope');
    assert.equal(!bad.ok && bad.error.code, 'unknown_option');
    const good = await engine.answerPermission(accountId, conv.id, req.request_id, 'allow_once');
    assert.ok(good.ok);
    const late = await engine.answerPermission(accountId, conv.id, req.request_id, 'allow_once');
    assert.equal(!late.ok && late.error.code, 'permission_request_resolved');
    const t2 = await waitForStage(db, conv.id, 'turn', 'done', asked.id);
    assert.match(answerText(await allEvents(db, conv.id), t2.turnId!), /hello-from-sandbox/);

    // Idle park: the runner suspends the sandbox.
    await until(async () => (await engine.sweep()) > 0 || null, 'the sweep to park the sandbox');
    await waitForStage(db, conv.id, 'sandbox', 'done');
    assert.ok(existsSync(join(dir, '.fountain-suspended')), 'suspended marker on the runner');
    const parked = await engine.get(accountId, conv.id);
    assert.ok(parked.ok && parked.value.status === 'idle' && parked.value.sandbox?.status === 'suspended');

    // Wake: resume, respawn, session/load, and recall what turn 1 stored.
    const mark = (await allEvents(db, conv.id)).at(-1)!.id;
    const p3 = await engine.prompt(accountId, conv.id, 'recall');
    assert.ok(p3.ok, JSON.stringify(p3));
    assert.ok(!existsSync(join(dir, '.fountain-suspended')), 'resumed');
    const t3 = await waitForStage(db, conv.id, 'turn', 'done', mark);
    assert.match(answerText(await allEvents(db, conv.id), t3.turnId!), /the answer is 42/);
    const turns = await listTurns(db, conv.id);
    assert.deepEqual(
      turns.map((t) => t.status),
      ['completed', 'completed', 'completed'],
    );
    assert.ok(turns.every((t) => typeof t.acpPromptId === 'number'));

    // Terminate destroys the sandbox directory; a second terminate is fine; prompts get 410.
    assert.ok((await engine.terminate(accountId, conv.id)).ok);
    assert.ok(!existsSync(dir), 'sandbox directory removed');
    assert.ok((await engine.terminate(accountId, conv.id)).ok);
    const gone = await engine.prompt(accountId, conv.id, 'hello');
    assert.equal(!gone.ok && gone.error.code, 'conversation_terminated');
  });

  it('denies an unanswered permission request after the ask timeout', async () => {
    const agent = await rig.demoAgent('asker', { default: 'ask' });
    const created = await engine.create(accountId, { agentId: agent.id, prompt: 'run: echo never' });
    assert.ok(created.ok);
    const asked = await waitForStage(db, created.value.id, 'permission', 'started');
    const done = await waitForStage(db, created.value.id, 'permission', 'done', asked.id);
    assert.equal((JSON.parse(done.data) as { outcome: string }).outcome, 'timeout');
    const turn = await waitForStage(db, created.value.id, 'turn', 'done', asked.id);
    assert.match(answerText(await allEvents(db, created.value.id), turn.turnId!), /did not allow it/);
    assert.ok((await engine.terminate(accountId, created.value.id)).ok);
  });

  it('interrupts a turn held at a permission request: session/cancel, turn interrupted, conversation idle', async () => {
    const agent = await rig.demoAgent('interruptible', { execute: 'ask' });
    const created = await engine.create(accountId, { agentId: agent.id, prompt: 'run: echo interrupted' });
    assert.ok(created.ok);
    const id = created.value.id;
    const asked = await waitForStage(db, id, 'permission', 'started');
    assert.ok((await engine.interrupt(accountId, id)).ok);
    const cancelled = await waitForStage(db, id, 'permission', 'done', asked.id);
    assert.equal((JSON.parse(cancelled.data) as { outcome: string }).outcome, 'cancelled');
    await waitForStage(db, id, 'turn', 'interrupted', asked.id);
    const [turn] = await listTurns(db, id);
    assert.equal(turn?.status, 'interrupted');
    const conv = await engine.get(accountId, id);
    assert.ok(conv.ok && conv.value.status === 'idle');
    const again = await engine.interrupt(accountId, id);
    assert.equal(!again.ok && again.error.code, 'no_turn_running');
    assert.ok((await engine.terminate(accountId, id)).ok);
  });
  it('drops a session/load replay that arrives after the load reply; a load that fails is said and the history carried over', async () => {
    // As gemini-cli 0.61: it answers session/load first and streams the history after its reply. Its
    // prompts answer with what they were given; a load fails once the file `load-fails` exists.
    const failFlag = join(tmp, 'load-fails');
    const script = join(tmp, 'late-replay-agent.mjs');
    writeFileSync(
      script,
      [
        "import { createInterface } from 'node:readline';",
        "import { existsSync } from 'node:fs';",
        'const send = (m) => process.stdout.write(JSON.stringify(m) + "\\n");',
        'const said = (sessionId, text) => send({ jsonrpc: "2.0", method: "session/update", params: { sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } } });',
        'createInterface({ input: process.stdin }).on("line", (l) => {',
        '  const m = JSON.parse(l);',
        '  if (m.method === "initialize") send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: 1, agentCapabilities: { loadSession: true }, authMethods: [] } });',
        '  else if (m.method === "session/new") send({ jsonrpc: "2.0", id: m.id, result: { sessionId: "late-" + Date.now() } });',
        `  else if (m.method === "session/load" && existsSync(${JSON.stringify(failFlag)})) send({ jsonrpc: "2.0", id: m.id, error: { code: -32603, message: "No previous sessions found for this project." } });`,
        '  else if (m.method === "session/load") {',
        '    send({ jsonrpc: "2.0", id: m.id, result: {} });',
        '    setTimeout(() => said(m.params.sessionId, "replayed: an earlier answer"), 60);',
        '    setTimeout(() => said(m.params.sessionId, "replayed: another earlier answer"), 120);',
        '  } else if (m.method === "session/prompt") {',
        '    said(m.params.sessionId, "got: " + m.params.prompt.map((b) => b.text).join(" | "));',
        '    send({ jsonrpc: "2.0", id: m.id, result: { stopReason: "end_turn" } });',
        '  }',
        '});',
      ].join('\n'),
    );
    // The wait gemini-cli's runtime has: the replay's lines come 60 and 120 ms after the load's reply.
    const late = rig.engineWith(
      { idleTimeoutMs: 100, demoAgentArgv: [process.execPath, script], demoReplayQuietMs: 250 },
      false,
    );
    try {
      const agent = await rig.demoAgent('late-replay');
      const created = await late.create(accountId, { agentId: agent.id, prompt: 'first words' });
      assert.ok(created.ok, JSON.stringify(created));
      const id = created.value.id;
      const t1 = await waitForStage(db, id, 'turn', 'done');
      const parkAndPrompt = async (prompt: string) => {
        const from = (await allEvents(db, id)).at(-1)!.id;
        await until(async () => (await late.sweep()) > 0 || null, 'the sweep to park the sandbox');
        await waitForStage(db, id, 'sandbox', 'done', from);
        const mark = (await allEvents(db, id)).at(-1)!.id;
        assert.ok((await late.prompt(accountId, id, prompt)).ok);
        return waitForStage(db, id, 'turn', 'done', mark);
      };
      const t2 = await parkAndPrompt('second words');
      const events = await allEvents(db, id);
      assert.ok(!events.some((e) => e.data.includes('replayed:')), 'nothing of the replay was stored');
      assert.equal(answerText(events, t2.turnId!), 'got: second words');
      assert.equal(answerText(events, t1.turnId!), 'got: first words');

      writeFileSync(failFlag, '');
      const t3 = await parkAndPrompt('third words');
      const after = await allEvents(db, id);
      const reset = after.find((e) => e.stage === 'session' && e.state === 'done');
      assert.ok(reset, 'the lost session is said in the conversation');
      const data = JSON.parse(reset.data) as Record<string, string>;
      assert.equal(data.event, 'reset');
      assert.equal(data.history, 'carried_over');
      assert.match(data.error ?? '', /No previous sessions found/);
      assert.match(data.detail ?? '', /could not load its previous session/);
      const third = answerText(after, t3.turnId!);
      assert.match(
        third,
        /^got: <fountain-history>[\s\S]*User: first words\s+Agent: got: first words[\s\S]*User: second words/,
      );
      assert.match(third, / \| third words$/, 'the new prompt follows the carried history');
      assert.ok((await late.terminate(accountId, id)).ok);
    } finally {
      await late.stop();
    }
  });

  it('fails a turn whose agent goes silent (a real agent process that never answers session/prompt)', async () => {
    // A dependency-free NDJSON agent: it answers initialize and session/new, then ignores every prompt,
    // as an adapter stuck retrying an unreachable model API does.
    const script = ndjsonAgent('silent-agent.mjs', 'silent-1', []);
    const silent = rig.engineWith(
      { idleTimeoutMs: 0, turnSilenceTimeoutMs: 300, demoAgentArgv: [process.execPath, script] },
      false,
    );
    try {
      const agent = await rig.demoAgent('silent');
      const created = await silent.create(accountId, { agentId: agent.id, prompt: 'hello?' });
      assert.ok(created.ok, JSON.stringify(created));
      const id = created.value.id;
      const failed = await waitForStage(db, id, 'turn', 'failed');
      assert.match(
        JSON.parse(failed.data).reason,
        /the agent sent nothing for \d+ s with no tool call running; the turn was abandoned/,
      );
      const [turn] = await listTurns(db, id);
      assert.equal(turn?.status, 'failed');
      const after = await silent.get(accountId, id);
      assert.equal(after.ok && after.value.status, 'idle');
      assert.ok((await silent.terminate(accountId, id)).ok);
    } finally {
      await silent.stop();
    }
  });

  it('stores and shows agent output holding NUL bytes instead of dropping it (issue 22 #7)', async () => {
    // An NDJSON agent that answers its prompt with a NUL in an ACP text and on stderr.
    const script = ndjsonAgent('nul-agent.mjs', 'nul-1', [
      'process.stderr.write("stderr\\u0000byte\\n");',
      'send({ jsonrpc: "2.0", method: "session/update", params: { sessionId: "nul-1", update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "before\\u0000after" } } } });',
      'setTimeout(() => send({ jsonrpc: "2.0", id: m.id, result: { stopReason: "end_turn" } }), 100);',
    ]);
    const nul = rig.engineWith({ idleTimeoutMs: 0, demoAgentArgv: [process.execPath, script] }, false);
    try {
      const agent = await rig.demoAgent('nul');
      const created = await nul.create(accountId, { agentId: agent.id, prompt: 'hello' });
      assert.ok(created.ok, JSON.stringify(created));
      const done = await waitForStage(db, created.value.id, 'turn', 'done');
      await until(
        async () => (await allEvents(db, created.value.id)).some((e) => e.stream === 'stderr') || null,
        'the stderr chunk stored',
      );
      const events = await allEvents(db, created.value.id);
      assert.equal(answerText(events, done.turnId!), 'before\u0000after');
      const stderr = events
        .filter((e) => e.stream === 'stderr')
        .map((e) => e.data)
        .join('');
      assert.match(stderr, /stderr\\u0000byte/, 'stored, escaped, once');
      assert.ok((await nul.terminate(accountId, created.value.id)).ok);
    } finally {
      await nul.stop();
    }
  });

  it("caps a runner's long error detail in failure_reason and the stage event; the whole text goes to the log (issue 22 #10)", async () => {
    // A runner that answers write_file with a 100 KB detail, as a hostile or broken daemon may.
    const detail = `disk says: ${'x'.repeat(100_000)}`;
    const hostile = (real: RunnerAdapter): SandboxAdapter =>
      new Proxy(real, {
        get(target, prop, receiver) {
          if (prop === 'files')
            return {
              writeFile: async () => ({ ok: false as const, error: { code: 'write_failed' as const, detail } }),
            };
          const v: unknown = Reflect.get(target, prop, receiver);
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
    const broken = rig.engineWith({ idleTimeoutMs: 0 }, true, hostile);
    try {
      const agent = await rig.demoAgent('broken');
      const created = await broken.create(accountId, { agentId: agent.id, prompt: 'hello' });
      assert.ok(created.ok, JSON.stringify(created));
      const failed = await waitForStage(db, created.value.id, 'provision', 'failed');
      const conv = await broken.get(accountId, created.value.id);
      assert.ok(conv.ok);
      const reason = conv.value.failure_reason ?? '';
      assert.match(reason, /disk says: x+/);
      assert.ok(reason.length <= 1100, `failure_reason is ${reason.length} characters`);
      assert.match(reason, /\(\d+ more characters in the server log\)$/);
      assert.ok(JSON.parse(failed.data).reason.length <= 1100, 'the stage event is capped too');
      const [turn] = await listTurns(db, created.value.id);
      assert.ok((turn?.reason ?? '').length <= 1200, 'and the turn reason');
    } finally {
      await broken.stop();
    }
  });
});
