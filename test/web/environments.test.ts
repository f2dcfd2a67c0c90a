/**
 * The environments page and the environment choices on the agent form and the agent's "start a
 * conversation" form, in chromium against a real stack: a secret's value never comes back to the page.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { call, type Json } from '../helpers/http.ts';
import { launchChromium, screenshot, skipWithoutChromium, startStack, type Browser, type Stack } from './harness.ts';

const T = 20_000;

describe('environments in the web UI (chromium)', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  const SECRET = 'web-secret-value-7f3a9c';
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    browser = await launchChromium(T);
    page = browser.page;
    await page.goto(`${stack.url}/signin`);
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Team' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('creates an environment with a secret, refuses bad input in words, and never shows the value again', async () => {
    await page.getByRole('link', { name: 'Environments' }).click();
    await page.getByRole('link', { name: 'New environment' }).click();
    await page.getByLabel('Name').fill('web-project');
    await page.getByLabel('Variables').fill('GREETING=hello\nMODE=test');
    await page.getByLabel('Secrets').fill(`API_TOKEN=${SECRET}`);
    await page.getByLabel('Repositories').fill('http://example.test/app.git');
    await page.getByRole('button', { name: 'Create environment' }).click();
    await page.getByRole('alert').filter({ hasText: 'only https' }).waitFor();
    assert.ok(!(await page.content()).includes(SECRET), 'a refused form does not echo the secret');
    await page.getByLabel('Secrets').fill(`API_TOKEN=${SECRET}`);
    await page.getByLabel('Repositories').fill('https://example.test/org/app.git app ref=main');
    await page.getByLabel('Network').selectOption('limited');
    await page.getByLabel('Allowed hosts').fill('example.test');
    await page.getByRole('button', { name: 'Create environment' }).click();
    await page.getByRole('cell', { name: 'web-project', exact: true }).waitFor();
    await page.getByRole('cell', { name: 'limited (example.test)' }).waitFor();
    await page.getByRole('link', { name: 'Edit web-project' }).click();
    await page.getByText('Stored: API_TOKEN.').waitFor();
    assert.ok(!(await page.content()).includes(SECRET), 'the edit page shows the secret name only');
    assert.equal(
      await page.getByLabel('Repositories').inputValue(),
      'https://example.test/org/app.git /home/sprite/app ref=main',
    );
    const [env] = (await api('GET', '/api/environments')).body.data as Json[];
    assert.deepEqual(
      [env.name, env.secret_keys, env.env_vars],
      ['web-project', ['API_TOKEN'], { GREETING: 'hello', MODE: 'test' }],
    );
    await page.setViewportSize({ width: 390, height: 900 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `the edit page is ${overflow}px wider than a phone`);
    await screenshot(page, '390_environment_edit.png');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it("sets an agent's environment and starts a conversation in another one it allows", async () => {
    const other = await api('POST', '/api/environments', { name: 'other-env' });
    assert.equal(other.status, 201);
    await page.goto(`${stack.url}/agents/new`);
    await page.getByLabel('Name').fill('Env agent');
    await page.getByLabel('Runtime').selectOption('demo');
    await page.getByLabel('Model').fill('fountain/demo');
    await page.getByLabel('Environment', { exact: true }).selectOption({ label: 'web-project (limited network)' });
    await page.getByRole('button', { name: 'Create agent' }).click();
    // A limited environment on a placement that cannot enforce it is saved, and the edit page says why it would be refused.
    await page.getByRole('heading', { name: 'Edit Env agent' }).waitFor();
    await page.locator('#agent_warnings .notice[data-code="backend_lacks_network_policy"]').waitFor();
    const agent = ((await api('GET', '/api/agents')).body.data as Json[]).find((a) => a.name === 'Env agent');
    const [envId] = ((await api('GET', '/api/environments')).body.data as Json[])
      .filter((e) => e.name === 'web-project')
      .map((e) => e.id);
    assert.equal(agent.environment_id, envId);
    await page.goto(`${stack.url}/agents/${agent.id}/edit`);
    assert.equal(await page.getByLabel('Environment', { exact: true }).inputValue(), envId);
    await page.getByLabel('Environment for this conversation').selectOption({ label: 'other-env' });
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await page.waitForURL(/\/conversations\//, { timeout: T });
    const convId = new URL(page.url()).pathname.split('/').at(-1)!;
    const conv = await api('GET', `/api/conversations/${convId}`);
    assert.equal(conv.body.data.environment_id, other.body.data.id);
  });
});
