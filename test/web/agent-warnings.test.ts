/**
 * The agent form's warnings in chromium against a real stack and a real process-backend runner (which
 * cannot enforce a network policy): a limited environment on that runner is warned about before saving.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { call } from '../helpers/http.ts';
import {
  launchChromium,
  RUNNER_NAME,
  screenshot,
  skipWithoutChromium,
  startStack,
  type Browser,
  type Stack,
} from './harness.ts';

const T = 20_000;

describe('the agent form warnings in chromium', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    const env = await call(stack.url, stack.apiKey, 'POST', '/api/environments', {
      name: 'locked',
      networking_type: 'limited',
      networking_config: { allowed_hosts: ['example.test'] },
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    browser = await launchChromium(T);
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('shows backend_lacks_network_policy before saving, and again after', { timeout: 60_000 }, async () => {
    const { page } = browser;
    await page.goto(`${stack.url}/agents/new`);
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    assert.equal(await page.locator('#agent_warnings .notice').count(), 0, 'no warning without an environment');
    await page.getByLabel('Name').fill('locked-down');
    await page.getByLabel('Model').fill('fountain/demo');
    await page.getByLabel('Runner', { exact: true }).selectOption({ label: `${RUNNER_NAME} (online)` });
    await page.getByLabel('Environment', { exact: true }).selectOption({ label: 'locked (limited network)' });
    const warning = page.locator('#agent_warnings .notice[data-code="backend_lacks_network_policy"]');
    await warning
      .filter({ hasText: /locked/ })
      .filter({ hasText: new RegExp(RUNNER_NAME) })
      .waitFor();
    assert.equal((await call(stack.url, stack.apiKey, 'GET', '/api/agents')).body.data.length, 0, 'nothing saved yet');
    await screenshot(page, 'agent-warnings-before-save.png');

    // Back to no environment: the warning goes.
    await page.getByLabel('Environment', { exact: true }).selectOption({ label: 'None' });
    await page.locator('#agent_warnings .notice').waitFor({ state: 'detached' });
    await page.getByLabel('Environment', { exact: true }).selectOption({ label: 'locked (limited network)' });
    await warning.waitFor();

    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'Edit locked-down' }).waitFor();
    await warning.waitFor();
    assert.equal(
      (await call(stack.url, stack.apiKey, 'GET', '/api/agents')).body.data.length,
      1,
      'saved despite the warning',
    );
    assert.deepEqual(browser.consoleErrors, []);
  });
});
