/**
 * A token budget stopping a real Claude Code in the middle of its work: the gateway admits calls until
 * the conversation's budget is spent, refuses the first call past it, and the turn ends with the sentence naming the budget.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { acceptRunnerSocket } from '../../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../../src/server/start.ts';
import { call, openStream, type Json, type SseEvent, type Stream } from '../helpers/http.ts';
import { startAnthropicApi } from '../model-apis/anthropic.ts';
import { AGENT_CACHE_ARGS, NPM_CACHE } from './harness.ts';

/** The local model API reports 120 input and 12 output tokens a call: the first call spends this budget. */
const BUDGET = 100;
const SENTENCE = new RegExp(
  `Fountain gateway: the agent's token budget tokens_per_conversation = ${BUDGET} is spent \\((\\d+) tokens used this conversation\\)`,
);
const GENERATING = /\/v1\/messages$/;

/** One prompt to its end, each permission allowed once through the API; the turn as the API reports it. */
async function turn(
  http: (method: string, path: string, body?: unknown) => Promise<{ status: number; body: Json }>,
  s: Stream,
  convId: string,
  prompt: string,
): Promise<Json> {
  const from = s.events.reduce((m, e) => Math.max(m, e.id ?? 0), 0);
  const p = await http('POST', `/api/conversations/${convId}/prompts`, { prompt });
  assert.equal(p.status, 200, JSON.stringify(p.body));
  const turnId: string = p.body.turn_id;
  let after = from;
  for (;;) {
    const e: SseEvent = await until(
      () =>
        s.events.find(
          (x) =>
            (x.id ?? 0) > after &&
            ((x.data?.stage === 'permission' && x.data?.state === 'started') ||
              (x.data?.stage === 'turn' && ['done', 'failed'].includes(x.data?.state) && x.data?.turn_id === turnId)),
        ),
      `a permission request or the end of the turn "${prompt}"`,
      300_000,
    );
    after = e.id ?? after;
    if (e.data.stage === 'turn') break;
    const req = typeof e.data.data === 'string' ? JSON.parse(e.data.data) : e.data.data;
    const allow = (req.options as Json[]).find((o) => String(o.kind).startsWith('allow'));
    const yes = await http('POST', `/api/conversations/${convId}/requests/${req.request_id}`, {
      option_id: allow.option_id,
    });
    assert.equal(yes.status, 200, JSON.stringify(yes.body));
  }
  const turns = (await http('GET', `/api/conversations/${convId}/turns`)).body.data as Json[];
  return turns.find((t) => t.id === turnId);
}

