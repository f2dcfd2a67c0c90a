/**
 * The per-conversation sandbox token and the team MCP, with the real server, a real `fountain runner`
 * child and the demo agent: what the agent process sees, what the token may and may not call, the
 * rotation on relaunch, the MCP injected into session/new and session/load, and the MCP end to end.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import WebSocket from 'ws';
import { startRunnerChild, until, type RunnerChild } from '../src/server/conversations/testing.ts';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { apiKeys } from '../src/server/store/schema.ts';
import type { EngineDb } from '../src/server/store/engine-db.ts';
import { call, messageTeammate, openStream, stageIs, type Json, type Stream } from './helpers/http.ts';

/** A runner WebSocket dial: the status and body of the refusal. */
function dialRunner(base: string, key: string): Promise<{ status: number; body: Json }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/runners/ws?name=sneaky`, {
      headers: { authorization: `Bearer ${key}` },
    });
    ws.on('open', () => {
      ws.close();
      reject(new Error('the upgrade was accepted'));
    });
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    ws.on('error', (e) => reject(e));
  });
}

/** Finds a file by name anywhere under `root` (the runner's sandbox directories). */
function findFile(root: string, name: string): string | undefined {
  const hit = (readdirSync(root, { recursive: true }) as string[]).find((p) => p === name || p.endsWith(`/${name}`));
  return hit === undefined ? undefined : join(root, hit);
}

describe('sandbox token and team MCP with a real runner and the demo agent', () => {
  let tmp: string;
  let srv: RunningServer;
  let key: string;
  let runner: RunnerChild;
  let stream: Stream;
  let alpha: string;
  let beta: string;
  let alphaConv: string;
  let betaConv: string;
  let token1: string;
  let rpcId = 0;
  const api = (method: string, path: string, body?: unknown) => call(srv.url, key, method, path, body);
  const db = () => srv.database.db as unknown as EngineDb;
  const sandboxes = () => join(tmp, 'sandboxes');
  const startRunner = () =>
    startRunnerChild({ name: 't', root: sandboxes(), baseUrl: srv.url, apiKey: key, home: tmp });
  const runnerOnline = (online: boolean) =>
    until(
      async () => ((await api('GET', '/api/runners')).body.data as Json[]).some((r) => r.online) === online,
      `runner online=${online}`,
      60_000,
    );
  const makeAgent = async (name: string) => {
    const r = await api('POST', '/api/agents', {
      name,
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { execute: 'ask' },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.data.id as string;
  };
  /** Messages a teammate; each held permission request is first tried with `spriteAnswer` (if given), then allowed with the full key. */
  const message = async (
    agentId: string,
    conversationId: string,
    prompt: string,
    spriteAnswer?: string,
  ): Promise<string> => {
    const from = stream.events.length;
    const r = await messageTeammate(srv.url, key, agentId, prompt);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    if (prompt.startsWith('run:')) {
      const asked = await stream.wait(
        stageIs('permission', 'started', agentId),
        `permission request for ${prompt}`,
        from,
      );
      const requestId = JSON.parse(asked.data.data).request_id as string;
      const path = `/api/conversations/${conversationId}/requests/${encodeURIComponent(requestId)}`;
      if (spriteAnswer) {
        const refused = await call(srv.url, spriteAnswer, 'POST', path, { option_id: 'allow_once' });
        assert.deepEqual([refused.status, refused.body.error], [403, 'sprite_may_not_answer']);
      }
      const ok = await api('POST', path, { option_id: 'allow_once' });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
    }
    const done = await stream.wait(stageIs('turn', 'done', agentId), `turn/done for ${prompt}`, from);
    return reply(conversationId, JSON.parse(done.data.data).turn_id as string);
  };
  /** The agent's reply in a turn: its message chunks, joined. */
  const reply = async (conversationId: string, turnId: string): Promise<string> => {
    const read = await api('GET', `/api/conversations/${conversationId}/events?streams=acp&limit=1000`);
    let text = '';
    for (const e of read.body.data as Json[]) {
      if (e.turn_id !== turnId) continue;
      const u = JSON.parse(e.data).params?.update;
      if (u?.sessionUpdate === 'agent_message_chunk') text += u.content.text;
    }
    return text;
  };
  /** Has the agent write its FOUNTAIN_* environment to a file in its sandbox, and reads it from disk. */
  const agentEnv = async (file: string, spriteAnswer?: string) => {
    const js = `require('fs').writeFileSync('${file}', [process.env.FOUNTAIN_TOKEN, process.env.FOUNTAIN_BASE_URL, process.env.FOUNTAIN_CONVERSATION_ID].join(' '))`;
    await message(alpha, alphaConv, `run: node -e "${js}"`, spriteAnswer);
    const path = findFile(sandboxes(), file);
    assert.ok(path && existsSync(path), `the agent wrote ${file}`);
    const [token, baseUrl, conversationId] = readFileSync(path, 'utf8').split(' ');
    return { token: token!, baseUrl: baseUrl!, conversationId: conversationId! };
  };
  const mcp = async (bearer: string, conversationId: string, method: string, params?: unknown) => {
    const res = await fetch(`${srv.url}/api/mcp/team/${conversationId}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${bearer}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, ...(params === undefined ? {} : { params }) }),
    });
    const body = (await res.json()) as Json;
    return { status: res.status, body };
  };
  const tool = async (bearer: string, name: string, args: Record<string, unknown> = {}) => {
    const r = await mcp(bearer, alphaConv, 'tools/call', { name, arguments: args });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.result.isError, false, JSON.stringify(r.body));
    return r.body.result.structuredContent as Json;
  };

  before(async () => {
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-sprite-')));
    srv = await startServer({
      dataDir: join(tmp, 'data'),
      port: 0,
      env: {},
      engine: { idleTimeoutMs: 0, askTimeoutMs: 120_000 },
      sseHeartbeatMs: 300,
    });
    key = srv.bootstrapKey!;
    runner = startRunner();
    await runnerOnline(true);
    stream = openStream(`${srv.url}/api/team/stream`, key);
    alpha = await makeAgent('alpha');
    beta = await makeAgent('beta');
    for (const id of [alpha, beta]) assert.equal((await api('POST', '/api/team', { agent_id: id })).status, 201);
    const roster = (await api('GET', '/api/team')).body.data as Json[];
    alphaConv = roster.find((t) => t.agent_id === alpha).conversation.id;
    betaConv = roster.find((t) => t.agent_id === beta).conversation.id;
  });

  after(async () => {
    stream?.close();
    await runner?.stop();
    await srv?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("a team conversation's agent process gets FOUNTAIN_TOKEN, FOUNTAIN_BASE_URL and FOUNTAIN_CONVERSATION_ID; the key is stored hashed", async () => {
    const env = await agentEnv('env-1');
    assert.match(env.token, /^ftn_[0-9a-f]{64}$/);
    assert.equal(env.baseUrl, srv.url);
    assert.equal(env.conversationId, alphaConv);
    token1 = env.token;
    const rows = await db().select().from(apiKeys).where(eq(apiKeys.conversationId, alphaConv));
    assert.equal(rows.length, 1);
    const row = rows[0]!;
    assert.equal(row.name, `sprite:${alphaConv.slice(0, 8)}`);
    assert.deepEqual(row.scopes, ['sprite']);
    assert.equal(row.keyHash, createHash('sha256').update(token1).digest('hex'));
    assert.ok(!JSON.stringify(row).includes(token1.slice(4)), 'no column holds the plaintext');
    const days = (row.expiresAt!.getTime() - row.createdAt.getTime()) / 86_400_000;
    assert.ok(days > 29.9 && days <= 30.01, `expires in 30 days, got ${days}`);
    // The token never reaches the event log (the command line names only the variable).
    const events = await api('GET', `/api/conversations/${alphaConv}/events?limit=1000`);
    assert.ok(!JSON.stringify(events.body).includes(token1), 'the token is not in any event');
  });

  it('the token calls the API from inside the sandbox, may not answer permission requests, and is refused on keys, runners, account and admin', async () => {
    const js =
      "fetch(process.env.FOUNTAIN_BASE_URL+'/api/conversations/'+process.env.FOUNTAIN_CONVERSATION_ID,{headers:{authorization:'Bearer '+process.env.FOUNTAIN_TOKEN}})" +
      ".then(r=>r.json().then(b=>console.log('inside', r.status, b.data.id)))";
    const answer = await message(alpha, alphaConv, `run: node -e "${js}"`, token1);
    assert.match(answer, new RegExp(`inside 200 ${alphaConv}`));

    const as = (method: string, path: string, body?: unknown) => call(srv.url, token1, method, path, body);
    for (const path of [
      '/api/auth/me',
      `/api/conversations/${alphaConv}`,
      '/api/team',
      '/api/agents',
      `/api/conversations/${alphaConv}/turns`,
    ]) {
      assert.equal((await as('GET', path)).status, 200, path);
    }
    const refusals: Array<[string, string, unknown?]> = [
      ['GET', '/api/auth/api-keys'],
      ['POST', '/api/auth/api-keys', { name: 'escalate' }],
      ['GET', '/api/runners'],
      ['GET', '/api/account'],
      ['PATCH', '/api/account', {}],
      ['POST', '/api/admin/accounts', { email: 'x@example.com' }],
    ];
    for (const [method, path, body] of refusals) {
      const r = await as(method, path, body);
      assert.deepEqual(
        [r.status, r.body.error, r.body.required_scope],
        [403, 'insufficient_scope', 'full'],
        `${method} ${path}`,
      );
    }
    const ws = await dialRunner(srv.url, token1);
    assert.deepEqual([ws.status, ws.body.error], [403, 'insufficient_scope']);
  });

  it('session/new carries the team MCP as an http server with the bearer token', async () => {
    const answer = await message(alpha, alphaConv, 'mcp servers');
    assert.ok(
      answer.includes(
        `- fountain-team: http ${srv.url}/api/mcp/team/${alphaConv} headers: Authorization (bearer = FOUNTAIN_TOKEN)`,
      ),
      answer,
    );
    assert.ok(!answer.includes('ftn_'), 'the header value is never shown');
  });

  it('the team MCP end to end: initialize, tools/list, list_teammates, send, wait, read', async () => {
    const init = await mcp(token1, alphaConv, 'initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'test', version: '1' },
    });
    assert.equal(init.status, 200);
    assert.equal(init.body.result.serverInfo.name, 'fountain-team');
    assert.equal(init.body.result.protocolVersion, '2025-06-18');
    assert.ok(init.body.result.capabilities.tools);
    const note = await fetch(`${srv.url}/api/mcp/team/${alphaConv}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token1}`, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    assert.equal(note.status, 202);

    const list = await mcp(token1, alphaConv, 'tools/list');
    const tools = list.body.result.tools as Json[];
    assert.deepEqual(tools.map((t) => t.name).sort(), [
      'get_teammate',
      'label_conversation',
      'list_teammates',
      'read_teammate',
      'send_to_teammate',
      'wait_for_teammate',
    ]);
    const wait = tools.find((t) => t.name === 'wait_for_teammate');
    assert.equal(wait.inputSchema.properties.timeout_seconds.maximum, 90);
    assert.deepEqual(wait.inputSchema.required, ['agent_id']);

    const mates = (await tool(token1, 'list_teammates')).teammates as Json[];
    assert.deepEqual(mates.map((m) => m.agent_id).sort(), [alpha, beta].sort());
    assert.equal(mates.find((m) => m.agent_id === alpha).you, true);
    const b = mates.find((m) => m.agent_id === beta);
    assert.equal(b.you, false);
    assert.equal(typeof b.presence, 'string', 'presence is the bare state');
    assert.equal(b.presence, 'online');

    // The agent labels its own conversation with its sandbox token; people see the labels through the API.
    const labelled = await tool(token1, 'label_conversation', { labels: ['triage', 'area=mcp'] });
    assert.deepEqual(labelled, { conversation_id: alphaConv, labels: ['area=mcp', 'triage'] });
    assert.deepEqual((await api('GET', `/api/conversations/${alphaConv}`)).body.data.labels, ['area=mcp', 'triage']);

    const got = await tool(token1, 'get_teammate', { agent_id: beta });
    assert.equal(got.conversation_id, betaConv);

    const sent = await tool(token1, 'send_to_teammate', { agent_id: beta, message: 'hello from alpha' });
    assert.deepEqual(sent, { status: 'queued', conversation_id: betaConv });
    const busy = await mcp(token1, alphaConv, 'tools/call', {
      name: 'send_to_teammate',
      arguments: { agent_id: beta, message: 'again' },
    });
    // Either still busy (refused as a tool error) or already done; a busy refusal is an isError result.
    if (busy.body.result.isError) assert.equal(busy.body.result.structuredContent.error, 'conversation_busy');
    let waited: Json;
    for (let i = 0; i < 10; i++) {
      waited = await tool(token1, 'wait_for_teammate', { agent_id: beta, timeout_seconds: 30 });
      if (!waited.timed_out) break;
    }
    assert.equal(waited.timed_out, false);
    assert.equal(waited.presence, 'online');

    const read = await tool(token1, 'read_teammate', { agent_id: beta, turns: 5 });
    assert.ok(read.turns.length >= 1);
    const hello = (read.turns as Json[]).find((t) => t.prompt === 'hello from alpha');
    assert.equal(hello.status, 'completed');
    assert.match(hello.reply, /^You said: hello from alpha/);

    // A teammate held in a permission request is still working: the wait times out and says to call again.
    const from = stream.events.length;
    await tool(token1, 'send_to_teammate', { agent_id: beta, message: 'run: echo held' });
    const asked = await stream.wait(stageIs('permission', 'started', beta), 'beta held in a permission request', from);
    const held = await tool(token1, 'wait_for_teammate', { agent_id: beta, timeout_seconds: 1 });
    assert.deepEqual([held.timed_out, held.presence], [true, 'working']);
    const req = JSON.parse(asked.data.data);
    assert.equal(
      (await api('POST', `/api/conversations/${betaConv}/requests/${req.request_id}`, { option_id: 'allow_once' }))
        .status,
      200,
    );
    for (let i = 0; i < 10 && held.timed_out; i++)
      held.timed_out = (await tool(token1, 'wait_for_teammate', { agent_id: beta })).timed_out;
    assert.equal(held.timed_out, false);
    const ran = await tool(token1, 'read_teammate', { agent_id: beta });
    assert.equal(ran.turns.length, 1);
    assert.match(ran.turns[0].reply, /I ran `echo held`; it exited with code 0/);

    const bad = await mcp(token1, alphaConv, 'tools/call', {
      name: 'wait_for_teammate',
      arguments: { agent_id: beta, timeout_seconds: 91 },
    });
    // MCP 2025-11-25 (SEP-1303): bad tool arguments are a tool error the model can read and correct, not a protocol error.
    assert.equal(bad.body.result.isError, true, JSON.stringify(bad.body));
    assert.match(bad.body.result.content[0].text, /timeout_seconds/);
    const unknown = await mcp(token1, alphaConv, 'tools/call', {
      name: 'get_teammate',
      arguments: { agent_id: '00000000-0000-4000-8000-000000000000' },
    });
    assert.deepEqual([unknown.body.result.isError, unknown.body.result.structuredContent.error], [true, 'not_found']);
    const nope = await mcp(token1, alphaConv, 'resources/list');
    assert.equal(nope.body.error.code, -32601);
    const garbled = await fetch(`${srv.url}/api/mcp/team/${alphaConv}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token1}`, 'content-type': 'application/json' },
      body: '{"jsonrpc": "2.0", "id": 1, "method": ',
    });
    assert.deepEqual([garbled.status, ((await garbled.json()) as Json).error.code], [400, -32700]);
  });

  it("refuses another conversation's token, a non-team conversation, and a stranger", async () => {
    const other = await mcp(token1, betaConv, 'tools/list');
    assert.deepEqual([other.status, other.body.error], [403, 'token_not_for_this_conversation']);
    // A full-scope key of the account may use any team conversation's MCP.
    assert.equal((await mcp(key, betaConv, 'tools/list')).status, 200);

    const solo = await api('POST', '/api/conversations', { agent_id: beta });
    assert.equal(solo.status, 201, JSON.stringify(solo.body));
    const soloId = solo.body.data.id as string;
    const notTeam = await mcp(key, soloId, 'tools/list');
    assert.deepEqual([notTeam.status, notTeam.body.error], [403, 'not_a_team_conversation']);
    assert.equal((await mcp(key, '00000000-0000-4000-8000-000000000000', 'tools/list')).status, 404);
    assert.equal((await mcp(`ftn_${'0'.repeat(64)}`, alphaConv, 'tools/list')).status, 401);

    // A non-team conversation's agent gets no MCP server; terminating it revokes its token.
    await until(
      async () => (await api('GET', `/api/conversations/${soloId}`)).body.data.status === 'idle',
      'the solo conversation to be ready',
      60_000,
    );
    const prompted = await api('POST', `/api/conversations/${soloId}/prompts`, { prompt: 'mcp servers' });
    assert.equal(prompted.status, 200, JSON.stringify(prompted.body));
    const turn = await until(
      async () => {
        const turns = (await api('GET', `/api/conversations/${soloId}/turns`)).body.data as Json[];
        return turns.at(-1)?.status === 'completed' ? turns.at(-1) : undefined;
      },
      'the solo turn',
      60_000,
    );
    assert.equal(await reply(soloId, turn.id), 'I got no MCP servers.');
    assert.equal((await api('POST', `/api/conversations/${soloId}/terminate`)).status, 204);
    const rows = await db().select().from(apiKeys).where(eq(apiKeys.conversationId, soloId));
    assert.ok(
      rows.length >= 1 && rows.every((r) => r.revokedAt !== null),
      'every token of the terminated conversation is revoked',
    );
  });

  it('a sandbox token acts for its conversation only: the rule table of docs/api.md, row by row (issue 22 #6)', async () => {
    const as = (method: string, path: string, body?: unknown) => call(srv.url, token1, method, path, body);
    const no = async (method: string, path: string, body?: unknown) => {
      const r = await as(method, path, body);
      assert.deepEqual(
        [r.status, r.body?.error],
        [403, 'sandbox_token_forbidden'],
        `${method} ${path}: ${JSON.stringify(r.body)}`,
      );
    };
    // Nothing that widens its own authority: agents are the user's.
    await no('PATCH', `/api/agents/${alpha}`, { permission_policy: { default: 'auto_allow' } });
    assert.deepEqual((await api('GET', `/api/agents/${alpha}`)).body.data.permission_policy, { execute: 'ask' });
    await no('POST', '/api/agents', {
      name: 'loose',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { default: 'auto_allow' },
    });
    await no('DELETE', `/api/agents/${beta}`);
    // Nothing outside its tree: a teammate's conversation is read, never driven or ended.
    await no('DELETE', `/api/conversations/${betaConv}`);
    await no('POST', `/api/conversations/${betaConv}/terminate`);
    await no('POST', `/api/conversations/${betaConv}/interrupt`);
    await no('POST', `/api/conversations/${betaConv}/prompts`, { prompt: 'hi' });
    await no('POST', `/api/conversations/${alphaConv}/read`);
    await no('POST', `/api/conversations/${betaConv}/labels`, { labels: ['mine'] });
    await no('DELETE', `/api/conversations/${betaConv}/labels/area`);
    // Its own conversation's labels are its to set (the same as the team MCP's label_conversation).
    const own = await as('POST', `/api/conversations/${alphaConv}/labels`, {
      labels: ['by=agent'],
      remove: ['triage'],
    });
    assert.deepEqual([own.status, own.body.data?.labels], [200, ['area=mcp', 'by=agent']], JSON.stringify(own.body));
    assert.equal((await as('DELETE', `/api/conversations/${alphaConv}/labels/by`)).status, 200);
    await no('GET', '/api/conversations');
    await no('GET', '/api/events/stream');
    // The team's shape and its schedules are the user's.
    await no('POST', '/api/team', { agent_id: alpha });
    await no('PATCH', `/api/team/${beta}`, {});
    await no('DELETE', `/api/team/${beta}`);
    await no('POST', `/api/team/${beta}/conversations`);
    await no('POST', `/api/team/${beta}/schedules`, { cron: '0 * * * *', prompt: 'tick' });
    assert.notEqual((await api('GET', `/api/conversations/${betaConv}`)).body.data.status, 'terminated');
    // It reads its teammates.
    for (const path of [
      `/api/conversations/${betaConv}`,
      `/api/conversations/${betaConv}/turns`,
      `/api/conversations/${betaConv}/events?limit=1`,
      `/api/team/${beta}`,
      '/api/team/schedules',
    ]) {
      assert.equal((await as('GET', path)).status, 200, path);
    }
    // Child conversations: never looser than its own policy (alpha's: execute asks).
    const loose = await api('POST', '/api/agents', {
      name: 'loose',
      runtime: 'demo',
      model: 'fountain/demo',
      permission_policy: { default: 'auto_allow' },
    });
    assert.equal(loose.status, 201);
    const widened = await as('POST', '/api/conversations', {
      agent_id: loose.body.data.id,
      prompt: 'run: echo unasked',
    });
    assert.deepEqual(
      [widened.status, widened.body.error],
      [422, 'permission_policy_widens'],
      JSON.stringify(widened.body),
    );
    assert.match(widened.body.message, /execute would be auto_allow, where the parent's policy says ask/);
    const child = await as('POST', '/api/conversations', { agent_id: alpha, permission_policy: { default: 'ask' } });
    assert.equal(child.status, 201, JSON.stringify(child.body));
    const childId = child.body.data.id as string;
    // Its tree: the child is read and ended with the same token.
    assert.equal((await as('GET', `/api/conversations/${childId}`)).status, 200);
    assert.equal((await as('POST', `/api/conversations/${childId}/terminate`)).status, 204);
    assert.equal((await api('GET', `/api/conversations/${childId}`)).body.data.status, 'terminated');
  });

  it('a relaunch mints a new token and revokes the previous one; session/load carries the MCP with the new token', async () => {
    await runner.stop();
    await runnerOnline(false);
    runner = startRunner();
    await runnerOnline(true);
    const env = await agentEnv('env-2');
    assert.notEqual(env.token, token1);
    assert.equal(env.conversationId, alphaConv);
    const old = await call(srv.url, token1, 'GET', '/api/auth/me');
    assert.deepEqual([old.status, old.body.error], [401, 'api_key_revoked']);
    assert.equal((await call(srv.url, env.token, 'GET', '/api/auth/me')).status, 200);
    assert.equal((await mcp(token1, alphaConv, 'tools/list')).status, 401);
    assert.equal((await mcp(env.token, alphaConv, 'tools/list')).status, 200);
    const live = (await db().select().from(apiKeys).where(eq(apiKeys.conversationId, alphaConv))).filter(
      (r) => r.revokedAt === null,
    );
    assert.equal(live.length, 1, 'one live token per conversation');

    const answer = await message(alpha, alphaConv, 'mcp servers');
    assert.match(answer, /fountain-team: http .* headers: Authorization \(bearer = FOUNTAIN_TOKEN\)/);
  });
});
