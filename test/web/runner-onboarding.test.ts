/**
 * "Add runner" end to end: the Runners page shows a one-line command with a single-use registration token;
 * running it starts a real runner that trades the token for a runner-scoped key and comes online on the
 * page. That key dials the runner socket and is refused on every other route; the token works once.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseCredentials } from '../../src/cli/credentials.ts';
import { call } from '../helpers/http.ts';
import {
  FOUNTAIN_BIN,
  launchChromium,
  screenshot,
  skipWithoutChromium,
  startStack,
  type Browser,
  type Stack,
} from './harness.ts';

const T = 30_000;
/** The address the server is told other machines reach it at; this test never dials it. */
const PUBLIC_URL = 'https://fountain.example.test';
/** Routes that take no bearer key at all; the runner key is not what they check. */
const PUBLIC = new Set([
  'GET /api/health',
  'GET /api/openapi.json',
  'POST /api/runners/register',
  'GET /api/runners/ws',
]);

describe('runner onboarding through the web UI', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let home: string;
  let runner: ChildProcess | null = null;
  let command: string[] = [];

  const runFountain = (args: string[]) => {
    const child = spawn(process.execPath, [FOUNTAIN_BIN, ...args], {
      env: {
        ...process.env,
        FOUNTAIN_HOME: home,
        FOUNTAIN_API_KEY: '',
        FOUNTAIN_BASE_URL: '',
        FOUNTAIN_PROFILE: '',
        FOUNTAIN_LOG_FORMAT: 'json',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    return { child, exited, err: () => err };
  };

  before(async () => {
    stack = await startStack({ env: { PUBLIC_URL } });
    home = mkdtempSync(join(tmpdir(), 'fountain-onboard-'));
    browser = await launchChromium(T);
  });
  after(async () => {
    runner?.kill('SIGKILL');
    await browser?.close();
    await stack?.stop();
  });

  it('shows a one-line command whose runner comes online with a key of its own', { timeout: 120_000 }, async () => {
    const { page } = browser;
    await page.goto(`${stack.url}/account/runners`);
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Runners' }).waitFor();
    await page.getByRole('button', { name: 'Add runner' }).click();
    const line = (await page.locator('#runner-command').innerText()).trim();
    assert.match(
      line,
      /^curl -fsSL https:\/\/fountain\.example\.test\/runner\/install\.sh \| sh -s -- --token ftr_[0-9a-f]{48}$/,
    );
    assert.equal(page.url(), `${stack.url}/account/runners`, 'Add runner redirects to the page');
    await page.getByRole('button', { name: 'Copy' }).waitFor();
    assert.equal(await page.locator('#runner-loopback').count(), 0, 'no loopback warning with a PUBLIC_URL');
    await screenshot(page, 'runner-add-command.png');
    await page.reload();
    assert.equal((await page.locator('#runner-command').innerText()).trim(), line, 'a reload shows the same token');
    const token = line.split(' ').at(-1)!;
    // The installer's enrollment step is `fountain runner --token` (test/runner-install.test.ts runs the whole line).
    command = ['runner', '--url', stack.url, '--token', token];

    const r = runFountain([
      ...command,
      '--name',
      'onboarded',
      '--root',
      join(home, 'sandboxes'),
      '--log-level',
      'warn',
    ]);
    runner = r.child;
    await page.goto(`${stack.url}/account/runners`);
    await page
      .locator('tr[data-runner="onboarded"] .runner-status', { hasText: 'online' })
      .waitFor({ timeout: 60_000 });
    await screenshot(page, 'runner-onboarded.png');
    assert.deepEqual(browser.consoleErrors, []);

    const creds = parseCredentials(readFileSync(join(home, 'credentials'), 'utf8'), 'credentials');
    const key = creds['runner.onboarded']?.api_key;
    assert.ok(key, 'the runner kept its key');
    assert.notEqual(key, stack.apiKey);
    const listed = await call(stack.url, stack.apiKey, 'GET', '/api/auth/api-keys');
    const mine = (listed.body.data as Array<{ name: string; scopes: string[] }>).find(
      (k) => k.name === 'runner onboarded',
    );
    assert.deepEqual(mine?.scopes, ['runner']);
  });

  it('refuses the runner key on every other route, the web sign-in included', { timeout: 60_000 }, async () => {
    const key = parseCredentials(readFileSync(join(home, 'credentials'), 'utf8'), 'credentials')['runner.onboarded']!
      .api_key!;
    const spec = (await call(stack.url, null, 'GET', '/api/openapi.json')).body as {
      paths: Record<string, Record<string, unknown>>;
    };
    const someId = '00000000-0000-4000-8000-000000000000';
    const checked: string[] = [];
    const allowed: string[] = [];
    for (const [path, ops] of Object.entries(spec.paths)) {
      for (const method of Object.keys(ops)) {
        const route = `${method.toUpperCase()} ${path}`;
        if (PUBLIC.has(route)) continue;
        const url = path.replace(/\{[^}]+\}/g, someId);
        const res = await call(
          stack.url,
          key,
          method.toUpperCase(),
          url,
          ['post', 'put', 'patch'].includes(method) ? {} : undefined,
        );
        checked.push(route);
        // The team MCP's GET and DELETE answer 405 to everyone, key or no key: nothing is done there.
        const refusedToAll = res.status === 405 && res.body?.error === 'method_not_allowed';
        if (!refusedToAll && (res.status !== 403 || res.body?.error !== 'insufficient_scope'))
          allowed.push(`${route} → ${res.status} ${JSON.stringify(res.body).slice(0, 120)}`);
      }
    }
    assert.ok(checked.length > 20, `only ${checked.length} routes in the spec`);
    assert.deepEqual(allowed, []);

    const page = await browser.ctx.newPage();
    await browser.ctx.clearCookies();
    await page.goto(`${stack.url}/signin`);
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'full-scope' }).waitFor();
    await page.close();
  });

  it('the registration token works once', { timeout: 60_000 }, async () => {
    const again = runFountain([...command, '--name', 'second', '--root', join(home, 'sandboxes2')]);
    assert.equal(await again.exited, 2);
    assert.match(again.err(), /registration refused: this registration token was already used or has expired/);
    const direct = await call(stack.url, null, 'POST', '/api/runners/register', {
      token: command.at(-1),
      name: 'third',
    });
    assert.equal(direct.status, 401);
    assert.equal(direct.body.error, 'registration_token_invalid');
  });
});
