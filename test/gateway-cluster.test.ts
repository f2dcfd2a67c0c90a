/**
 * The model gateway on two real server processes sharing one PostgreSQL schema: one conversation's
 * token budget holds across both nodes, one call after the other and with calls racing near the limit.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { and, eq, isNull } from 'drizzle-orm';
import { modelCalls } from '../src/server/gateway/store.ts';
import { until } from '../src/server/conversations/testing.ts';
import { insertConversation } from '../src/server/conversations/store.ts';
import { SandboxTokens } from '../src/server/conversations/sandbox-token.ts';
import { openDatabase, type Database } from '../src/server/store/db.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { call, type Json } from './helpers/http.ts';
import { spawnClusterNode, stopClusterNode, type NodeProcess } from './fixtures/cluster-node-process.ts';

const KEY = `ftn_${randomBytes(32).toString('hex')}`;
const REAL_KEY = `sk-ant-api03-${randomBytes(20).toString('hex')}`;
/** What the model API reports for every call: 90 tokens read, 10 written. */
const CALL_TOKENS = 100;

/**
 * A loopback Anthropic Messages API that answers each call with CALL_TOKENS of usage, holding its
 * answers while `held` is true so the test can keep calls in flight.
 */
class HeldModelApi {
  readonly #server: Server;
  url = '';
  arrived = 0;
  wrongKey = 0;
  held = false;
  #waiting: Array<() => void> = [];

