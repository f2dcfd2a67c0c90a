/**
 * A runner link cut while a turn's prompt is being written to the agent's stdin: the real server, a real
 * `fountain runner` child dialing through a loopback proxy that cuts at that very frame, and the demo agent.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { slowAnswer } from '../src/acp/demo/agent.ts';
import { allEvents, answerText, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import type { EventRow } from '../src/server/store/conversation-schema.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { call } from './helpers/http.ts';
import { type CutProxy, assertStoredOnce, type StdinCut, runnerBehindProxy } from './helpers/recovery.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a runner link cut during the prompt write', { timeout: 300_000 }, () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let proxy: CutProxy;
  let agentId: string;

  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  const events = (convId: string): Promise<EventRow[]> => allEvents(srv.database.db as unknown as EngineDb, convId);
  const data = (e: EventRow): Json => JSON.parse(e.data);
  const runnerOnline = async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online);
  /** The turn's end, whichever way it ended. */
  const ended = (convId: string, turnId: string) =>
    until(
      async () =>
        (await events(convId)).find(
          (e) => e.stage === 'turn' && (e.state === 'done' || e.state === 'failed') && data(e).turn_id === turnId,
        ),
      `turn ${turnId} to end`,
      120_000,
    );

  async function prompt(convId: string, text: string): Promise<string> {
    const r = await api('POST', `/api/conversations/${convId}/prompts`, { prompt: text });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.turn_id as string;
  }

  /** What the demo agent wrote to its memory file: one line per `remember:` it received. */
  function memories(): string[] {
    const root = join(tmp, 'sandboxes');
    const lines: string[] = [];
    for (const dir of readdirSync(root)) {
      try {
        lines.push(...readFileSync(join(root, dir, '.fountain-demo', 'memory.txt'), 'utf8').split('\n'));
      } catch {
        // not a sandbox that remembered anything
      }
    }
    return lines.filter((l) => l !== '');
  }

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-prompt-cut-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      engine: { recoveryWindowMs: 60_000, recoveryRetryMs: 100, idleTimeoutMs: 0 },
    });
    key = srv.bootstrapKey!;
    ({ proxy, runner } = await runnerBehindProxy(srv.port, key, tmp));
    await until(runnerOnline, 'the runner to come online', 60_000);
    const agent = await api('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    agentId = agent.body.data.id;
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    await proxy?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** Whether the agent's output, journaled by the daemon, holds `text` (what it wrote while the link was muted). */
  function journaled(text: string): boolean {
    const dir = join(tmp, 'sandboxes', '.fountain-journals');
    const walk = (d: string): boolean =>
      readdirSync(d, { withFileTypes: true }).some((e) =>
        e.isDirectory() ? walk(join(d, e.name)) : readFileSync(join(d, e.name)).includes(text),
      );
    return walk(dir);
  }

  async function conversation(): Promise<string> {
    await until(runnerOnline, 'the runner online');
    const created = await api('POST', '/api/conversations', { agent_id: agentId, prompt: 'hello' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const convId = created.body.data.id as string;
    await until(
      async () => (await events(convId)).find((e) => e.stage === 'turn' && e.state === 'done'),
      'the first turn to end',
    );
    return convId;
  }

  /** The turn ended done after waiting for its runner, every line of it stored once. */
  async function completedAfterRecovery(convId: string, turnId: string): Promise<EventRow[]> {
    const end = await ended(convId, turnId);
    assert.equal(end.state, 'done', `the turn failed: ${end.data}`);
    const all = await events(convId);
    const lost = all.find((e) => e.stage === 'connection' && e.state === 'started' && data(e).turn_id === turnId);
    assert.ok(lost, 'the turn waited for its runner');
    assertStoredOnce(all, turnId);
    return all;
  }

  const cases: readonly { where: StdinCut; what: string }[] = [
    { where: 'before', what: 'the frame never reached the daemon: the prompt is written after the reconnect' },
    { where: 'after', what: 'the agent answered while the link was down: the replay carries the reply' },
  ];
  for (const { where, what } of cases) {
    it(`cut ${where} the prompt's stdin frame (${what}): the turn completes, the agent saw the prompt once`, async () => {
      const convId = await conversation();
      const token = `cut-${where}-${Date.now()}`;
      const sprung = proxy.trapStdin(where);
      const turnId = await prompt(convId, `remember: ${token}`);
      await sprung;
      if (where === 'after') {
        // The daemon wrote the prompt and the agent acted on it; only the acknowledgement is lost.
        await until(() => memories().includes(token), 'the agent to act on the prompt');
        proxy.sever();
      }
      proxy.restore();

      const all = await completedAfterRecovery(convId, turnId);
      assert.equal(answerText(all, turnId), `I will remember that: ${token}`);
      assert.deepEqual(
        memories().filter((m) => m === token),
        [token],
        'the agent received the prompt exactly once',
      );
      // The same agent process goes on: its memory holds the prompt once.
      const next = await prompt(convId, 'recall');
      const recalled = await ended(convId, next);
      assert.equal(recalled.state, 'done', recalled.data);
      const text = answerText(await events(convId), next);
      assert.equal(text.split('\n').filter((l) => l === `- ${token}`).length, 1, text);
    });
  }

  it('cut after the prompt reached the daemon, the agent still answering: the prompt written again is dropped as a repeat', async () => {
    const convId = await conversation();
    const sprung = proxy.trapStdin('after');
    const turnId = await prompt(convId, 'slow: 20 100ms');
    await sprung;
    // The agent has the prompt and has begun its answer, which nobody hears until the reattach.
    await until(() => journaled('slow chunk 1 of 20'), 'the agent to begin its answer');
    proxy.sever();
    proxy.restore();
    const all = await completedAfterRecovery(convId, turnId);
    // A second delivery would have started the answer again (or answered twice).
    assert.equal(answerText(all, turnId), slowAnswer(20).join(''));
    const replies = all.filter((e) => e.turnId === turnId && e.stream === 'acp' && /"stopReason"/.test(e.data));
    assert.equal(replies.length, 1, 'one reply');
  });
});
