/**
 * Conversation labels against a real server: set, replace and remove them through the API, refusals that
 * change nothing (a bad label, the 33rd), the list filtered by labels; the same through the `fountain`
 * CLI as a child process; and the team MCP's `label_conversation` tool on the calling conversation.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { insertAgent } from '../src/server/agents/store.ts';
import { conversations } from '../src/server/store/conversation-schema.ts';
import { TEAM_CHANNEL } from '../src/server/store/team-schema.ts';
import { call, openStream, type Json } from './helpers/http.ts';
import { FOUNTAIN_BIN, startStack, until, type Stack } from './web/harness.ts';

const T = 60_000;

function fountain(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [FOUNTAIN_BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  return new Promise((r) => child.on('exit', (code) => r({ code, out, err })));
}

describe('conversation labels', () => {
  let stack: Stack;
  let env: NodeJS.ProcessEnv;
  /** Three idle conversations (the last on the team channel), no sandbox needed to be labelled or listed. */
  let ids: string[] = [];
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);
  const labelsOf = async (id: string): Promise<string[]> => {
    const r = await api('GET', `/api/conversations/${id}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.data.labels;
  };
  const listed = async (label: string): Promise<string[]> => {
    const r = await api('GET', `/api/conversations?${new URLSearchParams({ label })}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return (r.body.data as Json[]).map((c) => c.id).sort();
  };

  before(async () => {
    stack = await startStack();
    env = {
      FOUNTAIN_API_KEY: stack.apiKey,
      FOUNTAIN_BASE_URL: stack.url,
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_HOME: mkdtempSync(join(tmpdir(), 'fountain-cli-')),
      FOUNTAIN_LOG_FORMAT: 'json',
    };
    const agent = await insertAgent(stack.db, stack.accountId, {
      name: 'labeller',
      description: '',
      system: '',
      runtime: 'demo',
      model: 'fountain/demo',
      sandboxProvider: 'runner',
      permissionPolicy: {},
      metadata: {},
    });
    assert.ok(agent.ok);
    const rows = await stack.db
      .insert(conversations)
      .values(
        [0, 1, 2].map((i) => ({
          accountId: stack.accountId,
          agentId: agent.agent.id,
          title: `chat ${i}`,
          status: 'idle' as const,
          runtime: 'demo' as const,
          channelId: i === 2 ? TEAM_CHANNEL : null,
        })),
      )
      .returning({ id: conversations.id });
    ids = rows.map((r) => r.id);
  });
  after(async () => {
    await stack?.stop();
  });

  it('the API sets, replaces and removes labels; refusals change nothing; the list filters by them', {
    timeout: T,
  }, async () => {
    const [a, b] = ids as [string, string];
    // The account stream tells list readers that a conversation changed.
    const s = openStream(`${stack.url}/api/events/stream`, stack.apiKey);
    await until(() => s.raw().startsWith(': connected') || null, 'the account stream open');
    const set = await api('POST', `/api/conversations/${a}/labels`, { labels: ['bug', 'team=infra', ' area = web '] });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    await s.wait((e) => e.event === 'conversations' && e.data?.reason === 'changed', 'the list change signal');
    s.close();
    assert.deepEqual(set.body.data.labels, ['area=web', 'bug', 'team=infra']);
    assert.deepEqual(await labelsOf(a), ['area=web', 'bug', 'team=infra'], 'the conversation carries them');
    // A key set again takes the new value; removals come in the same change.
    const replaced = await api('POST', `/api/conversations/${a}/labels`, { labels: ['team=web'], remove: ['area'] });
    assert.deepEqual(replaced.body.data.labels, ['bug', 'team=web']);
    assert.equal((await api('POST', `/api/conversations/${b}/labels`, { labels: ['team=infra'] })).status, 200);

    // Bad labels are refused with the rule, and nothing is stored.
    for (const bad of ['', 'has space', 'k=', 'k=a,b', '-lead', 'x'.repeat(64)]) {
      const r = await api('POST', `/api/conversations/${a}/labels`, { labels: ['fine', bad] });
      assert.equal(r.status, 422, `${JSON.stringify(bad)}: ${JSON.stringify(r.body)}`);
      assert.match(r.body.message ?? JSON.stringify(r.body), /key or key=value/);
    }
    assert.deepEqual(await labelsOf(a), ['bug', 'team=web']);
    // At most 32: the 33rd is refused whole.
    const many = Array.from({ length: 31 }, (_, i) => `l${i}`);
    const over = await api('POST', `/api/conversations/${a}/labels`, { labels: many });
    assert.equal(over.status, 422, JSON.stringify(over.body));
    assert.equal(over.body.error, 'too_many_labels');
    assert.deepEqual(await labelsOf(a), ['bug', 'team=web']);
    const full = await api('POST', `/api/conversations/${a}/labels`, { labels: many.slice(0, 30) });
    assert.equal(full.status, 200, 'exactly 32 is allowed');
    assert.equal(full.body.data.labels.length, 32);
    assert.equal(
      (await api('POST', `/api/conversations/${a}/labels`, { labels: many.slice(0, 30), remove: ['l0'] })).status,
      200,
      'setting keys already there does not count twice',
    );
    const trimmed = await api('POST', `/api/conversations/${a}/labels`, { remove: many });
    assert.deepEqual(trimmed.body.data.labels, ['bug', 'team=web']);

    // DELETE one key; a key that is not there is no error.
    const del = await api('DELETE', `/api/conversations/${a}/labels/bug`);
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.deepEqual(del.body.data.labels, ['team=web']);
    assert.equal((await api('DELETE', `/api/conversations/${a}/labels/bug`)).status, 200);
    assert.equal((await api('POST', `/api/conversations/${a}/labels`, { labels: ['bug'] })).status, 200);

    // Not the caller's, or no such conversation.
    const missing = '00000000-0000-4000-8000-000000000000';
    assert.equal((await api('POST', `/api/conversations/${missing}/labels`, { labels: ['x'] })).status, 404);
    assert.equal((await api('POST', '/api/conversations/nope/labels', { labels: ['x'] })).status, 404);

    // The list: a bare key matches any value; several labels must all match.
    assert.deepEqual(await listed('team'), [a, b].sort());
    assert.deepEqual(await listed('team=infra'), [b]);
    assert.deepEqual(await listed('team=web'), [a]);
    assert.deepEqual(await listed('team,bug'), [a]);
    assert.deepEqual(await listed('bug,team=infra'), []);
    assert.deepEqual(await listed('nothing'), []);
    const badFilter = await api('GET', '/api/conversations?label=has%20space');
    assert.equal(badFilter.status, 422, JSON.stringify(badFilter.body));
    const page = await api('GET', '/api/conversations?label=team&limit=1');
    assert.equal(page.body.data.length, 1);
    assert.equal(page.body.meta.has_more, true, 'the filter pages');
  });

  // Six `fountain` processes: on a loaded machine each start takes seconds, so the budget is wider.
  it('the CLI labels a conversation, removes labels, and lists by label', { timeout: 4 * T }, async () => {
    const b = ids[1]!;
    const set = await fountain(['conversations', 'label', b, 'urgent', 'owner=ana'], env);
    assert.equal(set.code, 0, set.err);
    assert.equal(set.out, 'owner=ana\nteam=infra\nurgent\n');
    const rm = await fountain(['conversations', 'label', b, '--remove', 'team', 'urgent'], env);
    assert.equal(rm.code, 0, rm.err);
    assert.equal(rm.out, 'owner=ana\n');
    assert.deepEqual(await labelsOf(b), ['owner=ana']);
    const bad = await fountain(['conversations', 'label', b, 'no good'], env);
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /key or key=value/);
    assert.deepEqual(await labelsOf(b), ['owner=ana'], 'a refused label changes nothing');

    const list = await fountain(['conversations', 'list', '--label', 'owner=ana'], env);
    assert.equal(list.code, 0, list.err);
    const [header, ...rows] = list.out.trimEnd().split('\n');
    assert.match(header!, /^ID\s+AGENT\s+STATUS\s+TURNS\s+TITLE\s+SANDBOX\s+LABELS$/);
    assert.equal(rows.length, 1, list.out);
    assert.match(rows[0]!, new RegExp(`^${b}\\s+labeller\\s+idle\\s+0\\s+chat 1\\s+owner=ana$`));
    const json = await fountain(['conversations', 'list', '--label', 'owner', '--json'], env);
    assert.deepEqual(
      (JSON.parse(json.out) as Json[]).map((c) => [c.id, c.labels]),
      [[b, ['owner=ana']]],
    );
    const show = await fountain(['conversations', 'show', b], env);
    assert.equal(show.code, 0, show.err);
    assert.match(show.out, /\n {2}labels: owner=ana\n/);
  });

  it("the team MCP's label_conversation labels the calling conversation", { timeout: T }, async () => {
    const team = ids[2]!;
    let rpc = 0;
    const mcp = async (conversationId: string, name: string, args: Record<string, unknown>) => {
      const res = await fetch(`${stack.url}/api/mcp/team/${conversationId}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${stack.apiKey}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++rpc, method: 'tools/call', params: { name, arguments: args } }),
      });
      return { status: res.status, body: (await res.json()) as Json };
    };
    const ok = await mcp(team, 'label_conversation', { labels: ['needs-review', 'area=docs'] });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.result.isError, false, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.result.structuredContent, {
      conversation_id: team,
      labels: ['area=docs', 'needs-review'],
    });
    assert.deepEqual(await labelsOf(team), ['area=docs', 'needs-review']);
    const removed = await mcp(team, 'label_conversation', { remove: ['area'] });
    assert.deepEqual(removed.body.result.structuredContent.labels, ['needs-review']);
    // A bad label is a tool error the model can read, and nothing changes.
    const bad = await mcp(team, 'label_conversation', { labels: ['ok', 'not ok'] });
    assert.equal(bad.body.result.isError, true);
    assert.equal(bad.body.result.structuredContent.error, 'invalid_label');
    assert.deepEqual(await labelsOf(team), ['needs-review']);
    // Only a team conversation has the team MCP.
    const notTeam = await mcp(ids[0]!, 'label_conversation', { labels: ['x'] });
    assert.equal(notTeam.status, 403);
    assert.equal(notTeam.body.error, 'not_a_team_conversation');
  });
});
