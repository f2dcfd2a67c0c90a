/**
 * Session settings on real adapters through a real runner: claude-agent-acp (installed into its sandbox
 * as for any claude agent) lists its modes and a `mode` option; the agent's mode is set when its session
 * starts and the conversation's at once on the live agent. The demo agent lists none: refused in words.
 * The claude conversation runs on another model than its agent's: the local model API is asked for that one.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { startAnthropicApi } from './model-apis/anthropic.ts';
import type { ModelApiServer } from './model-apis/server.ts';
import { AGENT_CACHE_ARGS, NPM_CACHE } from './real-agents/harness.ts';
import { call, openStream, type Json } from './helpers/http.ts';

describe('session settings on real adapters', { timeout: 600_000 }, () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let model: ModelApiServer;
  const apiKey = `sk-ant-api03-${randomBytes(20).toString('hex')}`;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-settings-')));
    mkdirSync(NPM_CACHE, { recursive: true });
    model = await startAnthropicApi(apiKey);
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      acceptRunnerSocket,
      engine: { acpCallTimeoutMs: 120_000 },
      sseHeartbeatMs: 500,
    });
    key = srv.bootstrapKey!;
    runner = startRunnerChild({
      name: 's',
      root: join(tmp, 'sandboxes'),
      baseUrl: srv.url,
      apiKey: key,
      home: tmp,
      extraArgs: [...AGENT_CACHE_ARGS],
    });
    await until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner to come online',
      60_000,
    );
    const cred = await api('PUT', '/api/account/inference-credentials/anthropic_api_key', {
      value: apiKey,
      base_url: model.url,
      validate: false,
    });
    assert.equal(cred.status, 200, JSON.stringify(cred.body));
  });

  after(async () => {
    await runner?.stop();
    await srv?.stop();
    await model?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  /** A conversation of `agentId`, once its agent's session started (provisioning done). */
  async function started(agentId: string, model?: string): Promise<{ id: string; events: Json[] }> {
    const created = await api('POST', '/api/conversations', { agent_id: agentId, model });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const s = openStream(`${srv.url}/api/conversations/${created.body.data.id}/stream`, key);
    try {
      const done = await until(
        () => s.events.find((e) => e.data?.stage === 'provision' && ['done', 'failed'].includes(e.data?.state)),
        'provisioning to end',
        480_000,
      );
      assert.equal(done.data.state, 'done', `provisioning failed: ${JSON.stringify(done.data)}`);
      return { id: created.body.data.id, events: s.events.map((e) => e.data) };
    } finally {
      s.close();
    }
  }

  it('claude-agent-acp: the agent mode is set at launch, the conversation mode on the live agent; an unlisted option is refused', async () => {
    const agent = await api('POST', '/api/agents', {
      name: 'claude-settings',
      runtime: 'claude',
      model: 'anthropic/claude-sonnet-4-5',
      session_settings: { mode: 'acceptEdits' },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    assert.deepEqual(agent.body.data.session_settings, { mode: 'acceptEdits' });
    // A dated id: Claude Code sends it as it is (it moves an older opus, say, to its newest).
    const conv = await started(agent.body.data.id, 'anthropic/claude-sonnet-4-5-20250929');

    const shown = (await api('GET', `/api/conversations/${conv.id}`)).body.data;
    assert.equal(shown.model, 'anthropic/claude-sonnet-4-5-20250929');
    const offered = shown.session_offered;
    assert.ok(offered, 'the runtime listed what it offers');
    const modeIds = (offered.modes as Json[]).map((m) => m.id);
    assert.ok(modeIds.includes('plan') && modeIds.includes('acceptEdits'), `modes: ${modeIds.join(', ')}`);
    assert.equal(offered.current_mode, 'acceptEdits', 'the agent default was sent at launch');
    const applied = conv.events.find((e) => e?.stage === 'session' && e?.state === 'done');
    assert.ok(applied, 'a session settings event');
    assert.deepEqual(JSON.parse(applied.data).applied, ['mode=acceptEdits']);

    // The conversation's model, not the agent's, is the one Claude Code asks the model API for.
    const sent = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'say hello' });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const turn = await until(
      async () => {
        const t = ((await api('GET', `/api/conversations/${conv.id}/turns`)).body.data as Json[])[0];
        return t && ['completed', 'failed'].includes(t.status) ? t : undefined;
      },
      'the turn to end',
      240_000,
    );
    assert.deepEqual(
      [turn.status, turn.model],
      ['completed', 'anthropic/claude-sonnet-4-5-20250929'],
      JSON.stringify(turn),
    );
    const asked = model.modelsAnswered;
    assert.ok(asked.length > 0 && asked.every((m) => m === 'claude-sonnet-4-5-20250929'), `asked for: ${asked}`);

    const plan = await api('PATCH', `/api/conversations/${conv.id}/settings`, { mode: 'plan' });
    assert.equal(plan.status, 200, JSON.stringify(plan.body));
    assert.deepEqual(plan.body.data, { settings: { mode: 'plan' }, applied: ['mode=plan'], live: true });
    assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.session_offered.current_mode, 'plan');

    const unknown = await api('PATCH', `/api/conversations/${conv.id}/settings`, { options: { warp_speed: 'on' } });
    assert.deepEqual([unknown.status, unknown.body.error], [422, 'session_option_not_listed']);
    assert.match(unknown.body.message, /does not list a session option "warp_speed" \(it lists: .*mode/);
    const badMode = await api('PATCH', `/api/conversations/${conv.id}/settings`, { mode: 'yolo' });
    assert.deepEqual([badMode.status, badMode.body.error], [422, 'session_mode_not_listed']);
    // Nothing refused was stored.
    assert.deepEqual((await api('GET', `/api/conversations/${conv.id}`)).body.data.session_settings, { mode: 'plan' });
  });

  it('the demo agent lists no modes or options: a mode is refused in words with a code', async () => {
    const agent = await api('POST', '/api/agents', { name: 'demo-settings', runtime: 'demo', model: 'fountain/demo' });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const conv = await started(agent.body.data.id);
    const r = await api('PATCH', `/api/conversations/${conv.id}/settings`, { mode: 'plan' });
    assert.deepEqual([r.status, r.body.error], [422, 'session_mode_not_listed']);
    assert.match(r.body.message, /the runtime does not list a session mode "plan" \(it lists: none\)/);
    const opt = await api('PATCH', `/api/conversations/${conv.id}/settings`, { options: { effort: 'high' } });
    assert.deepEqual([opt.status, opt.body.error], [422, 'session_option_not_listed']);

    // An agent default the runtime does not list is said in the conversation, and the session still starts.
    const withMode = await api('PATCH', `/api/agents/${agent.body.data.id}`, { session_settings: { mode: 'plan' } });
    assert.equal(withMode.status, 200);
    const second = await started(agent.body.data.id);
    const refused = second.events.find((e) => e?.stage === 'session' && e?.state === 'failed');
    assert.ok(refused, 'the refusal is an event of the conversation');
    assert.equal(JSON.parse(refused.data).code, 'session_mode_not_listed');
    const bad = await api('PATCH', `/api/conversations/${conv.id}/settings`, { mode: '' });
    assert.equal(bad.status, 422);
  });
});