describe('claude: a token budget stops a real conversation', { timeout: 600_000 }, () => {
  it("refuses the first model call past the budget and ends the turn with the budget's sentence", async () => {
    const key = `sk-ant-api03-${randomBytes(20).toString('hex')}`;
    const api = await startAnthropicApi(key);
    const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-real-budget-')));
    mkdirSync(NPM_CACHE, { recursive: true });
    let srv: RunningServer | null = null;
    let runner: RunnerChild | null = null;
    let s: Stream | null = null;
    try {
      srv = await startServer({
        dataDir: join(tmp, 'data'),
        port: 0,
        env: {},
        acceptRunnerSocket,
        logger: pino({ level: 'info' }, pino.destination({ dest: join(tmp, 'server.log'), sync: true })),
        engine: { acpCallTimeoutMs: 120_000, turnSilenceTimeoutMs: 180_000, askTimeoutMs: 240_000 },
      });
      const bootKey = srv.bootstrapKey!;
      const http = (method: string, path: string, body?: unknown) => call(srv!.url, bootKey, method, path, body);
      runner = startRunnerChild({
        name: 'budget',
        root: join(tmp, 'sandboxes'),
        baseUrl: srv.url,
        apiKey: bootKey,
        home: tmp,
        extraArgs: [...AGENT_CACHE_ARGS],
      });
      await until(
        async () => ((await http('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
        'the runner to come online',
        60_000,
      );
      const put = await http('PUT', '/api/account/inference-credentials/anthropic_api_key', {
        value: key,
        base_url: api.url,
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const agent = await http('POST', '/api/agents', {
        name: 'real-claude-budget',
        runtime: 'claude',
        model: 'anthropic/claude-sonnet-4-5',
        permission_policy: { default: 'ask' },
        model_limits: { tokens_per_conversation: BUDGET },
      });
      assert.equal(agent.status, 201, JSON.stringify(agent.body));
      const created = await http('POST', '/api/conversations', { agent_id: agent.body.data.id });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const convId: string = created.body.data.id;
      s = openStream(`${srv.url}/api/conversations/${convId}/stream`, bootKey);
      const provisioned = await until(
        () => s!.events.find((x) => x.data?.stage === 'provision' && ['done', 'failed'].includes(x.data?.state)),
        'provisioning to end',
        300_000,
      );
      assert.equal(provisioned.data.state, 'done', JSON.stringify(provisioned.data.data));

      // The shell command asks the model twice (the tool call, then the answer after its output): the
      // first call spends the budget, so the turn is stopped at the second.
      const mark = `budget-${randomBytes(4).toString('hex')}`;
      const first = await turn(http, s, convId, `RUN: echo ${mark}`);
      const sentence = SENTENCE.exec(String(first?.reason ?? ''));
      assert.equal(first?.status, 'failed', JSON.stringify(first));
      assert.ok(sentence, `the turn ends with the budget's sentence: ${JSON.stringify(first)}`);
      const asked = () => api.asked.filter((a) => a.authorized && GENERATING.test(a.path));
      const answeredBefore = asked().length;

      // What the gateway recorded: the calls it forwarded until the budget was spent, then refusals only.
      const calls = (
        (await http('GET', `/api/usage/calls?conversation_id=${convId}&limit=1000`)).body.data as Json[]
      ).sort((a, b) => String(a.created_at).localeCompare(String(b.created_at)));
      const tokens = (x: Json) => x.input_tokens + x.output_tokens + x.cache_read_tokens + x.cache_write_tokens;
      const forwarded = calls.filter((x) => x.refused === null && x.endpoint === 'messages');
      const refused = calls.filter((x) => x.refused !== null);
      assert.ok(refused.length > 0, JSON.stringify(calls));
      assert.ok(
        refused.every((x) => x.refused === 'agent.tokens_per_conversation' && x.status === 403),
        JSON.stringify(refused),
      );
      const used = forwarded.reduce((n, x) => n + tokens(x), 0);
      assert.equal(Number(sentence[1]), used, 'the sentence names what the forwarded calls used');
      // Stopped at the first call past the budget: every forwarded call but the last started under it.
      assert.ok(used >= BUDGET, `${used} tokens used`);
      assert.ok(used - tokens(forwarded.at(-1)) < BUDGET, `the call before the last was under the budget: ${used}`);
      const firstRefusal = Date.parse(refused[0].created_at);
      assert.ok(
        forwarded.every((x) => Date.parse(x.created_at) <= firstRefusal),
        `no call was forwarded after the first refusal: ${JSON.stringify(calls)}`,
      );
      // The model API answered exactly the calls the gateway forwarded, and was asked nothing once the budget was spent.
      assert.equal(answeredBefore, forwarded.length, JSON.stringify({ asked: api.asked, calls }));

      // The next turn is refused at its first call, with the same sentence; the model API is not asked.
      const second = await turn(http, s, convId, `RUN: echo ${mark}-again`);
      assert.equal(second?.status, 'failed', JSON.stringify(second));
      assert.match(String(second?.reason), SENTENCE);
      assert.equal(asked().length, answeredBefore, 'no model call went out past the budget');
    } finally {
      s?.close();
      await runner?.stop();
      await srv?.stop();
      await api.close();
      if (process.env.FOUNTAIN_KEEP_REAL_AGENT_TMP) console.error(`kept ${tmp}`);
      else rmSync(tmp, { recursive: true, force: true });
    }
  });
});
