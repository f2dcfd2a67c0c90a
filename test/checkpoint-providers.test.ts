/**
 * Memory that survives a hosted provider losing the sandbox, per provider against its loopback stub:
 * the demo agent is told a fact, parks, the provider deletes the parked sandbox (its own API's DELETE,
 * after which it answers 404 in its documented shape), and the next prompt provisions a new sandbox,
 * restores the newest checkpoint into it and recalls the fact.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { DaytonaAdapter } from '../src/providers/daytona/adapter.ts';
import { E2BAdapter } from '../src/providers/e2b/index.ts';
import { SpritesAdapter } from '../src/providers/sprites/index.ts';
import type { SandboxAdapter } from '../src/sandbox/index.ts';
import { until } from '../src/server/conversations/testing.ts';
import { type RunningServer, startServer } from '../src/server/start.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../src/server/store/testing.ts';
import { answerOf, call, type Json } from './helpers/http.ts';
import { DaytonaStub } from './stubs/daytona/server.ts';
import { E2BStub } from './stubs/e2b/server.ts';
import { SpritesStub } from './stubs/sprites/server.ts';

/** A provider's stub, its adapter, and how the provider itself deletes a sandbox and reports it gone. */
interface ProviderCase {
  readonly provider: 'e2b' | 'daytona' | 'sprites';
  readonly env: Record<string, string>;
  readonly adapter: SandboxAdapter;
  /** The provider's own DELETE of the sandbox Fountain named `name`. */
  remove(name: string): Promise<void>;
  /** What the provider answers for that sandbox now: status and body, as its API sends them. */
  lookUp(name: string): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

const raw = async (url: string, init: RequestInit) => {
  const r = await fetch(url, init);
  return { status: r.status, body: await r.text() };
};

async function e2bCase(): Promise<ProviderCase> {
  const key = `e2b_ckpt_${randomBytes(8).toString('hex')}`;
  const stub = await E2BStub.start({ apiKey: key });
  // `sprite`, as on Fountain's E2B template: the runtime's HOME is /home/sprite, where checkpoints are taken.
  const adapter = new E2BAdapter({ apiKey: key, baseUrl: stub.apiUrl, sandboxUrl: stub.sandboxUrl, user: 'sprite' });
  // E2B has no names: the adapter keeps Fountain's name in the sandbox's metadata.
  const idOf = (name: string) => stub.list().find((s) => Object.values(s.metadata).includes(name))?.id;
  let lastId = '';
  return {
    provider: 'e2b',
    env: { E2B_API_KEY: key, E2B_BASE_URL: stub.apiUrl, E2B_SANDBOX_URL: stub.sandboxUrl },
    adapter,
    async remove(name) {
      lastId = idOf(name) ?? assert.fail(`the stub holds no sandbox named ${name}`);
      const r = await raw(`${stub.apiUrl}/sandboxes/${lastId}`, { method: 'DELETE', headers: { 'x-api-key': key } });
      assert.equal(r.status, 204, r.body);
    },
    lookUp: () => raw(`${stub.apiUrl}/sandboxes/${lastId}`, { headers: { 'x-api-key': key } }),
    async close() {
      adapter.close();
      await stub.stop();
    },
  };
}

async function daytonaCase(): Promise<ProviderCase> {
  const key = `dtn_ckpt_${randomBytes(8).toString('hex')}`;
  const stub = await DaytonaStub.start({ apiKey: key, inputEofPerWrite: true, exitCodes: 'missing' });
  const auth = { authorization: `Bearer ${key}` };
  return {
    provider: 'daytona',
    env: { DAYTONA_API_KEY: key },
    adapter: new DaytonaAdapter({ apiKey: key, apiUrl: stub.apiUrl, pollIntervalMs: 20, statePollMs: 10 }),
    async remove(name) {
      const r = await raw(`${stub.apiUrl}/sandbox/${name}`, { method: 'DELETE', headers: auth });
      assert.equal(r.status, 200, r.body);
    },
    lookUp: (name) => raw(`${stub.apiUrl}/sandbox/${name}`, { headers: auth }),
    close: () => stub.stop(),
  };
}

async function spritesCase(): Promise<ProviderCase> {
  const token = `sprites-ckpt-${randomBytes(8).toString('hex')}`;
  const stub = await SpritesStub.start({ token });
  const auth = { authorization: `Bearer ${token}` };
  return {
    provider: 'sprites',
    env: { SPRITES_TOKEN: token },
    adapter: new SpritesAdapter({ token, baseUrl: stub.url }),
    async remove(name) {
      const r = await raw(`${stub.url}/v1/sprites/${name}`, { method: 'DELETE', headers: auth });
      assert.equal(r.status, 204, r.body);
    },
    lookUp: (name) => raw(`${stub.url}/v1/sprites/${name}`, { headers: auth }),
    close: () => stub.close(),
  };
}

/** The documented "not found" of each provider, as its stub answers it. */
const GONE: Record<ProviderCase['provider'], RegExp> = {
  e2b: /"code":404/,
  daytona: /Sandbox with ID or name .* not found/,
  sprites: /sprite_not_found/,
};

for (const make of [e2bCase, daytonaCase, spritesCase]) {
  describe(`a conversation whose ${make.name.replace('Case', '')} sandbox the provider deleted goes on from its checkpoint`, () => {
    let tmp: string;
    let pc: ProviderCase;
    let srv: RunningServer;
    let key: string;
    const schema = uniqueSchemaName();
    const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
    const events = async (id: string): Promise<Json[]> =>
      (await api('GET', `/api/conversations/${id}/events?limit=1000`)).body.data as Json[];
    const stage = (id: string, name: string, state: string, afterId = 0) =>
      until(
        async () => (await events(id)).find((e) => e.id > afterId && e.stage === name && e.state === state) ?? null,
        `${name}/${state}`,
        60_000,
      );
    const checkpoints = async (id: string) =>
      (
        (await srv.database.db.execute(
          sql`SELECT turn_id, size FROM checkpoints WHERE conversation_id = ${id} ORDER BY created_at`,
        )) as unknown as { rows: Array<{ turn_id: string | null; size: number }> }
      ).rows;

    before(async () => {
      tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-ckpt-provider-')));
      pc = await make();
      srv = await startServer({
        dataDir: join(tmp, 'data'),
        port: 0,
        env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL, SANDBOX_PROVIDER: pc.provider, ...pc.env },
        databaseSchema: schema,
        adapters: [pc.adapter],
        engine: { idleTimeoutMs: 1500, sweepIntervalMs: 250, askTimeoutMs: 60_000 },
      });
      key = srv.bootstrapKey!;
    });

    after(async () => {
      await srv?.stop();
      await pc?.close();
      await dropSchema(schema);
      rmSync(tmp, { recursive: true, force: true });
    });

    it('provisions a new sandbox, restores the checkpoint and recalls', async () => {
      const agent = await api('POST', '/api/agents', {
        name: `demo-${pc.provider}`,
        runtime: 'demo',
        model: 'fountain/demo',
        sandbox_provider: pc.provider,
      });
      assert.equal(agent.status, 201, JSON.stringify(agent.body));
      const fact = `the vault code is ${randomBytes(3).toString('hex')}`;
      const created = await api('POST', '/api/conversations', {
        agent_id: agent.body.data.id,
        prompt: `remember: ${fact}`,
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const conv = created.body.data;
      const first = await stage(conv.id, 'turn', 'done');
      await until(async () => (await checkpoints(conv.id)).length > 0, 'a checkpoint of turn 1');

      // Idle: the sandbox parks (the provider keeps it), and is checkpointed again as it parks.
      const parked = await stage(conv.id, 'sandbox', 'done', first.id);
      assert.equal(JSON.parse(parked.data).event, 'suspended');
      assert.equal((await api('GET', `/api/conversations/${conv.id}`)).body.data.sandbox.status, 'suspended');
      const kept = await checkpoints(conv.id);
      assert.equal(kept.length, 2, `one after the turn, one at park: ${JSON.stringify(kept)}`);
      assert.equal(kept[1]!.turn_id, first.turn_id, "the park's checkpoint is named after the last turn");

      // The provider drops the parked sandbox (an expiry, a cleanup, a lost host); it answers not found.
      await pc.remove(conv.sandbox.name);
      const gone = await until(async () => {
        const r = await pc.lookUp(conv.sandbox.name);
        return r.status === 404 ? r : null;
      }, 'the provider to answer 404');
      assert.match(gone.body, GONE[pc.provider]);

      const mark = (await events(conv.id)).at(-1).id;
      const p = await api('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'recall' });
      assert.equal(p.status, 200, JSON.stringify(p.body));
      const end = await until(
        async () =>
          (await events(conv.id)).find(
            (e) =>
              e.id > mark &&
              e.stage === 'turn' &&
              e.state !== 'started' &&
              JSON.parse(e.data).turn_id === p.body.turn_id,
          ) ?? null,
        'the recall turn to end',
        120_000,
      );
      const all = await events(conv.id);
      assert.equal(
        end.state,
        'done',
        JSON.stringify(all.filter((e) => e.stage).map((e) => [e.stage, e.state, e.data])),
      );
      assert.match(answerOf(all, p.body.turn_id), new RegExp(fact.split(' ').at(-1)!));
      const restored = all.find((e) => e.id > mark && e.stage === 'sandbox' && JSON.parse(e.data).event === 'restored');
      assert.ok(restored, 'the conversation says it was restored');
      assert.equal(JSON.parse(restored.data).from_turn, first.turn_id);
      assert.ok(
        !all.some((e) => e.stage === 'session' && JSON.parse(e.data).event === 'reset'),
        `the agent loaded its session: no reset: ${JSON.stringify(all.filter((e) => e.stage).map((e) => [e.stage, e.state, e.data]))}`,
      );
      const now = (await api('GET', `/api/conversations/${conv.id}`)).body.data;
      assert.equal(now.sandbox.provider, pc.provider);
      assert.notEqual(now.sandbox.name, conv.sandbox.name, 'a new sandbox');
      assert.equal(now.sandbox.status, 'ready');
    });
  });
}
