/**
 * Warm pools end to end: the real server, a real `fountain runner` child (process backend) and the demo
 * agent. A pooled conversation answers its first prompt on a sandbox that existed before it was asked
 * for; the pool refills, counts toward the account's limits, is never another account's, is drained
 * when its agent changes, and a restart leaves no sandbox outside a row.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { acceptRunnerSocket } from '../src/providers/runner/index.ts';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { call, type Json } from './helpers/http.ts';

interface Member {
  id: string;
  status: string;
  sandbox_name: string;
  sandbox_status: string;
  pool_key: string;
}

describe('warm pools with a real runner and the demo agent', { timeout: 600_000 }, () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let other: RunnerChild | undefined;
  let agentId: string;
  const root = () => join(tmp, 'sandboxes');
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const boot = (port: number) =>
    startServer({
      dataDir: join(tmp, 'data'),
      port,
      env: {},
      acceptRunnerSocket,
      engine: { poolIntervalMs: 500, queuePollMs: 100 },
    });
  /** The sandboxes on the runner's disk: what exists, whatever the rows say. */
  const onDisk = (dir = root()): string[] =>
    existsSync(dir)
      ? readdirSync(dir)
          .filter((d) => !d.startsWith('.'))
          .sort()
      : [];
  const rows = async <T>(q: ReturnType<typeof sql>): Promise<T[]> =>
    ((await srv.database.db.execute(q)) as unknown as { rows: T[] }).rows;
  const members = (agent: string) =>
    rows<Member>(sql`SELECT c.id, c.status, s.name AS sandbox_name, s.status AS sandbox_status, c.pool_key
      FROM conversations c JOIN sandboxes s ON s.id = c.sandbox_id
      WHERE c.pool_agent_id = ${agent} AND c.status IN ('pending', 'idle', 'running') ORDER BY c.inserted_at`);
  /** Waits for `n` members of the agent, all provisioned (idle, sandbox ready). */
  const ready = (agent: string, n: number, not: readonly string[] = []) =>
    until(
      async () => {
        const m = await members(agent);
        return m.length === n &&
          m.every((x) => x.status === 'idle' && x.sandbox_status === 'ready' && !not.includes(x.id))
          ? m
          : undefined;
      },
      `${n} ready warm pool member(s) of ${agent}`,
      120_000,
    );
  const answered = (conv: string, turns = 1) =>
    until(
      async () => {
        const t = (await api('GET', `/api/conversations/${conv}/turns`)).body.data as Json[];
        return t.length === turns && t.every((x) => x.status === 'completed') ? t : undefined;
      },
      `${conv}'s turn ${turns} completed`,
      120_000,
    );
  const onlineRunner = () =>
    until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'the runner to come online',
      60_000,
    );

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-pool-')));
    srv = await boot(0);
    key = srv.bootstrapKey!;
    runner = startRunnerChild({
      name: 'p',
      root: root(),
      baseUrl: srv.url,
      apiKey: key,
      home: tmp,
      extraArgs: ['--reconnect-base-ms', '100'],
    });
    await onlineRunner();
  });
  after(async () => {
    await other?.stop();
    await runner?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('refuses a warm_pool out of bounds with its own code', async () => {
    for (const bad of [-1, 11, 1.5, '1']) {
      const r = await api('POST', '/api/agents', {
        name: 'bad',
        runtime: 'demo',
        model: 'fountain/demo',
        warm_pool: bad,
      });
      assert.deepEqual([r.status, r.body.error], [422, 'warm_pool_invalid'], JSON.stringify(r.body));
      assert.match(r.body.errors.warm_pool[0], /from 0 to 10/);
    }
  });

  it('answers the first prompt on a sandbox provisioned before it, hidden until taken, and refills', async () => {
    const created = await api('POST', '/api/agents', {
      name: 'demo',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { default: 'auto_allow' },
      warm_pool: 1,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.data.warm_pool, 1);
    agentId = created.body.data.id;
    const [member] = await ready(agentId, 1);
    // A member is no conversation of the user's yet.
    assert.deepEqual((await api('GET', '/api/conversations')).body.data, []);
    assert.equal((await api('GET', `/api/agents/${agentId}`)).body.data.conversation_count, 0);
    const before = onDisk();
    assert.ok(before.includes(member!.sandbox_name), `${member!.sandbox_name} on disk: ${before}`);

    const conv = await api('POST', '/api/conversations', { agent_id: agentId, prompt: 'hello pool', title: 'pooled' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    const c = conv.body.data;
    assert.equal(c.id, member!.id, 'the conversation is the pool member');
    assert.equal(c.title, 'pooled');
    assert.equal(c.sandbox.name, member!.sandbox_name, 'on the sandbox that existed before the request');
    const [turn] = await answered(c.id);
    assert.equal(turn!.prompt, 'hello pool');
    // Nothing was provisioned for the prompt: every provision stage event precedes the turn.
    const events = (await api('GET', `/api/conversations/${c.id}/events?after=0&limit=1000`)).body.data as Json[];
    const firstOfTurn = events.find((e) => e.turn_id === turn!.id);
    assert.ok(firstOfTurn, 'the turn has events');
    const provisions = events.filter((e) => e.stage === 'provision');
    assert.ok(provisions.length > 0, 'the member was provisioned (at fill time)');
    assert.ok(
      provisions.every((e) => e.id < firstOfTurn.id),
      `no provisioning after the prompt: ${JSON.stringify(provisions)}`,
    );
    // The conversation is the user's now; the pool made another member on a new sandbox.
    const listed = (await api('GET', '/api/conversations')).body.data as Json[];
    assert.deepEqual(
      listed.map((x) => x.id),
      [c.id],
    );
    const [next] = await ready(agentId, 1, [c.id]);
    assert.ok(!before.includes(next!.sandbox_name), 'the refill is a new sandbox');
  });

  it('drains the pool when the agent changes: the stale member and its sandbox go', async () => {
    const [stale] = await ready(agentId, 1);
    const changed = await api('PATCH', `/api/agents/${agentId}`, { system: 'You are the changed demo.' });
    assert.equal(changed.status, 200, JSON.stringify(changed.body));
    const [fresh] = await ready(agentId, 1, [stale!.id]);
    assert.notEqual(fresh!.pool_key, stale!.pool_key);
    await until(() => !onDisk().includes(stale!.sandbox_name) || undefined, 'the stale sandbox destroyed', 60_000);
    const [row] = await rows<{ status: string }>(sql`SELECT status FROM conversations WHERE id = ${stale!.id}`);
    assert.equal(row!.status, 'terminated');
  });

  it("counts pooled sandboxes toward the account's limits", async () => {
    await ready(agentId, 1);
    const account = (await api('GET', '/api/account')).body.data;
    // The pooled conversation from before and the member: two sandboxes, the limit.
    const limited = await api('PUT', `/api/admin/accounts/${account.id}/limits`, { max_sandboxes: 2 });
    assert.equal(limited.status, 200, JSON.stringify(limited.body));
    const limits = (await api('GET', '/api/account/limits')).body.data;
    assert.equal(limits.sandboxes, 2, JSON.stringify(limits));
    const plain = await api('POST', '/api/agents', { name: 'plain', runtime: 'demo', model: 'fountain/demo' });
    const waiting = await api('POST', '/api/conversations', { agent_id: plain.body.data.id });
    assert.equal(waiting.status, 201, JSON.stringify(waiting.body));
    assert.equal(waiting.body.data.queue?.position, 1, 'it waits: the pooled sandbox holds the second slot');
    assert.equal((await api('POST', `/api/conversations/${waiting.body.data.id}/terminate`)).status, 204);
    // On another model than the agent's it does not take the member (launched with the agent's): it waits too.
    const otherModel = await api('POST', '/api/conversations', { agent_id: agentId, model: 'fountain/demo-other' });
    assert.equal(otherModel.status, 201, JSON.stringify(otherModel.body));
    assert.deepEqual([otherModel.body.data.queue?.position, otherModel.body.data.model], [1, 'fountain/demo-other']);
    assert.equal((await api('POST', `/api/conversations/${otherModel.body.data.id}/terminate`)).status, 204);
    // A conversation of the pooled agent (on its model, named or not) needs no new sandbox: it takes the member at the limit.
    const [member] = await members(agentId);
    const taken = await api('POST', '/api/conversations', {
      agent_id: agentId,
      prompt: 'taken at the limit',
      model: 'fountain/demo',
    });
    assert.equal(taken.body.data.id, member!.id);
    assert.equal(taken.body.data.model, 'fountain/demo');
    assert.equal(taken.body.data.queue, null);
    await answered(taken.body.data.id);
    // The pool does not refill past the account's limit.
    await srv.engine.poolSettled();
    assert.deepEqual(await members(agentId), []);
    assert.equal((await api('PUT', `/api/admin/accounts/${account.id}/limits`, { max_sandboxes: null })).status, 200);
    await ready(agentId, 1);
  });

  it("never gives one account's member to another", async () => {
    const created = await api('POST', '/api/admin/accounts', { name: 'someone else' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const otherKey: string = created.body.data.key.key;
    const otherRoot = join(tmp, 'other-sandboxes');
    other = startRunnerChild({ name: 'o', root: otherRoot, baseUrl: srv.url, apiKey: otherKey, home: tmp });
    const theirs = (method: string, path: string, body?: unknown) => call(srv.url, otherKey, method, path, body);
    await until(
      async () => ((await theirs('GET', '/api/runners')).body.data as Json[]).some((r) => r.online),
      'their runner online',
      60_000,
    );
    // Their agent has no pool: its conversation is provisioned on their runner, ours stays in our pool.
    const [mine] = await ready(agentId, 1);
    const agent = await theirs('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' });
    const foreign = await theirs('POST', '/api/conversations', { agent_id: agentId, prompt: 'steal' });
    assert.equal(foreign.status, 404, 'our agent is not theirs');
    const conv = await theirs('POST', '/api/conversations', { agent_id: agent.body.data.id, prompt: 'mine' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    assert.notEqual(conv.body.data.id, mine!.id);
    await until(async () => {
      const t = (await theirs('GET', `/api/conversations/${conv.body.data.id}/turns`)).body.data as Json[];
      return t[0]?.status === 'completed' || undefined;
    }, 'their turn');
    assert.ok(onDisk(otherRoot).includes(conv.body.data.sandbox.name));
    assert.deepEqual(
      (await members(agentId)).map((m) => m.id),
      [mine!.id],
    );
  });

  it('survives a restart with no sandbox outside a row, and the kept member still serves', async () => {
    const [kept] = await ready(agentId, 1);
    const port = srv.port;
    await srv.stop();
    srv = await boot(port);
    await onlineRunner();
    await srv.engine.poolSettled();
    assert.deepEqual(
      (await members(agentId)).map((m) => m.id),
      [kept!.id],
      'the member was kept, not made again',
    );
    const conv = await api('POST', '/api/conversations', { agent_id: agentId, prompt: 'after the restart' });
    assert.equal(conv.body.data.id, kept!.id);
    await answered(kept!.id);
    await ready(agentId, 1, [kept!.id]);
    // Every sandbox on the runner's disk belongs to a row that still holds it.
    const held = (
      await rows<{ name: string }>(
        sql`SELECT s.name FROM sandboxes s JOIN conversations c ON c.sandbox_id = s.id
          WHERE c.account_id = (SELECT account_id FROM agents WHERE id = ${agentId})
          AND s.status NOT IN ('terminated', 'failed')`,
      )
    ).map((r) => r.name);
    await until(
      () => onDisk().every((d) => held.includes(d)) || undefined,
      `no orphan sandbox: disk ${onDisk()} rows ${held}`,
      30_000,
    );
  });
});
