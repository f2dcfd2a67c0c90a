/**
 * Any ACP agent through Fountain: an agent this test writes (a node script on the SDK's agent side) runs
 * as a `custom` runtime on a real runner, asks permission for a tool, reads its env and named credential,
 * and calls a local model API through the gateway; switched between two credential sets of one provider,
 * the model API sees each key. Its session option is set; a mode it does not list is refused in words.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { startAnthropicApi } from './model-apis/anthropic.ts';
import type { ModelApiServer } from './model-apis/server.ts';
import { answer, call, openStream, type Json, type Stream } from './helpers/http.ts';

/** The agent: ACP on stdio, one `style` config option, a tool call that needs permission, a model call. */
const agentScript = (sdk: string) => `
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import * as acp from ${JSON.stringify(sdk)};

const sessions = new Map();
const styleOption = (current) => ({
  id: 'style', name: 'Answer style', type: 'select', currentValue: current,
  options: [{ value: 'plain', name: 'Plain' }, { value: 'loud', name: 'Loud' }],
});
const say = (client, sessionId, text) =>
  client.notify(acp.methods.client.session.update, {
    sessionId, update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } },
  });

const app = acp.agent({ name: 'test-custom' })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    agentInfo: { name: 'test-custom', version: '0.0.1' },
    authMethods: [],
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = randomUUID();
    sessions.set(sessionId, { cwd: params.cwd, style: 'plain' });
    return { sessionId, configOptions: [styleOption('plain')] };
  })
  .onRequest(acp.methods.agent.session.setConfigOption, ({ params }) => {
    const s = sessions.get(params.sessionId);
    if (params.configId !== 'style' || !['plain', 'loud'].includes(params.value))
      throw acp.RequestError.invalidParams(undefined, 'no such option');
    s.style = params.value;
    return { configOptions: [styleOption(s.style)] };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const s = sessions.get(params.sessionId);
    const text = params.prompt.map((b) => (b.type === 'text' ? b.text : '')).join('');
    const res = await fetch(process.env.MY_MODEL_URL + '/v1/messages', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': process.env.MY_MODEL_KEY, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: process.env.FOUNTAIN_MODEL.split('/')[1], max_tokens: 20, messages: [{ role: 'user', content: text }] }),
    });
    await say(client, params.sessionId, 'model-status=' + res.status + ' greeting=' + process.env.GREETING + ' style=' + s.style + '. ');
    const toolCall = { toolCallId: 'write-1', title: 'Write marker.txt', kind: 'edit', status: 'pending' };
    await client.notify(acp.methods.client.session.update, { sessionId: params.sessionId, update: { sessionUpdate: 'tool_call', ...toolCall } });
    const decision = await client.request(acp.methods.client.session.requestPermission, {
      sessionId: params.sessionId, toolCall,
      options: [{ optionId: 'allow', name: 'Allow', kind: 'allow_once' }, { optionId: 'deny', name: 'Deny', kind: 'reject_once' }],
    });
    if (decision.outcome.outcome === 'selected' && decision.outcome.optionId === 'allow') {
      writeFileSync(join(s.cwd, 'marker.txt'), text);
      await say(client, params.sessionId, 'wrote marker.txt');
    } else await say(client, params.sessionId, 'not allowed');
    return { stopReason: 'end_turn' };
  });

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
await app.connect(stream).closed;
process.exit(0);
`;

