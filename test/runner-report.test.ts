/**
 * What a runner tells the server about itself, and what its own key lets it be: the real `fountain runner`
 * against a real `fountain server` reports its backend and capabilities, which GET /api/runners, the Runners
 * page and `fountain runners` show; a key from registration dials only as the runner it was issued for.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { startServer, type RunningServer } from '../src/server/start.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../src/server/store/testing.ts';
import { until } from '../src/server/conversations/testing.ts';
import { call } from './helpers/http.ts';

const BIN = new URL('../bin/fountain.js', import.meta.url).pathname;

interface Child {
  child: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
}

interface RunnerRow {
  id: string;
  name: string;
  online: boolean;
  backend: string | null;
  capabilities: string[];
}

describe('a runner reports its backend and capabilities; its own key is tied to its name', () => {
  let server: RunningServer;
  let schema: string;
  let home: string;
  let key: string;
  let cookie: string;
  const children: Child[] = [];

  const fountain = (args: string[], env: Record<string, string> = {}): Child => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: {
        ...process.env,
        FOUNTAIN_HOME: home,
        FOUNTAIN_PROFILE: '',
        FOUNTAIN_LOG_FORMAT: 'json',
        FOUNTAIN_API_KEY: key,
        FOUNTAIN_BASE_URL: server.url,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    const c = {
      child,
      log: () => log,
      exited: new Promise<number | null>((r) => child.once('exit', (code) => r(code))),
    };
    children.push(c);
    return c;
  };
  const rows = async (): Promise<RunnerRow[]> =>
    (await call(server.url, key, 'GET', '/api/runners')).body.data as RunnerRow[];
  const web = async (path: string, init: RequestInit = {}) =>
    fetch(server.url + path, {
      ...init,
      redirect: 'manual',
      headers: { cookie, origin: server.url, ...(init.headers as Record<string, string> | undefined) },
    });

  before(async () => {
    schema = uniqueSchemaName();
    home = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-report-')));
    server = await startServer({
      dataDir: join(home, 'data'),
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
    });
    key = server.bootstrapKey!;
    const signin = await fetch(`${server.url}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
      body: new URLSearchParams({ api_key: key }),
    });
    cookie = (signin.headers.get('set-cookie') ?? '').split(';')[0]!;
    assert.ok(cookie, `signed in (${signin.status})`);
  });
  after(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await server?.stop();
    await dropSchema(schema);
    rmSync(home, { recursive: true, force: true });
  });

  it('the real daemon reports backend and capabilities: API, Runners page and `fountain runners` show them', {
    timeout: 60_000,
  }, async () => {
    const r = fountain(['runner', '--name', 'reporter', '--root', join(home, 'sandboxes-reporter')]);
    const row = await until(
      async () => (await rows()).find((x) => x.name === 'reporter' && x.online),
      `reporter online (${r.log()})`,
      30_000,
    );
    assert.equal(row.backend, 'process');
    assert.deepEqual(row.capabilities, ['suspend', 'attach', 'stdin_write_id']);

    const html = await (await web('/account/runners')).text();
    const tr = /<tr data-runner="reporter"[\s\S]*?<\/tr>/.exec(html)?.[0] ?? '';
    assert.match(tr, /class="runner-backend"><span title="[^"]+">process<\/span>/);
    assert.match(tr, /data-capability="suspend"/);
    assert.match(tr, /data-capability="attach"/);
    assert.doesNotMatch(tr, /data-capability="network_policy"/);

    const listed = fountain(['runners']);
    assert.equal(await listed.exited, 0, listed.log());
    const header = listed.log().split('\n')[0]!;
    assert.match(header, /NAME\s+STATUS\s+BACKEND\s+CAPABILITIES/);
    assert.match(listed.log(), /reporter\s+online\s+process\s+suspend,attach,stdin_write_id\s/);

    r.child.kill('SIGINT');
    assert.equal(await r.exited, 0);
    await until(async () => (await rows()).find((x) => x.name === 'reporter' && !x.online), 'reporter offline');
    // Kept while it is away: the page says what that machine was.
    assert.equal((await rows()).find((x) => x.name === 'reporter')?.backend, 'process');
  });

  it('a daemon that reports neither (an older one) reads "not reported" with the upstream capabilities', {
    timeout: 30_000,
  }, async () => {
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/api/runners/ws?name=old-daemon&version=0.1.0`, {
      headers: { authorization: `Bearer ${key}` },
    });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    try {
      const row = await until(
        async () => (await rows()).find((x) => x.name === 'old-daemon' && x.online),
        'old daemon online',
      );
      assert.equal(row.backend, null);
      assert.deepEqual(row.capabilities, ['suspend', 'attach']);
      const html = await (await web('/account/runners')).text();
      assert.match(/<tr data-runner="old-daemon"[\s\S]*?<\/tr>/.exec(html)?.[0] ?? '', /not reported/);
    } finally {
      ws.close();
    }
  });

  it('a key from registration dials as its own runner only; another name is refused 403 runner_key_mismatch', {
    timeout: 60_000,
  }, async () => {
    // "Add runner" mints through the same call (test/web/runner-onboarding.test.ts drives the page).
    const minted = await call(server.url, key, 'POST', '/api/runners/registrations');
    const token = /--token (ftr_[0-9a-f]{48})$/.exec(minted.body.data.command)?.[1];
    assert.ok(token, 'the install line carries a registration token');
    const registered = await call(server.url, null, 'POST', '/api/runners/register', { token, name: 'owned' });
    assert.equal(registered.status, 201);
    const runnerKey = registered.body.data.api_key as string;

    // The dial: refused with an HTTP status before any upgrade, with a code and a sentence naming both names.
    const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const ws = new WebSocket(`${server.url.replace('http', 'ws')}/api/runners/ws?name=impostor`, {
        headers: { authorization: `Bearer ${runnerKey}` },
      });
      ws.once('open', () => reject(new Error('the impostor was let in')));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      ws.once('error', () => undefined);
    });
    assert.equal(refused.status, 403, refused.body);
    const body = JSON.parse(refused.body) as { error: string; message: string };
    assert.equal(body.error, 'runner_key_mismatch');
    assert.match(body.message, /"owned"/);
    assert.match(body.message, /"impostor"/);

    // The real daemon with that key under another name gives up, saying why.
    const impostor = fountain(['runner', '--name', 'impostor', '--root', join(home, 'sandboxes-impostor')], {
      FOUNTAIN_API_KEY: runnerKey,
    });
    assert.equal(await impostor.exited, 1);
    assert.match(impostor.log(), /runner_key_mismatch/);
    assert.equal(
      (await rows()).find((x) => x.name === 'impostor'),
      undefined,
      'no record for the refused name',
    );

    // Under its own name it connects.
    const own = fountain(['runner', '--name', 'owned', '--root', join(home, 'sandboxes-owned')], {
      FOUNTAIN_API_KEY: runnerKey,
    });
    await until(
      async () => (await rows()).find((x) => x.name === 'owned' && x.online),
      `owned online (${own.log()})`,
      30_000,
    );
    own.child.kill('SIGINT');
    assert.equal(await own.exited, 0);

    // A full-scope key still dials under any name.
    const full = await call(server.url, key, 'GET', '/api/runners/ws?name=anything');
    assert.equal(full.status, 400);
    assert.equal(full.body.error, 'not_a_websocket');
  });
});
