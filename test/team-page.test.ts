/**
 * The web Team page and `GET /api/team` agree: the page's members are the API's team (an agent joins with
 * "Add to team" or `POST /api/team`), the account's other agents are listed apart, and a member's message
 * from the page goes to its team conversation. A real server on PostgreSQL and a real runner.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { until } from '../src/server/conversations/testing.ts';
import { call } from './helpers/http.ts';

const BIN = new URL('../bin/fountain.js', import.meta.url).pathname;

describe('the Team page lists the team GET /api/team lists', () => {
  let server: RunningServer;
  let schema: string;
  let home: string;
  let key: string;
  let cookie: string;
  let runner: ChildProcess;
  const agentIds: Record<string, string> = {};

  const web = (path: string, init: RequestInit = {}) =>
    fetch(server.url + path, {
      ...init,
      redirect: 'manual',
      headers: { cookie, origin: server.url, ...(init.headers as Record<string, string> | undefined) },
    });
  /** Agent names in a section of the Team page, in page order. */
  const section = (html: string, id: 'members' | 'others'): string[] => {
    const start = html.indexOf(`<div class="grid" id="${id}">`);
    if (start < 0) return [];
    const end = id === 'members' ? html.indexOf('id="team-others"', start) : html.length;
    return [...html.slice(start, end < 0 ? html.length : end).matchAll(/<h3 id="mate-name-[^"]+">([^<]+)<\/h3>/g)].map(
      (m) => m[1]!,
    );
  };
  const teamNames = async (): Promise<string[]> =>
    ((await call(server.url, key, 'GET', '/api/team')).body.data as Array<{ agent: { name: string } }>)
      .map((t) => t.agent.name)
      .sort();

  before(async () => {
    schema = uniqueSchemaName();
    home = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-teampage-')));
    server = await startServer({
      dataDir: join(home, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
    });
    key = server.bootstrapKey!;
    runner = spawn(
      process.execPath,
      [BIN, 'runner', '--name', 'team-runner', '--root', join(home, 'sandboxes'), '--log-level', 'warn'],
      {
        env: {
          ...process.env,
          FOUNTAIN_HOME: home,
          FOUNTAIN_PROFILE: '',
          FOUNTAIN_API_KEY: key,
          FOUNTAIN_BASE_URL: server.url,
          FOUNTAIN_LOG_FORMAT: 'json',
        },
        stdio: 'ignore',
      },
    );
    await until(
      async () =>
        ((await call(server.url, key, 'GET', '/api/runners')).body.data as Array<{ online: boolean }>).some(
          (r) => r.online,
        ),
      'the runner online',
      30_000,
    );
    for (const name of ['alpha', 'beta']) {
      const r = await call(server.url, key, 'POST', '/api/agents', {
        name,
        runtime: 'demo',
        model: 'fountain/demo',
        permission_policy: { default: 'auto_allow' },
      });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      agentIds[name] = r.body.data.id;
    }
    const signin = await fetch(`${server.url}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
      body: new URLSearchParams({ api_key: key }),
    });
    cookie = (signin.headers.get('set-cookie') ?? '').split(';')[0]!;
  });
  after(async () => {
    runner?.kill('SIGINT');
    await new Promise((r) => (runner.exitCode !== null ? r(null) : runner.once('exit', r)));
    await server?.stop();
    await dropSchema(schema);
    rmSync(home, { recursive: true, force: true });
  });

  it("before anyone joins: the API team is empty and so is the page's, every agent listed apart", async () => {
    assert.deepEqual(await teamNames(), []);
    const html = await (await web('/')).text();
    assert.deepEqual(section(html, 'members'), []);
    assert.match(html, /id="no-members"/);
    assert.deepEqual(section(html, 'others').sort(), ['alpha', 'beta']);
  });

  it('an agent added through the API, then one through the page: both lists say the same', {
    timeout: 60_000,
  }, async () => {
    assert.equal((await call(server.url, key, 'POST', '/api/team', { agent_id: agentIds.alpha })).status, 201);
    let html = await (await web('/')).text();
    assert.deepEqual(section(html, 'members'), await teamNames());
    assert.deepEqual(section(html, 'others'), ['beta']);

    const joined = await web(`/team/${agentIds.beta}/join`, { method: 'POST' });
    assert.equal(joined.status, 303);
    assert.deepEqual(await teamNames(), ['alpha', 'beta']);
    html = await (await web('/')).text();
    assert.deepEqual(section(html, 'members').sort(), ['alpha', 'beta']);
    assert.deepEqual(section(html, 'others'), []);
    assert.doesNotMatch(html, /Add alpha to the team/);
  });

  it("a member's message from the page goes to its team conversation", { timeout: 60_000 }, async () => {
    const teamConv = (await call(server.url, key, 'GET', `/api/team/${agentIds.alpha}`)).body.data.conversation
      .id as string;
    const sent = await web(`/team/${agentIds.alpha}/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ prompt: 'hello team' }),
    });
    assert.equal(sent.status, 303, await sent.text());
    assert.equal(sent.headers.get('location'), `/conversations/${teamConv}`);
    const turns = await until(
      async () => {
        const t = (await call(server.url, key, 'GET', `/api/conversations/${teamConv}/turns`)).body.data as Array<{
          prompt: string;
          status: string;
        }>;
        return t.find((x) => x.prompt === 'hello team' && x.status === 'completed');
      },
      'the turn in the team conversation',
      45_000,
    );
    assert.ok(turns);
  });
});
