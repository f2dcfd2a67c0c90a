/**
 * The agent form's runner select in chromium against a real stack and a real runner: "Any runner" by
 * default, a runner chosen by name pins the agent; while that runner is away the form says so by name, and
 * starting a conversation (agent page, Conversations page) or messaging it answers a sentence naming it.
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
const NAMED = new RegExp(`runner "${RUNNER_NAME}" is offline`, 'i');

describe('the agent form runner select in chromium', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let agentId = '';

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    browser = await launchChromium(T);
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('defaults to any runner, and a runner chosen by name pins the agent', { timeout: 60_000 }, async () => {
    const { page } = browser;
    await page.goto(`${stack.url}/agents/new`);
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'New agent' }).waitFor();
    const select = page.getByLabel('Runner', { exact: true });
    assert.equal(await select.inputValue(), '', '"Any runner" is the default');
    const labels = await page.locator('#runner_id option').allInnerTexts();
    assert.deepEqual(
      labels.map((l) => l.trim()),
      ['Any runner (the most recently connected one online)', `${RUNNER_NAME} (online)`],
    );
    await page.getByLabel('Name').fill('pinned');
    await page.getByLabel('Runtime').selectOption('demo');
    await page.getByLabel('Model').fill('fountain/demo');
    await select.selectOption({ label: `${RUNNER_NAME} (online)` });
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'pinned' }).waitFor();

    const agents = (await call(stack.url, stack.apiKey, 'GET', '/api/agents')).body.data as Array<{
      id: string;
      name: string;
      runner_id: string | null;
    }>;
    const runners = (await call(stack.url, stack.apiKey, 'GET', '/api/runners')).body.data as Array<{
      id: string;
      name: string;
    }>;
    const pinned = agents.find((a) => a.name === 'pinned')!;
    agentId = pinned.id;
    assert.equal(pinned.runner_id, runners.find((r) => r.name === RUNNER_NAME)!.id);

    await page.goto(`${stack.url}/agents/${agentId}/edit`);
    assert.equal(await page.locator('#runner_id option:checked').innerText(), `${RUNNER_NAME} (online)`);
    assert.equal(await page.locator('#runner_id_offline').count(), 0, 'no warning while the runner is online');
  });

  it('while the pinned runner is away: the form, a new conversation and a message name it', {
    timeout: 90_000,
  }, async () => {
    const { page } = browser;
    await stack.stopRunner();

    await page.goto(`${stack.url}/agents/${agentId}/edit`);
    assert.equal(await page.locator('#runner_id option:checked').innerText(), `${RUNNER_NAME} (offline)`);
    await page.locator('#runner_id_offline').filter({ hasText: NAMED }).waitFor();

    // The agent page's "Start a conversation".
    await page.getByRole('button', { name: 'Start' }).click();
    await page.locator('#start_error').filter({ hasText: NAMED }).waitFor();
    await screenshot(page, 'runner-choice-offline.png');

    // The Conversations page's "New conversation".
    await page.goto(`${stack.url}/conversations`);
    await page.getByLabel('Agent', { exact: true }).selectOption({ label: 'pinned' });
    await page.getByRole('button', { name: 'Start conversation' }).click();
    await page.locator('#new-conversation').getByRole('alert').filter({ hasText: NAMED }).waitFor();

    // The Team page's message box.
    await page.goto(`${stack.url}/`);
    await page.getByLabel('Message pinned').fill('hello');
    await page
      .locator('section[data-agent-id] form')
      .filter({ has: page.getByLabel('Message pinned') })
      .getByRole('button', { name: 'Send' })
      .click();
    await page.locator(`#msg-result-${agentId}`).filter({ hasText: NAMED }).waitFor();

    // The refusals are 4xx answers by design (the browser logs each one); nothing else may be logged.
    assert.deepEqual(
      browser.consoleErrors.filter(
        (e) => !/Failed to load resource: the server responded with a status of 4\d\d/.test(e),
      ),
      [],
    );
  });
});
