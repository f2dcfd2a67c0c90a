/**
 * End to end over the public HTTP API on the `sprites` provider: the real server, the Sprites
 * adapter against the local Sprites stub (real processes), and the demo agent's full cycle.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpritesAdapter } from '../src/providers/sprites/index.ts';
import { until } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { SpritesStub } from './stubs/sprites/server.ts';
import { answerOf as answer, call, type Json } from './helpers/http.ts';

const TOKEN = 'sprites-conversation-token-9c41e2f0';

describe('a conversation with the demo agent on the sprites provider', () => {
  let tmp: string;
  let stub: SpritesStub;
  let srv: RunningServer;
  let key: string;
  const schema = uniqueSchemaName();
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-sprites-e2e-')));
    stub = await SpritesStub.start({ token: TOKEN });
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, SPRITES_TOKEN: TOKEN, SANDBOX_PROVIDER: 'sprites' },
      databaseSchema: schema,
      adapters: [new SpritesAdapter({ token: TOKEN, baseUrl: stub.url })],
      engine: { idleTimeoutMs: 1500, sweepIntervalMs: 250, askTimeoutMs: 60_000 },
    });
    key = srv.bootstrapKey!;
  });

  after(async () => {
    await srv?.stop();
    await stub?.close();
    await dropSchema(schema);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('runs a turn, a permission, idle park, wake with recall, and terminate', async () => {
    const agent = await api('POST', '/api/agents', {
      name: 'demo-sprites',
      runtime: 'demo',
      model: 'fountain/demo',
      system: 'You are the demo.',
      sandbox_provider: 'sprites',
      permission_policy: { default: 'ask' },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));

    const events: Json[] = [];
    let cursor = 0;
    let convId = '';
    const poll = async () => {
      for (;;) {
        const page = await api('GET', `/api/conversations/${convId}/events?after=${cursor}&limit=500`);
        assert.equal(page.status, 200, JSON.stringify(page.body));
        events.push(...page.body.data);
        if (page.body.data.length) cursor = page.body.data.at(-1).id;
        if (!page.body.meta.has_more) return;
      }
    };
    const stage = (name: string, state: string, afterId = 0) =>
      until(
        async () => {
          await poll();
          const failed = events.find((e) => e.id > afterId && e.stage === name && e.state === 'failed');
          if (failed) throw new Error(`${name} failed: ${JSON.stringify(failed)}`);
          return events.find((e) => e.id > afterId && e.stage === name && e.state === state);
        },
        `${name}/${state}`,
        60_000,
      );

    const created = await api('POST', '/api/conversations', { agent_id: agent.body.data.id, prompt: 'remember: blue' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const conv = created.body.data;
    convId = conv.id;
    assert.equal(conv.sandbox.provider, 'sprites');
    const sprite: string = conv.sandbox.name;

    await stage('provision', 'done');
    const t1 = await stage('turn', 'done');
    assert.match(answer(events, t1.turn_id), /I will remember that: blue/);
    // The instructions file landed on the sprite's disk through the adapter's file API.
    const instructions = stub.hostPath(sprite, '/home/sprite/AGENTS.md');
    assert.ok(instructions && readFileSync(instructions, 'utf8').includes('You are the demo.'));
    assert.equal(stub.status(sprite), 'running');

    // A turn that asks permission, answered over HTTP.
    const p2 = await api('POST', `/api/conversations/${convId}/prompts`, { prompt: 'run: echo hi' });
    assert.equal(p2.status, 200, JSON.stringify(p2.body));
    const asked = await stage('permission', 'started', t1.id);
    const request = JSON.parse(asked.data);
    const yes = await api('POST', `/api/conversations/${convId}/requests/${request.request_id}`, {
      option_id: 'allow_once',
    });
    assert.deepEqual([yes.status, yes.body], [200, { ok: true }]);
    const t2 = await stage('turn', 'done', asked.id);
    assert.equal(t2.turn_id, p2.body.turn_id);
    assert.match(answer(events, p2.body.turn_id), /\bhi\b/);

    // Idle: the sweep parks the sprite; Sprites' suspend ends its processes and keeps the disk.
    await stage('sandbox', 'done', t2.id);
    const parked = await api('GET', `/api/conversations/${convId}`);
    assert.equal(parked.body.data.status, 'idle');
    assert.equal(parked.body.data.sandbox.status, 'suspended');
    assert.deepEqual(stub.liveSessionIds(sprite), [], 'suspend ended the agent process');
    // The demo agent keeps its memory under HOME, which the stub maps onto the sprite's disk.
    const memory = stub.hostPath(sprite, '/home/sprite/.fountain-demo/memory.txt');
    assert.ok(memory && readFileSync(memory, 'utf8').includes('blue'), 'the memory is on the sprite disk');

    // Wake: the engine respawns the agent; the memory written before the park survived on the disk.
    const mark = cursor;
    const p3 = await api('POST', `/api/conversations/${convId}/prompts`, { prompt: 'recall' });
    assert.equal(p3.status, 200, JSON.stringify(p3.body));
    await stage('turn', 'done', mark);
    assert.match(answer(events, p3.body.turn_id), /blue/);
    const turns = await api('GET', `/api/conversations/${convId}/turns`);
    assert.deepEqual(
      turns.body.data.map((t: Json) => t.status),
      ['completed', 'completed', 'completed'],
    );

    // Terminate destroys the sprite at the vendor.
    const term = await api('POST', `/api/conversations/${convId}/terminate`);
    assert.equal(term.status, 204);
    await stage('terminate', 'done');
    assert.equal(stub.status(sprite), null, 'the sprite is gone');
    assert.equal((await api('GET', `/api/conversations/${convId}`)).body.data.status, 'terminated');
    assert.ok(!existsSync(instructions));
  });
});