  constructor() {
    this.#server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        this.arrived++;
        if (req.headers['x-api-key'] !== REAL_KEY) this.wrongKey++;
        const answer = () =>
          res.writeHead(200, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              id: `msg_${randomBytes(6).toString('hex')}`,
              type: 'message',
              role: 'assistant',
              model: 'claude-sonnet-4-5',
              content: [{ type: 'text', text: 'ok' }],
              stop_reason: 'end_turn',
              usage: { input_tokens: 90, output_tokens: 10 },
            }),
          );
        if (this.held) this.#waiting.push(answer);
        else answer();
      });
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  release(): void {
    this.held = false;
    for (const answer of this.#waiting.splice(0)) answer();
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((r) => this.#server.close(() => r()));
  }
}

describe('the gateway holds one budget across two server nodes on PostgreSQL', { timeout: 300_000 }, () => {
  const schema = uniqueSchemaName();
  const env = {
    FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL,
    FOUNTAIN_BOOTSTRAP_KEY: KEY,
    // Both nodes open the account's sealed model credential.
    FOUNTAIN_SECRET_KEY: randomBytes(32).toString('hex'),
    FOUNTAIN_NODE_HEARTBEAT_MS: '300',
  };
  let a: NodeProcess;
  let b: NodeProcess;
  let observer: Database;
  const model = new HeldModelApi();
  const db = () => observer.db as unknown as EngineDb;

  before(async () => {
    await model.start();
    [a, b] = await Promise.all([spawnClusterNode('A', schema, env), spawnClusterNode('B', schema, env)]);
    observer = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    const r = await call(a.url, KEY, 'PUT', '/api/account/inference-credentials/anthropic_api_key', {
      value: REAL_KEY,
      base_url: model.url,
    });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  });

  after(async () => {
    model.release();
    await Promise.all([stopClusterNode(a), stopClusterNode(b)]);
    await observer?.close();
    await dropSchema(schema);
    await model.close();
  });

  /** An agent with this token budget per conversation, made on node A, and a conversation of it with a live sandbox token. */
  async function conversation(budget: number): Promise<{ convId: string; token: string }> {
    const agent = await call(a.url, KEY, 'POST', '/api/agents', {
      name: `gw-cluster-${randomBytes(3).toString('hex')}`,
      runtime: 'claude',
      model: 'anthropic/claude-sonnet-4-5',
      model_limits: { tokens_per_conversation: budget },
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const accountId: string = (await call(a.url, KEY, 'GET', '/api/account')).body.data.id;
    const row = await insertConversation(
      db(),
      { accountId, agentId: agent.body.data.id, runtime: 'claude', status: 'idle' },
      { provider: 'runner', name: `runner-${randomBytes(16).toString('hex')}-${randomBytes(4).toString('hex')}` },
    );
    const token = await new SandboxTokens(db(), null).rotate(accountId, row.conversation.id);
    return { convId: row.conversation.id, token };
  }

  const body = JSON.stringify({
    model: 'claude-sonnet-4-5',
    max_tokens: 50,
    messages: [{ role: 'user', content: `hello ${'x'.repeat(200)}` }],
  });
  const send = (node: NodeProcess, token: string) =>
    fetch(`${node.url}/api/gateway/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'content-type': 'application/json' },
      body,
    });

  const rowsOf = async (convId: string): Promise<Json[]> =>
    (await call(a.url, KEY, 'GET', `/api/usage/calls?conversation_id=${convId}&limit=100`)).body.data as Json[];

  it('one call after the other, alternating nodes: the first call past the budget is refused on either', async () => {
    const c = await conversation(350);
    const nodes = [a, b, a, b];
    // 0, 100, 200, 300 tokens used before each: all under 350.
    for (const [i, node] of nodes.entries()) {
      const r = await send(node, c.token);
      assert.equal(r.status, 200, `call ${i + 1}: ${await r.clone().text()}`);
      assert.equal((await r.json()).usage.output_tokens, 10);
    }
    for (const node of [a, b]) {
      const refused = await send(node, c.token);
      assert.equal(refused.status, 403);
      const e = await refused.json();
      assert.equal(e.error.type, 'permission_error');
      assert.match(
        e.error.message,
        /the agent's token budget tokens_per_conversation = 350 is spent \(400 tokens used this conversation\)/,
      );
    }
    // A refused call's row is written after its answer leaves: wait for the six rows, not for a time.
    let rows = await rowsOf(c.convId);
    for (const deadline = Date.now() + 15_000; rows.length < 6 && Date.now() < deadline; rows = await rowsOf(c.convId))
      await new Promise((r) => setTimeout(r, 50));
    const forwarded = rows.filter((r) => r.refused === null);
    assert.equal(forwarded.length, 4);
    assert.equal(
      forwarded.reduce((s, r) => s + r.input_tokens + r.output_tokens, 0),
      4 * CALL_TOKENS,
    );
    assert.deepEqual(
      rows.filter((r) => r.refused !== null).map((r) => r.refused),
      ['agent.tokens_per_conversation', 'agent.tokens_per_conversation'],
    );
    assert.equal(model.wrongKey, 0, 'the model API got the real key on every call');
    const nodesOf = await db()
      .selectDistinct({ node: modelCalls.nodeId })
      .from(modelCalls)
      .where(and(eq(modelCalls.conversationId, c.convId), isNull(modelCalls.refused)));
    assert.deepEqual(new Set(nodesOf.map((r) => r.node)), new Set([a.id, b.id]), 'calls went through both nodes');
  });

  it('calls racing through both nodes near the limit: the budget is passed by at most one call', async () => {
    const budget = 400;
    const c = await conversation(budget);
    // Each call in flight reserves its request's size in tokens (bytes / 4) plus its max_tokens.
    const reserve = Math.ceil(Buffer.byteLength(body) / 4) + 50;
    assert.ok(reserve >= CALL_TOKENS, 'the reservation covers what a call uses');
    // Admitted while nothing is in flight or the reservations in flight stay under the budget.
    const admitted = Math.ceil(budget / reserve);
    assert.ok(admitted * CALL_TOKENS >= budget, 'the admitted calls spend the budget');
    const n = 12;
    model.held = true;
    const arrivedBefore = model.arrived;
    const answers = Array.from({ length: n }, (_, i) => send(i % 2 ? b : a, c.token));
    const settled: Response[] = [];
    for (const p of answers) void p.then((r) => settled.push(r));
    // Every call is either at the model API (held) or answered by the gateway.
    await until(() => model.arrived - arrivedBefore + settled.length === n, 'every call admitted or refused', 60_000);
    const refused = [...settled];
    assert.equal(model.arrived - arrivedBefore, admitted, `${admitted} calls admitted, the rest told to retry`);
    for (const r of refused) {
      assert.equal(r.status, 429);
      const e = await r.json();
      assert.equal(e.error.type, 'rate_limit_error');
      assert.match(e.error.message, /the agent's token budget tokens_per_conversation = 400 is nearly spent/);
      assert.match(e.error.message, /call\(s\) in flight/);
    }
    model.release();
    const done = await Promise.all(answers);
    assert.equal(done.filter((r) => r.status === 200).length, admitted);
    const rows = await until(
      async () => {
        const rs = await rowsOf(c.convId);
        return rs.length === n && rs.every((r) => r.status !== 0) ? rs : null;
      },
      'every call recorded',
      10_000,
    );
    const used = rows.reduce((s, r) => s + r.input_tokens + r.output_tokens, 0);
    assert.equal(used, admitted * CALL_TOKENS);
    assert.ok(used <= budget + CALL_TOKENS, `${used} tokens used: the budget passed by at most one call`);
    assert.deepEqual(new Set(rows.filter((r) => r.refused === null).map((r) => r.api)), new Set(['anthropic']));
    // Spent now, on either node.
    for (const node of [a, b]) {
      const after = await send(node, c.token);
      assert.equal(after.status, 403);
      assert.match((await after.json()).error.message, /tokens_per_conversation = 400 is spent \(400 tokens used/);
    }
  });
});
