/**
 * End to end over the public HTTP API: the real server (startServer), a real `fountain runner` child
 * process with the process backend and, as root, the namespace backend, and the demo agent — the
 * seed's full conversation cycle on each, and every error code the conversation API promises.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { namespaceSupportProblem } from '../src/runner/backends/namespace/index.ts';

import { answer, call, openStream, type Json, type Reply, type SseEvent } from './helpers/http.ts';

const nsProblem = namespaceSupportProblem();
/** Keeps this file's namespace links apart from other runs on the machine. */
const octet = 20 + ((process.pid + 13) % 200);

for (const backend of ['process', 'namespace'] as const) {
  describe(`conversations over HTTP with a real runner (${backend} backend) and the demo agent`, {
    skip: backend === 'namespace' ? (nsProblem ?? false) : false,
  }, () => {
    let tmp: string;
    let srv: RunningServer;
    let key: string;
    let runner: RunnerChild;
    const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

    before(async () => {
      tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-e2e-')));
      srv = await startServer({
        dataDir: join(tmp, 'data'),
        port: 0,
        env: {},
        acceptRunnerSocket,
        engine: { idleTimeoutMs: 1500, sweepIntervalMs: 250, askTimeoutMs: 60_000 },
        sseHeartbeatMs: 300,
      });
      key = srv.bootstrapKey!;
      const extraArgs = backend === 'namespace' ? ['--backend', 'namespace', '--ns-subnet', `10.61.${octet}.0/24`] : [];
      runner = startRunnerChild({
        name: 't',
        root: join(tmp, 'sandboxes'),
        baseUrl: srv.url,
        apiKey: key,
        home: tmp,
        extraArgs,
      });
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

    it('runs the full cycle: turn, permission, idle park, wake, recall, terminate', async () => {
      const agent = await api('POST', '/api/agents', {
        name: 'demo',
        runtime: 'demo',
        model: 'fountain/demo',
        system: 'You are the demo.',
        permission_policy: { execute: 'ask' },
      });
      assert.equal(agent.status, 201, JSON.stringify(agent.body));
      const catalog = await api('GET', '/api/catalog');
      assert.deepEqual(catalog.body.data.sandbox_providers.enabled, ['runner']);
      assert.equal(catalog.body.data.sandbox_providers.default, 'runner');

      // On a model of its own (the demo runtime takes any fountain/… one): every launch records it on its turns.
      const created = await api('POST', '/api/conversations', {
        agent_id: agent.body.data.id,
        prompt: 'remember: the launch code is 0451',
        model: 'fountain/demo-picked',
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const conv = created.body.data;
      assert.equal(conv.model, 'fountain/demo-picked');
      assert.deepEqual(created.body.meta, { resumed: false });
      assert.equal(conv.sandbox.provider, 'runner');
      assert.equal(conv.sandbox.runner.online, true);
      assert.equal(conv.sandbox.runner.name, 't');
      const dir: string = conv.sandbox.runner.path;
      assert.equal(dir, join(tmp, 'sandboxes', conv.sandbox.name));

      const s = openStream(`${srv.url}/api/conversations/${conv.id}/stream`, key);
      try {
        await s.stage('provision', 'done');
        const t1 = await s.stage('turn', 'done');
        assert.match(answer(s.events, t1.data.turn_id), /I will remember that: the launch code is 0451/);
        assert.ok(existsSync(join(dir, 'AGENTS.md')));

        // A turn that asks permission; the answer is given over HTTP.
        const p2 = await api('POST', `/api/conversations/${conv.id}/prompts`, {
          prompt: 'run: echo sandbox-says-hi in $(pwd)',
        });
        assert.equal(p2.status, 200, JSON.stringify(p2.body));
        assert.equal(p2.body.status, 'queued');
        const asked = await s.stage('permission', 'started', t1.id!);
        const request = JSON.parse(asked.data.data);
        const busy = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'me too' });
        assert.deepEqual([busy.status, busy.body.error], [400, 'conversation_busy']);
        const turnsNow = await api('GET', `/api/conversations/${conv.id}/turns`);
        assert.equal(turnsNow.body.data[1].pending_permission.request_id, request.request_id);
        const unknown = await api('POST', `/api/conversations/${conv.id}/requests/${request.request_id}`, {
          option_id: 'sudo',
        });
        assert.deepEqual([unknown.status, unknown.body.error], [422, 'unknown_option']);
        const missing = await api('POST', `/api/conversations/${conv.id}/requests/${request.request_id}`, {});
        assert.deepEqual([missing.status, missing.body.error], [422, 'option_id_required']);
        const yes = await api('POST', `/api/conversations/${conv.id}/requests/${request.request_id}`, {
          option_id: 'allow_once',
        });
        assert.deepEqual([yes.status, yes.body], [200, { ok: true }]);
        const again = await api('POST', `/api/conversations/${conv.id}/requests/${request.request_id}`, {
          option_id: 'allow_once',
        });
        assert.deepEqual([again.status, again.body.error], [409, 'permission_request_resolved']);
        const t2 = await s.stage('turn', 'done', asked.id!);
        assert.equal(t2.data.turn_id, p2.body.turn_id);
        // The command ran in the sandbox: its own directory as the agent's session sees it.
        assert.match(
          answer(s.events, p2.body.turn_id),
          new RegExp(`sandbox-says-hi in ${backend === 'namespace' ? '/home/sprite' : dir}`),
        );

        // Idle: the sweep parks the sandbox; the runner keeps the disk with its suspended marker.
        await s.stage('sandbox', 'done', t2.id!);
        assert.ok(existsSync(join(dir, '.fountain-suspended')), 'the runner suspended the sandbox');
        const parked = await api('GET', `/api/conversations/${conv.id}`);
        assert.equal(parked.body.data.status, 'idle');
        assert.equal(parked.body.data.sandbox.status, 'suspended');
        const idle = await api('POST', `/api/conversations/${conv.id}/interrupt`);
        assert.deepEqual([idle.status, idle.body.error], [409, 'no_turn_running']);

        // Wake on the next prompt: resume, respawn, session/load; the memory survived.
        const mark = s.events.at(-1)!.id!;
        const p3 = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'recall' });
        assert.equal(p3.status, 200, JSON.stringify(p3.body));
        assert.ok(!existsSync(join(dir, '.fountain-suspended')));
        await s.stage('turn', 'done', mark);
        assert.match(answer(s.events, p3.body.turn_id), /the launch code is 0451/);

        const turns = await api('GET', `/api/conversations/${conv.id}/turns`);
        assert.deepEqual(
          turns.body.data.map((t: Json) => [t.status, t.model]),
          [
            ['completed', 'fountain/demo-picked'],
            ['completed', 'fountain/demo-picked'],
            // After the park: the woken agent was launched with the conversation's model too.
            ['completed', 'fountain/demo-picked'],
          ],
        );

        // Stream ids are the store's ids, in order; Last-Event-ID resumes right after the given id.
        const ids = s.events.map((e) => e.id!);
        assert.deepEqual(
          ids,
          [...ids].sort((a, b) => a - b),
        );
        const page = await api('GET', `/api/conversations/${conv.id}/events?after=0&limit=5`);
        assert.equal(page.body.data.length, 5);
        assert.deepEqual(
          page.body.data.map((e: Json) => e.id),
          ids.slice(0, 5),
        );
        assert.deepEqual(page.body.meta, { limit: 5, has_more: true, next_cursor: ids[4] });
        const replay = openStream(`${srv.url}/api/conversations/${conv.id}/stream`, key, ids[4]);
        await until(() => replay.events.length >= ids.length - 5 || null, 'the replay');
        assert.deepEqual(
          replay.events.slice(0, ids.length - 5).map((e) => e.id),
          ids.slice(5),
        );
        await until(() => replay.heartbeats() > 0 || null, 'a heartbeat');
        replay.close();
        const noWait = await fetch(`${srv.url}/api/conversations/${conv.id}/stream?wait=false&streams=stage`, {
          headers: { authorization: `Bearer ${key}` },
        });
        const noWaitText = await noWait.text();
        assert.match(noWaitText, /event: stage/);
        assert.doesNotMatch(noWaitText, /event: output/);

        // Terminate destroys the directory; terminate is idempotent; prompts are refused for good.
        const term = await api('POST', `/api/conversations/${conv.id}/terminate`);
        assert.equal(term.status, 204);
        await s.stage('terminate', 'done');
        assert.ok(!existsSync(dir), 'the sandbox directory is gone');
        assert.equal((await api('POST', `/api/conversations/${conv.id}/terminate`)).status, 204);
        const gone = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'hello?' });
        assert.deepEqual([gone.status, gone.body.error], [410, 'conversation_terminated']);
        assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.status, 'terminated');
      } finally {
        s.close();
      }
    });

    it('answers each error code through the API, and never 500 on bad input', {
      skip: backend === 'namespace' ? 'backend-independent: runs on the process backend' : false,
    }, async () => {
      // 422 sandbox_provider_disabled: unknown, and known but not enabled.
      for (const p of ['e2b', 'nope']) {
        const r = await api('POST', '/api/agents', {
          name: `bad-${p}`,
          runtime: 'demo',
          model: 'fountain/demo',
          sandbox_provider: p,
        });
        assert.deepEqual([r.status, r.body.error], [422, 'sandbox_provider_disabled']);
      }
      const badModel = await api('POST', '/api/agents', { name: 'x', runtime: 'claude', model: 'openai/gpt-5' });
      assert.deepEqual(
        [badModel.status, badModel.body.error, Object.keys(badModel.body.errors)],
        [422, 'validation_failed', ['model']],
      );
      const agent = (await api('POST', '/api/agents', { name: 'errors', runtime: 'demo', model: 'fountain/demo' })).body
        .data;
      const dup = await api('POST', '/api/agents', { name: 'errors', runtime: 'demo', model: 'fountain/demo' });
      assert.deepEqual([dup.status, dup.body.errors?.name], [422, ['has already been taken']]);
      const patched = await api('PATCH', `/api/agents/${agent.id}`, { sandbox_provider: 'daytona' });
      assert.deepEqual([patched.status, patched.body.error], [422, 'sandbox_provider_disabled']);

      // 409 no_runner_online for an account without a runner; nothing is allocated.
      const other = await api('POST', '/api/admin/accounts', { name: 'runnerless' });
      assert.equal(other.status, 201, JSON.stringify(other.body));
      const otherKey: string = other.body.data.key.key;
      const otherAgent = await call(srv.url, otherKey, 'POST', '/api/agents', {
        name: 'a',
        runtime: 'demo',
        model: 'fountain/demo',
      });
      const none = await call(srv.url, otherKey, 'POST', '/api/conversations', {
        agent_id: otherAgent.body.data.id,
        prompt: 'hi',
      });
      assert.deepEqual([none.status, none.body.error], [409, 'no_runner_online']);
      assert.match(none.body.message, /fountain runner/);
      assert.deepEqual((await call(srv.url, otherKey, 'GET', '/api/conversations')).body.data, []);
      // Foreign ids are 404.
      const foreign = await call(srv.url, otherKey, 'POST', '/api/conversations', { agent_id: agent.id });
      assert.deepEqual([foreign.status, foreign.body.error], [404, 'not_found']);

      // 400 invalid_status, 404s, validation failures are 4xx.
      assert.deepEqual(
        [
          (await api('GET', '/api/conversations?status=bogus')).status,
          (await api('GET', '/api/conversations?status=bogus')).body.error,
        ],
        [400, 'invalid_status'],
      );
      assert.equal((await api('GET', '/api/conversations/not-a-uuid')).status, 404);
      assert.equal((await api('GET', '/api/conversations/00000000-0000-4000-8000-000000000000/events')).status, 404);
      const bad: Array<[string, string, unknown, string?]> = [
        ['POST', '/api/conversations', {}],
        ['POST', '/api/conversations', { agent_id: 42 }],
        ['POST', '/api/conversations', undefined, '{"agent_id":'],
        ['POST', '/api/conversations', { agent_id: 'zzz' }],
        ['POST', '/api/agents', { name: '', runtime: 'demo', model: 'fountain/demo' }],
        ['POST', '/api/agents', { name: 'y', runtime: 'cobol', model: 'fountain/demo' }],
        [
          'POST',
          '/api/agents',
          { name: 'y', runtime: 'demo', model: 'fountain/demo', permission_policy: { execute: 'maybe' } },
        ],
        ['GET', '/api/agents/12', undefined],
        ['POST', '/api/conversations/00000000-0000-4000-8000-000000000000/prompts', { prompt: '' }],
        ['POST', '/api/conversations/xyz/requests/1.abc', { option_id: 'a' }],
      ];
      for (const [method, path, body, raw] of bad) {
        const r = await call(srv.url, key, method, path, body, raw);
        assert.ok(
          r.status >= 400 && r.status < 500,
          `${method} ${path} ${JSON.stringify(body ?? raw)} answered ${r.status}`,
        );
        assert.equal(typeof r.body.error, 'string');
      }

      // A model that does not fit the agent's runtime is refused with a code and words; nothing is created.
      const before = (await api('GET', '/api/conversations')).body.data.length;
      const otherVendor = await api('POST', '/api/conversations', { agent_id: agent.id, model: 'openai/gpt-5' });
      assert.deepEqual([otherVendor.status, otherVendor.body.error], [422, 'model_not_for_runtime']);
      assert.match(otherVendor.body.message, /model openai\/gpt-5 does not fit .*provider must be fountain/);
      const malformed = await api('POST', '/api/conversations', { agent_id: agent.id, model: 'GPT 5' });
      assert.deepEqual([malformed.status, malformed.body.error], [422, 'validation_failed']);
      // The credential check goes by the conversation's model: an Anthropic key does not launch it on OpenAI.
      const cred = await api('PUT', '/api/account/inference-credentials/anthropic_api_key', {
        value: 'sk-ant-api03-not-used',
        validate: false,
      });
      assert.equal(cred.status, 200, JSON.stringify(cred.body));
      const oc = await api('POST', '/api/agents', {
        name: 'oc',
        runtime: 'opencode',
        model: 'anthropic/claude-sonnet-4-5',
        model_limits: { models: ['anthropic/claude-sonnet-4-5', 'openai/gpt-5'] },
      });
      assert.equal(oc.status, 201, JSON.stringify(oc.body));
      const keyless = await api('POST', '/api/conversations', { agent_id: oc.body.data.id, model: 'openai/gpt-5' });
      assert.deepEqual([keyless.status, keyless.body.error], [422, 'inference_credential_missing']);
      assert.match(keyless.body.message, /model openai\/gpt-5\).*openai_api_key/);
      // Nor off the agent's model allow-list, which the gateway would hold each call to.
      const unlisted = await api('POST', '/api/conversations', {
        agent_id: oc.body.data.id,
        model: 'anthropic/claude-opus-4-1',
      });
      assert.deepEqual([unlisted.status, unlisted.body.error], [422, 'model_not_allowed']);
      assert.match(unlisted.body.message, /not on agent oc's model allow-list/);
      assert.equal((await api('GET', '/api/conversations')).body.data.length, before);

      // A live conversation: limit > 1000 is refused; 422 no_agent after its agent is deleted.
      const c1 = (await api('POST', '/api/conversations', { agent_id: agent.id })).body.data;
      // Without a model of its own it shows its agent's, in the list pages too.
      assert.equal(c1.model, 'fountain/demo');
      const paged = await api('GET', '/api/conversations?limit=5');
      assert.equal(paged.body.data.find((c: Json) => c.id === c1.id)?.model, 'fountain/demo');
      const big = await api('GET', `/api/conversations/${c1.id}/events?limit=1001`);
      assert.equal(big.status, 422);
      const s1 = openStream(`${srv.url}/api/conversations/${c1.id}/stream`, key);
      await s1.stage('provision', 'done');
      s1.close();
      const unknownReq = await api('POST', `/api/conversations/${c1.id}/requests/7.0123456789abcdef`, {
        option_id: 'a',
      });
      assert.deepEqual([unknownReq.status, unknownReq.body.error], [404, 'not_found']);
      assert.equal((await api('DELETE', `/api/agents/${agent.id}`)).status, 204);
      const orphan = await api('POST', `/api/conversations/${c1.id}/prompts`, { prompt: 'hi' });
      assert.deepEqual([orphan.status, orphan.body.error], [422, 'no_agent']);
      assert.equal((await api('GET', `/api/conversations/${c1.id}`)).body.data.model, null);
      assert.equal((await api('DELETE', `/api/conversations/${c1.id}`)).status, 204);
      assert.equal((await api('GET', `/api/conversations/${c1.id}`)).status, 404);

      // 503 runner_offline with Retry-After when the sandbox's runner is gone.
      const agent2 = (await api('POST', '/api/agents', { name: 'offline', runtime: 'demo', model: 'fountain/demo' }))
        .body.data;
      const c2 = (await api('POST', '/api/conversations', { agent_id: agent2.id })).body.data;
      const s2 = openStream(`${srv.url}/api/conversations/${c2.id}/stream`, key);
      await s2.stage('provision', 'done');
      s2.close();
      await runner.stop();
      await until(
        async () => !(await api('GET', `/api/conversations/${c2.id}`)).body.data.sandbox.runner.online || null,
        'the runner to go offline',
      );
      const offline = await api('POST', `/api/conversations/${c2.id}/prompts`, { prompt: 'anyone?' });
      assert.deepEqual([offline.status, offline.body.error], [503, 'runner_offline']);
      assert.equal(offline.headers.get('retry-after'), '30');
      const stillIdle = await api('GET', `/api/conversations/${c2.id}`);
      assert.equal(stillIdle.body.data.status, 'idle');
    });
  });
}
