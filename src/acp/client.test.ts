import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, realpath } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { slowAnswer, slowLineStamp, wallClockMs } from './demo/agent.ts';
import { answerText, startDemoAgent, type DemoProcess } from './testing/demo-process.ts';

async function until(check: () => boolean): Promise<void> {
  // A hang guard only; the test fails by timeout, never by a measured duration.
  for (let i = 0; !check(); i++) {
    if (i > 2000) assert.fail('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const dirs: string[] = [];
const tempDir = async (label: string): Promise<string> => {
  const d = await realpath(await mkdtemp(join(tmpdir(), `fountain-acp-${label}-`)));
  dirs.push(d);
  return d;
};
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const unwrap = <T>(r: { ok: true; value: T } | { ok: false; error: { code: string; message: string } }): T => {
  if (!r.ok) assert.fail(`${r.error.code}: ${r.error.message}`);
  return r.value;
};

/** Starts the demo agent, initializes and opens a session. */
async function started(home: string, cwd: string, via?: 'main' | 'cli'): Promise<DemoProcess & { sessionId: string }> {
  const p = startDemoAgent({ home, cwd, via });
  const init = unwrap(await p.client.initialize());
  assert.equal(init.protocolVersion, 1);
  assert.equal(init.agentCapabilities?.loadSession, true);
  const s = unwrap(await p.client.newSession({ cwd }));
  return Object.assign(p, { sessionId: s.sessionId });
}

async function turn(p: DemoProcess, text: string) {
  const h = unwrap(p.client.prompt(text));
  unwrap(await h.sent);
  return h;
}

describe('AcpClient against one demo agent process (real child process over stdio)', { timeout: 60_000 }, () => {
  // One process for these tests (a spawn costs about a second of CPU); each test opens its own session.
  let p: DemoProcess & { sessionId: string };
  let home: string;
  before(async () => {
    home = await tempDir('home');
    p = await started(home, home);
  });
  after(async () => {
    await p.stop();
  });
  const session = async (cwd: string): Promise<{ permissions: number; notifications: number }> => {
    unwrap(await p.client.newSession({ cwd }));
    return { permissions: p.rec.permissions.length, notifications: p.rec.notifications.length };
  };

  it('initializes, opens a session and streams a turn in several chunks, ending end_turn', async () => {
    {
      assert.equal(p.client.sessionId, p.sessionId);
      const from = p.rec.notifications.length;
      const h = await turn(p, 'hello there');
      const done = unwrap(await h.done);
      assert.equal(done.stopReason, 'end_turn');
      const turnUpdates = p.rec.notifications.slice(from);
      const chunks = turnUpdates.filter(({ n }) => n.update.sessionUpdate === 'agent_message_chunk');
      assert.ok(chunks.length >= 3, `expected several chunks, got ${chunks.length}`);
      assert.match(answerText(p.rec, from), /^You said: hello there\nI am the Fountain demo agent\./);
      assert.equal(turnUpdates[0]?.n.update.sessionUpdate, 'agent_thought_chunk');
      assert.ok(turnUpdates.every(({ ctx }) => ctx.during === 'session/prompt'));
      // Verbatim: the raw lines handed to onMessage are exactly the agent's stdout, line by line.
      assert.equal(p.rec.messages.map((m) => `${m.raw}\n`).join(''), Buffer.concat(p.journal).toString('utf8'));
      assert.deepEqual(
        p.rec.messages.map((m) => m.ctx.seq),
        p.rec.messages.map((_, i) => i),
      );
      assert.deepEqual(p.rec.problems, []);
      assert.equal(p.client.nextRequestId, 3);
    }
  });

  it('asks permission before running a command; allowed, it runs in its cwd and reports the output', async () => {
    const cwd = await tempDir('cwd');
    const at = await session(cwd);
    {
      const h = await turn(p, 'run: echo from-the-sandbox && pwd');
      const req = await p.rec.nextPermission(at.permissions);
      assert.deepEqual(
        req.params.options.map((o) => o.kind),
        ['allow_once', 'reject_once'],
      );
      assert.equal(req.params.toolCall.kind, 'execute');
      assert.deepEqual(
        p.client.heldPermissions.map((x) => x.id),
        [req.id],
      );
      unwrap(await p.client.answerPermission(req.id, { outcome: 'selected', optionId: 'allow_once' }));
      const second = await p.client.answerPermission(req.id, { outcome: 'selected', optionId: 'allow_once' });
      assert.equal(second.ok ? 'ok' : second.error.code, 'acp_unknown_request');
      const reply = unwrap(await h.done);
      assert.equal(reply.stopReason, 'end_turn');
      // The reply's usage (ACP draft `Usage`) survives the stable schema, which would drop it.
      assert.deepEqual(reply.usage, {
        inputTokens: 5,
        outputTokens: 15,
        cachedReadTokens: 0,
        cachedWriteTokens: 0,
        totalTokens: 20,
      });
      const statuses = p.rec.notifications
        .slice(at.notifications)
        .flatMap(({ n }) =>
          n.update.sessionUpdate === 'tool_call' || n.update.sessionUpdate === 'tool_call_update'
            ? [n.update.status]
            : [],
        );
      assert.deepEqual(statuses, ['pending', 'in_progress', 'completed']);
      const mine = p.rec.notifications.slice(at.notifications).map(({ n }) => n.update.sessionUpdate);
      // The answer streams after the tool call is done; the session's title and usage follow it.
      assert.equal(mine[mine.indexOf('agent_message_chunk') - 1], 'tool_call_update');
      assert.deepEqual(
        mine.slice(mine.indexOf('agent_message_chunk')).filter((u) => u !== 'agent_message_chunk'),
        ['session_info_update', 'usage_update'],
      );
      assert.match(
        answerText(p.rec, at.notifications),
        new RegExp(`exited with code 0\\. Its output:\\nfrom-the-sandbox\\n${cwd}$`),
      );
    }
  });

  it('does not run the command when permission is rejected', async () => {
    const cwd = await tempDir('cwd');
    const at = await session(cwd);
    {
      const h = await turn(p, 'run: touch marker');
      const req = await p.rec.nextPermission(at.permissions);
      unwrap(await p.client.answerPermission(req.id, { outcome: 'selected', optionId: 'reject_once' }));
      assert.equal(unwrap(await h.done).stopReason, 'end_turn');
      assert.match(answerText(p.rec, at.notifications), /You did not allow it, so I did not run `touch marker`\./);
      assert.equal(existsSync(join(cwd, 'marker')), false);
    }
  });

  it('cancel while a permission request is held: the request is answered cancelled and the turn stops cancelled', async () => {
    const cwd = await tempDir('cwd');
    const at = await session(cwd);
    {
      const h = await turn(p, 'run: touch marker');
      const req = await p.rec.nextPermission(at.permissions);
      const c = unwrap(await p.client.cancel());
      assert.deepEqual(c.cancelledPermissions, [req.id]);
      assert.equal(unwrap(await h.done).stopReason, 'cancelled');
      assert.equal(existsSync(join(cwd, 'marker')), false);
      // The conversation goes on after a cancelled turn.
      const next = await turn(p, 'still there?');
      assert.equal(unwrap(await next.done).stopReason, 'end_turn');
    }
  });

  it('cancel while an allowed command runs: the command is killed and the turn stops cancelled', async () => {
    const cwd = await tempDir('cwd');
    const at = await session(cwd);
    {
      const h = await turn(p, 'run: sleep 30; touch marker');
      const req = await p.rec.nextPermission(at.permissions);
      unwrap(await p.client.answerPermission(req.id, { outcome: 'selected', optionId: 'allow_once' }));
      await p.rec.waitForUpdate(
        (n) =>
          n.sessionId === p.client.sessionId &&
          n.update.sessionUpdate === 'tool_call_update' &&
          n.update.status === 'in_progress',
      );
      const c = unwrap(await p.client.cancel());
      assert.deepEqual(c.cancelledPermissions, []);
      assert.equal(unwrap(await h.done).stopReason, 'cancelled');
      const last = p.rec.notifications
        .slice(at.notifications)
        .map(({ n }) => n.update)
        .filter((u) => u.sessionUpdate === 'tool_call_update')
        .at(-1);
      assert.deepEqual(
        last && 'rawOutput' in last ? [last.status, (last.rawOutput as { exitCode: unknown }).exitCode] : null,
        ['failed', null],
        'killed, not finished',
      );
      assert.equal(existsSync(join(cwd, 'marker')), false);
    }
  });

  it('slow: n streams n numbered lines, one chunk each; cancel stops it midway', async () => {
    await session(await tempDir('slow'));
    const from = p.rec.notifications.length;
    const h = await turn(p, 'slow: 5 10ms');
    assert.equal(unwrap(await h.done).stopReason, 'end_turn');
    const chunks = p.rec.notifications.slice(from).filter(({ n }) => n.update.sessionUpdate === 'agent_message_chunk');
    assert.deepEqual(
      chunks.map(({ n }) =>
        n.update.sessionUpdate === 'agent_message_chunk' && n.update.content.type === 'text'
          ? n.update.content.text
          : '',
      ),
      slowAnswer(5),
    );
    const long = await turn(p, 'slow: 1000 20ms');
    const mark = p.rec.notifications.length;
    await until(() => p.rec.notifications.length > mark + 2);
    unwrap(await p.client.cancel());
    assert.equal(unwrap(await long.done).stopReason, 'cancelled');
    assert.ok(p.rec.notifications.length - mark < 1000);
  });

  it('slow: n stamped carries the wall-clock time each line was written', async () => {
    await session(await tempDir('stamped'));
    const from = p.rec.notifications.length;
    const before = wallClockMs();
    const h = await turn(p, 'slow: 3 5ms stamped');
    assert.equal(unwrap(await h.done).stopReason, 'end_turn');
    const after = wallClockMs();
    const texts = p.rec.notifications
      .slice(from)
      .map(({ n }) =>
        n.update.sessionUpdate === 'agent_message_chunk' && n.update.content.type === 'text'
          ? n.update.content.text
          : null,
      )
      .filter((t): t is string => t !== null);
    assert.deepEqual(
      texts.map((t) => t.replace(/ at \d+\.\d{3}\n$/, '\n')),
      slowAnswer(3),
    );
    const stamps = texts.map(slowLineStamp);
    for (const [i, at] of stamps.entries()) {
      assert.ok(
        at !== null && at >= before && at <= after,
        `line ${i + 1} stamped ${at}, turn ran ${before}..${after}`,
      );
      if (i > 0) assert.ok(at >= stamps[i - 1]!, 'stamps never go back');
    }
    assert.equal(slowLineStamp(slowAnswer(1)[0]!), null);
  });

  it('remembers nothing with a fresh HOME', async () => {
    const at = await session(home);
    unwrap(await (await turn(p, 'recall')).done);
    assert.equal(answerText(p.rec, at.notifications), 'I remember nothing.');
  });
});

describe('AcpClient against several demo agent processes', { timeout: 60_000 }, () => {
  it('remembers across two agent processes sharing a HOME', async () => {
    const home = await tempDir('home');
    const a = await started(home, home);
    try {
      const h = await turn(a, 'remember: the build password is swordfish');
      assert.equal(unwrap(await h.done).stopReason, 'end_turn');
      assert.equal(answerText(a.rec), 'I will remember that: the build password is swordfish');
    } finally {
      await a.stop();
    }
    const b = await started(home, home);
    try {
      const h = await turn(b, 'What do you remember?');
      unwrap(await h.done);
      assert.equal(answerText(b.rec), 'I remember:\n- the build password is swordfish');
    } finally {
      await b.stop();
    }
  });

  it('session/load in a new process replays the history before its reply, then the session takes prompts', async () => {
    const home = await tempDir('home');
    const a = await started(home, home);
    try {
      unwrap(await (await turn(a, 'remember: blue')).done);
      unwrap(await (await turn(a, 'hello')).done);
    } finally {
      await a.stop();
    }
    const b = startDemoAgent({ home, cwd: home });
    try {
      unwrap(await b.client.initialize());
      const missing = await b.client.loadSession({ sessionId: 'no-such-session', cwd: home });
      assert.equal(missing.ok ? 'ok' : missing.error.code, 'acp_rpc_error');
      assert.equal(missing.ok ? 0 : missing.error.rpc?.code, -32002);
      unwrap(await b.client.loadSession({ sessionId: a.sessionId, cwd: home }));
      const replay = b.rec.notifications.filter(({ ctx }) => ctx.during === 'session/load');
      const texts = replay.map(({ n }) => {
        const u = n.update;
        const text =
          (u.sessionUpdate === 'user_message_chunk' || u.sessionUpdate === 'agent_message_chunk') &&
          u.content.type === 'text'
            ? u.content.text
            : '';
        return `${u.sessionUpdate}:${text}`;
      });
      assert.deepEqual(texts, [
        'user_message_chunk:remember: blue',
        'agent_message_chunk:I will remember that: blue',
        'user_message_chunk:hello',
        `agent_message_chunk:You said: hello\nI am the Fountain demo agent. I have no model; try \`run: <command>\`, \`remember: <text>\` or \`recall\`.`,
      ]);
      assert.equal(b.client.sessionId, a.sessionId);
      const from = b.rec.notifications.length;
      unwrap(await (await turn(b, 'recall')).done);
      assert.equal(answerText(b.rec, from), 'I remember:\n- blue');
    } finally {
      await b.stop();
    }
  });

  it('kills the commands it started (their own process group) when it is stopped with SIGTERM', async () => {
    const home = await tempDir('home');
    const cwd = await tempDir('cwd');
    const p = await started(home, cwd);
    const pidFile = join(cwd, 'pid');
    await turn(p, 'run: echo $$ > pid; sleep 60');
    const req = await p.rec.nextPermission();
    unwrap(await p.client.answerPermission(req.id, { outcome: 'selected', optionId: 'allow_once' }));
    const alive = (pid: number): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const until = async (cond: () => boolean): Promise<void> => {
      while (!cond()) await new Promise((r) => setTimeout(r, 20));
    };
    await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim() !== '');
    const group = Number(readFileSync(pidFile, 'utf8').trim());
    assert.ok(alive(-group));
    p.child.kill('SIGTERM');
    assert.equal(await p.exited, 143);
    await until(() => !alive(-group));
  });

  it('runs as `fountain demo-agent`, refuses overlapping requests, and fails a waiting request when stdout ends', async () => {
    const home = await tempDir('home');
    const p = await started(home, home, 'cli');
    const h = await turn(p, 'run: true');
    await p.rec.nextPermission();
    const busy = await p.client.newSession({ cwd: home });
    assert.equal(busy.ok ? 'ok' : busy.error.code, 'acp_busy');
    await p.stop();
    const r = await h.done;
    assert.equal(r.ok ? 'ok' : r.error.code, 'acp_closed');
    assert.equal(p.client.closed, true);
    assert.deepEqual(p.client.heldPermissions, []);
  });
});