describe('a custom ACP agent through Fountain with a real runner', { timeout: 300_000 }, () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let model: ModelApiServer;
  const workKey = `sk-ant-api03-work${randomBytes(16).toString('hex')}`;
  const personalKey = `sk-ant-api03-personal${randomBytes(16).toString('hex')}`;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-custom-')));
    model = await startAnthropicApi(workKey);
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      engine: { askTimeoutMs: 120_000 },
      sseHeartbeatMs: 500,
    });
    key = srv.bootstrapKey!;
    runner = startRunnerChild({ name: 'c', root: join(tmp, 'sandboxes'), baseUrl: srv.url, apiKey: key, home: tmp });
    await until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner to come online',
      60_000,
    );
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    await model?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** Prompts, answers the permission request with `allow`, and returns the turn's answer. */
  async function turn(s: Stream, convId: string, prompt: string | null, after: number): Promise<string> {
    let turnId: string | null = null;
    if (prompt !== null) {
      const p = await api('POST', `/api/conversations/${convId}/prompts`, { prompt });
      assert.equal(p.status, 200, JSON.stringify(p.body));
      turnId = p.body.turn_id;
    }
    const asked = await s.stage('permission', 'started', after);
    const request = JSON.parse(asked.data.data);
    const yes = await api('POST', `/api/conversations/${convId}/requests/${request.request_id}`, {
      option_id: 'allow',
    });
    assert.deepEqual([yes.status, yes.body], [200, { ok: true }]);
    const done = await s.stage('turn', 'done', asked.id!);
    return answer(s.events, turnId ?? done.data.turn_id);
  }

  it('is refused in words without a command, runs a turn with a permission request, and uses each credential set', async () => {
    const script = join(tmp, 'agent.mjs');
    writeFileSync(script, agentScript(import.meta.resolve('@agentclientprotocol/sdk')));

    // Bad input is answered in words.
    const empty = await api('POST', '/api/agents', {
      name: 'no-command',
      runtime: 'custom',
      model: 'anthropic/claude-sonnet-4-5',
      custom_runtime: { command: [] },
    });
    assert.equal(empty.status, 422);
    assert.match(empty.body.message, /custom_runtime\.command must not be empty/);
    const missing = await api('POST', '/api/agents', { name: 'no-launch', runtime: 'custom', model: 'x/y' });
    assert.deepEqual([missing.status, missing.body.error], [422, 'custom_runtime_required']);
    const noBase = await api('POST', '/api/agents', {
      name: 'no-base',
      runtime: 'custom',
      model: 'anthropic/claude-sonnet-4-5',
      custom_runtime: { command: ['node', script], credentials: [{ provider: 'anthropic_api_key', env: 'K' }] },
    });
    assert.equal(noBase.status, 422);
    assert.match(noBase.body.message, /base_url_env is required under gateway delivery/);

    // Two credential sets of one provider, both pointing at the local model API.
    for (const [name, value] of [
      ['work', workKey],
      ['personal', personalKey],
    ] as const) {
      const r = await api('PUT', `/api/account/inference-credentials/anthropic_api_key?name=${name}`, {
        value,
        base_url: model.url,
        validate: false,
      });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.data.name, name);
    }
    const badSet = await api('PUT', '/api/account/inference-credentials/anthropic_api_key?name=Not%20A%20Name', {
      value: workKey,
      validate: false,
    });
    assert.equal(badSet.status, 422);
    const listed = await api('GET', '/api/account/inference-credentials');
    assert.deepEqual(
      (listed.body.data as Json[]).map((c) => `${c.provider}/${c.name}`),
      ['anthropic_api_key/personal', 'anthropic_api_key/work'],
    );

    const agent = await api('POST', '/api/agents', {
      name: 'custom',
      runtime: 'custom',
      model: 'anthropic/claude-sonnet-4-5',
      permission_policy: { default: 'ask' },
      credential_set: 'work',
      custom_runtime: {
        command: ['node', script],
        env: { GREETING: 'hello-from-env' },
        credentials: [{ provider: 'anthropic_api_key', env: 'MY_MODEL_KEY', base_url_env: 'MY_MODEL_URL' }],
      },
      session_settings: { options: { style: 'loud' } },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    assert.equal(agent.body.data.runtime, 'custom');
    assert.deepEqual(agent.body.data.custom_runtime.command, ['node', script]);
    const agentId: string = agent.body.data.id;

    const created = await api('POST', '/api/conversations', { agent_id: agentId, prompt: 'first' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const conv = created.body.data;
    const dir: string = conv.sandbox.runner.path;
    const s = openStream(`${srv.url}/api/conversations/${conv.id}/stream`, key);
    try {
      await s.stage('provision', 'done');
      const first = await turn(s, conv.id, null, 0);
      // Its env, its model through the gateway with the work key, the agent's session option, the allowed tool.
      assert.match(first, /model-status=200 greeting=hello-from-env style=loud\. wrote marker\.txt/);
      assert.equal(readFileSync(join(dir, 'marker.txt'), 'utf8'), 'first');
      const calls = model.asked.filter((a) => a.path === '/v1/messages');
      assert.equal(calls.length, 1);
      assert.equal(calls[0]!.authorized, true, 'the model API saw the work key');
      assert.equal(calls[0]!.model, 'claude-sonnet-4-5');

      // Session settings on this agent: the option it lists is set on the live agent; a mode it lacks is refused.
      const shown = await api('GET', `/api/conversations/${conv.id}`);
      assert.deepEqual(
        shown.body.data.session_offered.options.map((o: Json) => [o.id, o.current]),
        [['style', 'loud']],
      );
      const plain = await api('PATCH', `/api/conversations/${conv.id}/settings`, { options: { style: 'plain' } });
      assert.equal(plain.status, 200, JSON.stringify(plain.body));
      assert.deepEqual(plain.body.data, {
        settings: { options: { style: 'plain' } },
        applied: ['style=plain'],
        live: true,
      });
      const mode = await api('PATCH', `/api/conversations/${conv.id}/settings`, { mode: 'plan' });
      assert.deepEqual([mode.status, mode.body.error], [422, 'session_mode_not_listed']);
      assert.match(mode.body.message, /does not list a session mode "plan"/);
      const value = await api('PATCH', `/api/conversations/${conv.id}/settings`, { options: { style: 'purple' } });
      assert.deepEqual([value.status, value.body.error], [422, 'session_option_value_not_listed']);
      assert.match(value.body.message, /lists: plain, loud/);

      // Switched to the other set: the gateway reads the agent's set at the call, so the model API sees the personal key.
      model.key = personalKey;
      const switched = await api('PATCH', `/api/agents/${agentId}`, { credential_set: 'personal' });
      assert.equal(switched.status, 200, JSON.stringify(switched.body));
      const second = await turn(s, conv.id, 'second', (await s.stage('turn', 'done')).id!);
      assert.match(second, /model-status=200 greeting=hello-from-env style=plain\. wrote marker\.txt/);
      const after = model.asked.filter((a) => a.path === '/v1/messages');
      assert.equal(after.length, 2);
      assert.equal(after[1]!.authorized, true, 'the model API saw the personal key');

      // And back: with the model API expecting the work key again, the agent's call is authorized only through that set.
      model.key = workKey;
      assert.equal((await api('PATCH', `/api/agents/${agentId}`, { credential_set: 'work' })).status, 200);
      const lastDone = s.events.filter((e) => e.data?.stage === 'turn' && e.data?.state === 'done').at(-1)!;
      const third = await turn(s, conv.id, 'third', lastDone.id!);
      assert.match(third, /model-status=200/);
      assert.equal(model.asked.filter((a) => a.path === '/v1/messages')[2]!.authorized, true);

      // A set in use cannot be deleted; its agent is named.
      const inUse = await api('DELETE', '/api/account/inference-credentials/anthropic_api_key?name=work');
      assert.deepEqual([inUse.status, inUse.body.error], [409, 'credential_set_in_use']);
      assert.match(inUse.body.message, /agent custom/);
      assert.equal(
        (await api('DELETE', '/api/account/inference-credentials/anthropic_api_key?name=personal')).status,
        204,
      );
      assert.ok(existsSync(join(dir, 'marker.txt')));
    } finally {
      s.close();
    }
  });
});
