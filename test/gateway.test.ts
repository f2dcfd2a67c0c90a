/**
 * The model gateway with the real server and the local model-API servers: each vendor's calls pass
 * through with the sandbox token swapped for the real key, usage is recorded per call, and the allow-list and budgets refuse in the vendor's shape.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { FOUNTAIN_BIN } from '../src/server/conversations/testing.ts';
import { until } from '../src/server/conversations/testing.ts';
import { insertConversation } from '../src/server/conversations/store.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { and, eq } from 'drizzle-orm';
import { modelCalls } from '../src/server/gateway/store.ts';
import { modelUsageTotals } from '../src/server/gateway/totals.ts';
import { startAnthropicApi } from './model-apis/anthropic.ts';
import { startGeminiApi } from './model-apis/gemini.ts';
import { startOpenAiApi } from './model-apis/openai.ts';
import type { ModelApiServer } from './model-apis/server.ts';
import { call, type Json } from './helpers/http.ts';

const RUN = 'RUN: echo gateway-proof';
const run = async (file: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> =>
  (await promisify(execFile)(file, args, { env })).stdout;

describe('the model gateway', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let anthropic: ModelApiServer;
  let openai: ModelApiServer;
  let gemini: ModelApiServer;
  const keys = {
    anthropic: `sk-ant-api03-${randomBytes(20).toString('hex')}`,
    openai: `sk-proj-${randomBytes(20).toString('hex')}`,
    gemini: `AIza${randomBytes(18).toString('hex')}`,
  };
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const db = () => srv.database.db as unknown as EngineDb;
  const gw = (vendor: string, path: string) => `${srv.url}/api/gateway/${vendor}${path}`;

  /** An agent (through the API) and a conversation of it with a live sandbox token. */
  async function conversation(
    runtime: 'claude' | 'codex' | 'gemini' | 'opencode',
    model: string,
    limits: Json = {},
  ): Promise<{ agentId: string; convId: string; token: string }> {
    const a = await api('POST', '/api/agents', {
      name: `gw-${runtime}-${randomBytes(3).toString('hex')}`,
      runtime,
      model,
      model_limits: limits,
    });
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal(a.body.data.credential_delivery, 'gateway', 'gateway delivery is the default');
    const accountId: string = (await api('GET', '/api/account')).body.data.id;
    const row = await insertConversation(
      db(),
      { accountId, agentId: a.body.data.id, runtime, status: 'idle' },
      { provider: 'runner', name: `runner-${randomBytes(16).toString('hex')}-${randomBytes(4).toString('hex')}` },
    );
    const token = await srv.engine.sandboxTokens.rotate(accountId, row.conversation.id);
    return { agentId: a.body.data.id, convId: row.conversation.id, token };
  }

  const calls = async (convId: string, n: number): Promise<Json[]> =>
    until(
      async () => {
        const r = await api('GET', `/api/usage/calls?conversation_id=${convId}`);
        return (r.body.data as Json[]).length >= n ? (r.body.data as Json[]) : null;
      },
      `${n} recorded call(s)`,
      10_000,
    );

  const anthropicBody = (model: string, stream: boolean) => ({
    model,
    max_tokens: 100,
    stream,
    messages: [{ role: 'user', content: RUN }],
    tools: [{ name: 'Bash', input_schema: { type: 'object' } }],
  });

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fountain-gateway-'));
    [anthropic, openai, gemini] = await Promise.all([
      startAnthropicApi(keys.anthropic),
      startOpenAiApi(keys.openai),
      startGeminiApi(keys.gemini),
    ]);
    // E2B enabled (never called): a hosted provider whose sandboxes cannot reach the gateway without PUBLIC_URL.
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { E2B_API_KEY: `e2b_${randomBytes(20).toString('hex')}` },
    });
    key = srv.bootstrapKey!;
    for (const [provider, value, base] of [
      ['anthropic_api_key', keys.anthropic, anthropic.url],
      ['openai_api_key', keys.openai, `${openai.url}/v1`],
      ['gemini_api_key', keys.gemini, gemini.url],
    ] as const) {
      const r = await api('PUT', `/api/account/inference-credentials/${provider}`, { value, base_url: base });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
  });

  after(async () => {
    await srv?.stop();
    await Promise.all([anthropic?.close(), openai?.close(), gemini?.close()]);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('passes an Anthropic stream through with the real key, and records its usage', async () => {
    const c = await conversation('claude', 'anthropic/claude-sonnet-4-5');
    const before = anthropic.asked.length;
    const r = await fetch(gw('anthropic', '/v1/messages'), {
      method: 'POST',
      headers: { 'x-api-key': c.token, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify(anthropicBody('claude-sonnet-4-5', true)),
    });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /text\/event-stream/);
    const text = await r.text();
    assert.match(text, /event: message_start/);
    assert.match(text, /"tool_use"/);
    assert.match(text, /echo gateway-/);
    const seen = anthropic.asked.slice(before);
    assert.deepEqual(
      seen.map((a) => [a.path, a.authorized]),
      [['/v1/messages', true]],
      'the model API got the real key',
    );
    // count_tokens and a non-streamed message pass too.
    const ct = await fetch(gw('anthropic', '/v1/messages/count_tokens'), {
      method: 'POST',
      headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-sonnet-4-5', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.deepEqual(await ct.json(), { input_tokens: 42 });
    const plain = await fetch(gw('anthropic', '/v1/messages'), {
      method: 'POST',
      headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
      body: JSON.stringify(anthropicBody('claude-sonnet-4-5', false)),
    });
    assert.equal((await plain.json()).type, 'message');
    const rows = await calls(c.convId, 3);
    const byEndpoint = Object.fromEntries(rows.map((x) => [x.endpoint, x]));
    assert.equal(byEndpoint.count_tokens.input_tokens, 0);
    for (const x of rows.filter((x) => x.endpoint === 'messages')) {
      assert.equal(x.input_tokens, 120, 'what the model API reported');
      assert.equal(x.output_tokens, 12);
      assert.equal(x.status, 200);
      assert.equal(x.model, 'claude-sonnet-4-5');
      assert.equal(x.agent_id, c.agentId);
      // $3 and $15 per million tokens.
      assert.equal(x.cost_usd, (120 * 3 + 12 * 15) / 1e6);
    }
    const byConv = await api('GET', `/api/usage?by=conversation&conversation_id=${c.convId}`);
    assert.deepEqual(
      byConv.body.data.map((g: Json) => [g.key, g.calls, g.input_tokens, g.output_tokens]),
      [[c.convId, 3, 240, 24]],
    );
    // The same through `fountain usage` and `fountain usage calls --csv`.
    const cliEnv = {
      ...process.env,
      FOUNTAIN_API_KEY: key,
      FOUNTAIN_BASE_URL: srv.url,
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_HOME: tmp,
    };
    const table = await run(
      process.execPath,
      [FOUNTAIN_BIN, 'usage', '--by', 'conversation', '--conversation', c.convId],
      cliEnv,
    );
    assert.match(table, new RegExp(`${c.convId}\\s+3\\s+0\\s+240\\s+24\\s`));
    const cliCsv = await run(
      process.execPath,
      [FOUNTAIN_BIN, 'usage', 'calls', '--conversation', c.convId, '--csv'],
      cliEnv,
    );
    assert.equal(cliCsv.trim().split('\r\n').length, 4);
    const csv = await fetch(`${srv.url}/api/usage/calls?conversation_id=${c.convId}&format=csv`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const lines = (await csv.text()).trim().split('\r\n');
    assert.match(lines[0]!, /^id,created_at,conversation_id,agent_id/);
    assert.equal(lines.length, 4);
  });

  it('refuses an unknown or revoked token with the vendor-shaped 401, never reaching the model API', async () => {
    const c = await conversation('claude', 'anthropic/claude-sonnet-4-5');
    await srv.engine.sandboxTokens.revoke(c.convId);
    const before = anthropic.asked.length;
    for (const k of [c.token, `ftn_${'0'.repeat(64)}`, 'sk-ant-not-ours']) {
      const r = await fetch(gw('anthropic', '/v1/messages'), {
        method: 'POST',
        headers: { 'x-api-key': k, 'content-type': 'application/json' },
        body: JSON.stringify(anthropicBody('claude-sonnet-4-5', true)),
      });
      assert.equal(r.status, 401);
      const b = await r.json();
      assert.equal(b.type, 'error');
      assert.equal(b.error.type, 'authentication_error');
    }
    const o = await fetch(gw('openai', '/responses'), {
      method: 'POST',
      headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
      body: '{"model":"gpt-5","input":"hi"}',
    });
    assert.equal(o.status, 401);
    assert.equal((await o.json()).error.code, 'invalid_api_key');
    assert.equal(anthropic.asked.length, before, 'nothing reached the model API');
  });

  it("passes the vendor's own error through in its shape", async () => {
    const c = await conversation('claude', 'anthropic/claude-sonnet-4-5');
    const real = anthropic.key;
    anthropic.key = 'sk-ant-rotated';
    try {
      const r = await fetch(gw('anthropic', '/v1/messages'), {
        method: 'POST',
        headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
        body: JSON.stringify(anthropicBody('claude-sonnet-4-5', true)),
      });
      assert.equal(r.status, 401);
      assert.deepEqual(await r.json(), {
        type: 'error',
        error: { type: 'authentication_error', message: 'invalid x-api-key' },
      });
      assert.ok(r.headers.get('request-id'), "the vendor's headers come along");
    } finally {
      anthropic.key = real;
    }
    const [row] = await calls(c.convId, 1);
    assert.equal(row.status, 401);
  });

  it('passes OpenAI Responses and Chat Completions streams through and meters both', async () => {
    const c = await conversation('codex', 'openai/gpt-5');
    const r = await fetch(gw('openai', '/responses'), {
      method: 'POST',
      headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-5', input: RUN, stream: true, tools: [{ type: 'function', name: 'shell' }] }),
    });
    assert.equal(r.status, 200);
    assert.match(await r.text(), /response\.completed/);
    const chat = await fetch(gw('openai', '/chat/completions'), {
      method: 'POST',
      headers: { authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-5',
        stream: true,
        messages: [{ role: 'user', content: RUN }],
        tools: [{ type: 'function', function: { name: 'bash' } }],
      }),
    });
    const chatText = await chat.text();
    assert.match(chatText, /\[DONE\]/);
    assert.match(chatText, /"prompt_tokens":120/, 'the gateway asked for the usage chunk');
    const rows = await calls(c.convId, 2);
    assert.deepEqual(rows.map((x) => [x.endpoint, x.input_tokens, x.output_tokens]).sort(), [
      ['chat_completions', 120, 12],
      ['responses', 120, 12],
    ]);
    assert.ok(openai.asked.filter((a) => a.model === 'gpt-5').every((a) => a.authorized));
  });

  it('passes a Gemini stream through, the token given as ?key=', async () => {
    const c = await conversation('gemini', 'google/gemini-2.5-flash');
    const r = await fetch(
      gw('gemini', `/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=${c.token}`),
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          contents: [{ role: 'user', parts: [{ text: RUN }] }],
          tools: [{ functionDeclarations: [{ name: 'run_shell_command' }] }],
        }),
      },
    );
    assert.equal(r.status, 200);
    assert.match(await r.text(), /functionCall/);
    const [row] = await calls(c.convId, 1);
    assert.deepEqual(
      [row.endpoint, row.model, row.input_tokens, row.output_tokens],
      ['streamGenerateContent', 'gemini-2.5-flash', 120, 12],
    );
    assert.ok(gemini.asked.at(-1)!.authorized, 'the real key went in its header');
  });

  it('meters each vendor shape, streamed and not, as the model API reported it (cache tokens included), and keeps running totals', async () => {
    type Shape = {
      name: string;
      runtime: 'claude' | 'codex' | 'gemini' | 'opencode';
      model: string;
      server: ModelApiServer;
      endpoint: string;
      /** Whether the vendor reports cache writes (only Anthropic does). */
      writes: boolean;
      send: (token: string) => Promise<Response>;
    };
    const post = (url: string, headers: Record<string, string>, body: unknown) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    const chat = (stream: boolean) => ({ model: 'gpt-5', stream, messages: [{ role: 'user', content: RUN }] });
    const contents = { contents: [{ role: 'user', parts: [{ text: RUN }] }] };
    const shapes: Shape[] = [
      ...[true, false].map(
        (stream): Shape => ({
          name: `anthropic messages${stream ? ' streamed' : ''}`,
          runtime: 'claude',
          model: 'anthropic/claude-sonnet-4-5',
          server: anthropic,
          endpoint: 'messages',
          writes: true,
          send: (t) =>
            post(gw('anthropic', '/v1/messages'), { 'x-api-key': t }, anthropicBody('claude-sonnet-4-5', stream)),
        }),
      ),
      {
        name: 'openai responses streamed',
        runtime: 'codex',
        model: 'openai/gpt-5',
        server: openai,
        endpoint: 'responses',
        writes: false,
        send: (t) =>
          post(
            gw('openai', '/responses'),
            { authorization: `Bearer ${t}` },
            { model: 'gpt-5', input: RUN, stream: true },
          ),
      },
      ...[true, false].map(
        (stream): Shape => ({
          name: `openai chat completions${stream ? ' streamed' : ''}`,
          runtime: 'opencode',
          model: 'openai/gpt-5',
          server: openai,
          endpoint: 'chat_completions',
          writes: false,
          send: (t) => post(gw('openai', '/chat/completions'), { authorization: `Bearer ${t}` }, chat(stream)),
        }),
      ),
      ...(['streamGenerateContent', 'generateContent'] as const).map(
        (method): Shape => ({
          name: `gemini ${method}`,
          runtime: 'gemini',
          model: 'google/gemini-2.5-flash',
          server: gemini,
          endpoint: method,
          writes: false,
          send: (t) =>
            post(
              gw(
                'gemini',
                `/v1beta/models/gemini-2.5-flash:${method}${method === 'streamGenerateContent' ? '?alt=sse' : ''}`,
              ),
              { 'x-goog-api-key': t },
              contents,
            ),
        }),
      ),
    ];
    for (const [i, shape] of shapes.entries()) {
      // Figures of their own per shape, so a row that took another call's usage (or a default) shows.
      shape.server.usage = { input: 301 + i, output: 17 + i, cacheRead: 40 + i, cacheWrite: shape.writes ? 9 + i : 0 };
      try {
        const c = await conversation(shape.runtime, shape.model);
        const before = shape.server.asked.length;
        for (let n = 0; n < 2; n++) {
          const r = await shape.send(c.token);
          assert.equal(r.status, 200, `${shape.name}: ${await r.clone().text()}`);
          await r.text();
        }
        const reported = shape.server.asked
          .slice(before)
          .map((a) => a.reported)
          .filter((u) => u !== null);
        assert.equal(reported.length, 2, `${shape.name}: the model API reported usage twice`);
        const rows = await calls(c.convId, 2);
        for (const x of rows) {
          assert.equal(x.endpoint, shape.endpoint, shape.name);
          assert.deepEqual(
            [x.input_tokens, x.output_tokens, x.cache_read_tokens, x.cache_write_tokens],
            [reported[0]!.input, reported[0]!.output, reported[0]!.cacheRead, reported[0]!.cacheWrite],
            `${shape.name}: recorded as reported`,
          );
        }
        const sum = reported.reduce((n, u) => n + u.input + u.output + u.cacheRead + u.cacheWrite, 0);
        const [total] = await db()
          .select()
          .from(modelUsageTotals)
          .where(and(eq(modelUsageTotals.scope, 'conversation'), eq(modelUsageTotals.subject, c.convId)));
        assert.equal(total?.tokens, sum, `${shape.name}: the conversation's running total`);
        const costs = rows.reduce((n, x) => n + Math.round((x.cost_usd ?? 0) * 1e6), 0);
        assert.equal(total?.micros, costs, `${shape.name}: the running cost is the calls' costs`);
      } finally {
        shape.server.usage = { input: 120, output: 12, cacheRead: 0, cacheWrite: 0 };
      }
    }
  });

  it('attaches a replaced credential from the very next call, though the opened one is kept between calls', async () => {
    const c = await conversation('claude', 'anthropic/claude-sonnet-4-5');
    const send = () =>
      fetch(gw('anthropic', '/v1/messages'), {
        method: 'POST',
        headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
        body: JSON.stringify(anthropicBody('claude-sonnet-4-5', false)),
      });
    const rotated = `sk-ant-api03-${randomBytes(20).toString('hex')}`;
    try {
      assert.equal((await send()).status, 200, 'the opened credential is now kept');
      // The model API takes only the new key from now on (the write validates it there).
      anthropic.key = rotated;
      const put = await api('PUT', '/api/account/inference-credentials/anthropic_api_key', {
        value: rotated,
        base_url: anthropic.url,
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const before = anthropic.asked.length;
      const r = await send();
      assert.equal(r.status, 200, await r.clone().text());
      assert.deepEqual(
        anthropic.asked.slice(before).map((a) => a.authorized),
        [true],
        'the call right after the write carried the new key',
      );
    } finally {
      anthropic.key = keys.anthropic;
      await api('PUT', '/api/account/inference-credentials/anthropic_api_key', {
        value: keys.anthropic,
        base_url: anthropic.url,
      });
    }
  });

  it("refuses a model not on the agent's allow-list, in the vendor's shape", async () => {
    const c = await conversation('claude', 'anthropic/claude-haiku-4-5', { models: ['anthropic/claude-haiku-4-5'] });
    const before = anthropic.asked.length;
    const r = await fetch(gw('anthropic', '/v1/messages'), {
      method: 'POST',
      headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
      body: JSON.stringify(anthropicBody('claude-opus-4-1', true)),
    });
    assert.equal(r.status, 403);
    const b = await r.json();
    assert.equal(b.error.type, 'permission_error');
    assert.match(b.error.message, /claude-opus-4-1 is not on this agent's model allow-list \(claude-haiku-4-5\)/);
    assert.equal(anthropic.asked.length, before, 'the model API was not asked');
    const ok = await fetch(gw('anthropic', '/v1/messages'), {
      method: 'POST',
      headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
      body: JSON.stringify(anthropicBody('claude-haiku-4-5', false)),
    });
    assert.equal(ok.status, 200);
    const rows = await calls(c.convId, 2);
    assert.deepEqual(rows.map((x) => x.refused).sort(), ['models', null]);
  });

  it('stops a conversation at the first call past its token budget, per vendor shape', async () => {
    for (const [runtime, model, vendor, send] of [
      [
        'claude',
        'anthropic/claude-sonnet-4-5',
        'anthropic',
        (t: string) =>
          fetch(gw('anthropic', '/v1/messages'), {
            method: 'POST',
            headers: { 'x-api-key': t, 'content-type': 'application/json' },
            body: JSON.stringify(anthropicBody('claude-sonnet-4-5', true)),
          }),
      ],
      [
        'codex',
        'openai/gpt-5',
        'openai',
        (t: string) =>
          fetch(gw('openai', '/responses'), {
            method: 'POST',
            headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'gpt-5', input: RUN, stream: true }),
          }),
      ],
      [
        'opencode',
        'openai/gpt-5',
        'openai',
        (t: string) =>
          fetch(gw('openai', '/chat/completions'), {
            method: 'POST',
            headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'gpt-5', stream: true, messages: [{ role: 'user', content: RUN }] }),
          }),
      ],
      [
        'gemini',
        'google/gemini-2.5-flash',
        'gemini',
        (t: string) =>
          fetch(gw('gemini', '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse'), {
            method: 'POST',
            headers: { 'x-goog-api-key': t, 'content-type': 'application/json' },
            body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
          }),
      ],
    ] as const) {
      const c = await conversation(runtime, model, { tokens_per_conversation: 200 });
      // 132 tokens each: the first two calls start under 200, the third is past it.
      for (let i = 0; i < 2; i++) {
        const r = await send(c.token);
        assert.equal(r.status, 200, `${vendor} call ${i + 1}`);
        await r.text();
        await calls(c.convId, i + 1);
      }
      const refused = await send(c.token);
      assert.equal(refused.status, 403, vendor);
      const b = await refused.json();
      const message: string = vendor === 'anthropic' ? b.error.message : b.error.message;
      assert.match(
        message,
        /token budget tokens_per_conversation = 200 is spent \(264 tokens used this conversation\)/,
      );
      if (vendor === 'anthropic') assert.equal(b.error.type, 'permission_error');
      if (vendor === 'gemini') assert.equal(b.error.status, 'PERMISSION_DENIED');
      if (vendor === 'openai') assert.equal(b.error.code, 'fountain_limit');
    }
  });

  it('stops a conversation at the first call past its currency budget, costed with the price table', async () => {
    const c = await conversation('claude', 'anthropic/claude-sonnet-4-5', { usd_per_conversation: 0.001 });
    const send = () =>
      fetch(gw('anthropic', '/v1/messages'), {
        method: 'POST',
        headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
        body: JSON.stringify(anthropicBody('claude-sonnet-4-5', true)),
      });
    // 120 tokens in at $3 and 12 out at $15 per million: $0.00054 a call, so two start under $0.001.
    for (let i = 0; i < 2; i++) {
      const r = await send();
      assert.equal(r.status, 200);
      await r.text();
    }
    const refused = await send();
    assert.equal(refused.status, 403);
    assert.match(
      (await refused.json()).error.message,
      /the agent's budget usd_per_conversation = \$0\.001 is spent \(\$0\.0011 used this conversation\)/,
    );
    const rows = await calls(c.convId, 3);
    assert.deepEqual(rows.map((x) => x.refused).sort(), ['agent.usd_per_conversation', null, null]);
    assert.equal(
      rows.reduce((s, x) => s + (x.cost_usd ?? 0), 0),
      2 * 0.00054,
    );
  });

  it("holds a call back while reservations in flight would pass the budget, and forgets a dead node's reservation", async () => {
    const c = await conversation('claude', 'anthropic/claude-sonnet-4-5', { tokens_per_conversation: 1000 });
    const accountId: string = (await api('GET', '/api/account')).body.data.id;
    const send = () =>
      fetch(gw('anthropic', '/v1/messages'), {
        method: 'POST',
        headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
        body: JSON.stringify(anthropicBody('claude-sonnet-4-5', false)),
      });
    // A call another node has in flight, reserving more than the budget.
    const [held] = await db()
      .insert(modelCalls)
      .values({
        accountId,
        agentId: c.agentId,
        conversationId: c.convId,
        api: 'anthropic',
        endpoint: 'messages',
        status: 0,
        latencyMs: 0,
        reservedTokens: 5000,
      })
      .returning({ id: modelCalls.id });
    const waiting = await send();
    assert.equal(waiting.status, 429);
    const e = await waiting.json();
    assert.equal(e.error.type, 'rate_limit_error');
    assert.match(
      e.error.message,
      /token budget tokens_per_conversation = 1000 is nearly spent \(0 tokens used this conversation, 1 call\(s\) in flight may use 5000 tokens more\)/,
    );
    // Its node died 31 minutes ago: the reservation no longer holds the budget back.
    await db()
      .update(modelCalls)
      .set({ createdAt: new Date(Date.now() - 31 * 60_000) })
      .where(eq(modelCalls.id, held!.id));
    const ok = await send();
    assert.equal(ok.status, 200, await ok.clone().text());
    const rows = await calls(c.convId, 3);
    const mine = rows.find((r) => r.refused === null && r.status === 200);
    assert.equal(mine?.input_tokens, 120, 'the admitted call was completed with its usage');
  });

  it('refuses gateway delivery before saving where no path exists (a hosted sandbox, no PUBLIC_URL)', async () => {
    const hosted = { runtime: 'claude', model: 'anthropic/claude-sonnet-4-5', sandbox_provider: 'e2b' };
    const refused = await api('POST', '/api/agents', { name: 'gw-hosted', ...hosted });
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    assert.equal(refused.body.error, 'gateway_unreachable');
    assert.match(refused.body.message, /needs PUBLIC_URL: a e2b sandbox cannot reach this server's model gateway/);
    assert.match(refused.body.message, /"direct"/);
    const direct = await api('POST', '/api/agents', { name: 'gw-hosted', ...hosted, credential_delivery: 'direct' });
    assert.equal(direct.status, 201, JSON.stringify(direct.body));
    const back = await api('PATCH', `/api/agents/${direct.body.data.id}`, { credential_delivery: 'gateway' });
    assert.equal(back.status, 422);
    assert.equal(back.body.error, 'gateway_unreachable');
    // The demo runtime has no model credential: nothing to deliver, nothing refused.
    const demo = await api('POST', '/api/agents', {
      name: 'gw-demo',
      runtime: 'demo',
      model: 'fountain/demo',
      sandbox_provider: 'e2b',
    });
    assert.equal(demo.status, 201, JSON.stringify(demo.body));
    // On a runner the gateway is reached where the server listens.
    const local = await api('POST', '/api/agents', {
      name: 'gw-local',
      runtime: 'claude',
      model: 'anthropic/claude-sonnet-4-5',
      sandbox_provider: 'runner',
    });
    assert.equal(local.status, 201, JSON.stringify(local.body));
  });

  it("holds the account's daily budget and requests per minute across its agents", async () => {
    const set = await api('PUT', '/api/usage/limits', { requests_per_minute: 1000, tokens_per_day: 10_000_000 });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.deepEqual((await api('GET', '/api/usage/limits')).body.data, {
      requests_per_minute: 1000,
      tokens_per_day: 10_000_000,
    });
    const bad = await api('PUT', '/api/usage/limits', { models: ['x'] });
    assert.equal(bad.status, 422);
    const c = await conversation('claude', 'anthropic/claude-sonnet-4-5', { requests_per_minute: 1 });
    const first = await fetch(gw('anthropic', '/v1/messages'), {
      method: 'POST',
      headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
      body: JSON.stringify(anthropicBody('claude-sonnet-4-5', false)),
    });
    assert.equal(first.status, 200);
    await calls(c.convId, 1);
    const second = await fetch(gw('anthropic', '/v1/messages'), {
      method: 'POST',
      headers: { 'x-api-key': c.token, 'content-type': 'application/json' },
      body: JSON.stringify(anthropicBody('claude-sonnet-4-5', false)),
    });
    assert.equal(second.status, 429);
    assert.match((await second.json()).error.message, /agent's limit requests_per_minute = 1 is reached/);
    await api('PUT', '/api/usage/limits', {});
  });
});
