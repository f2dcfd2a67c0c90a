/**
 * The web UI in a real browser (Debian's chromium through playwright-core) against a real stack:
 * sign in, create an agent, message it, answer a permission request, watch a runner drop and return.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { mintSignInLink } from '../../src/server/web/session.ts';
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

describe('web UI in chromium', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let ctx: BrowserContext;
  let page: Page;
  let consoleErrors: string[];

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    browser = await launchChromium(T);
    ({ ctx, page, consoleErrors } = browser);
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('signs in with an API key, refusing a wrong one in words', async () => {
    await page.goto(`${stack.url}/`);
    assert.match(page.url(), /\/signin\?next=%2F$/);
    await page.getByLabel('API key').fill(`ftn_${'0'.repeat(64)}`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'not known to this server' }).waitFor();
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Team' }).waitFor();
    const cookie = (await ctx.cookies()).find((c) => c.name === 'fountain_session');
    assert.ok(cookie?.httpOnly && cookie.sameSite === 'Lax', JSON.stringify(cookie));
  });

  it('opens a signed-in session from a one-time link, which works once', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    const link = await mintSignInLink(stack.db, stack.accountId, stack.url);
    await page.goto(link);
    await page.getByRole('heading', { name: 'Team' }).waitFor();
    // Spent, but this browser is signed in: the link just goes home.
    await page.goto(link);
    await page.getByRole('heading', { name: 'Team' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.goto(link);
    await page.getByRole('alert').filter({ hasText: 'already been used' }).waitFor();
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Team' }).waitFor();
  });

  it('creates an agent; the provider select is absent with one provider and present with two', async () => {
    await page.goto(`${stack.url}/agents/new`);
    assert.equal(await page.locator('#sandbox_provider').count(), 0);
    await page.getByLabel('Name').fill('Demo');
    await page.getByLabel('Runtime').selectOption('demo');
    await page.getByLabel('Model').fill('openai/gpt-5');
    await page.getByLabel('execute').selectOption('ask');
    await page.getByRole('button', { name: 'Create agent' }).click();
    // A model from the wrong vendor is refused next to the field, with the form kept.
    await page.locator('#model_error').filter({ hasText: 'fountain' }).waitFor();
    assert.equal(await page.getByLabel('Name').inputValue(), 'Demo');
    await page.getByLabel('Model').fill('fountain/demo');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.getByRole('heading', { name: 'Demo' }).waitFor();

    stack.env.SPRITES_TOKEN = 'sprites-test-token';
    try {
      await page.goto(`${stack.url}/agents/new`);
      const options = await page
        .locator('#sandbox_provider option')
        .evaluateAll((els) => els.map((e) => (e as HTMLOptionElement).value));
      assert.deepEqual(options, ['', 'runner', 'sprites']);
    } finally {
      delete stack.env.SPRITES_TOKEN;
    }
  });

  it('messages the agent on the team page, streams the answer, and answers a permission request', async () => {
    await page.goto(`${stack.url}/`);
    await page.getByLabel('Message Demo').fill('hello from the browser');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByRole('link', { name: 'Follow the conversation' }).click();
    await page.locator('#events').getByText('You said: hello from the browser').waitFor();
    await page.locator('[data-turn-state="done"]').first().waitFor();

    // Now live on the open page: a command the policy holds for an answer.
    await page.getByLabel('Message', { exact: true }).fill('run: echo browser-ok');
    await page.getByRole('button', { name: 'Send' }).click();
    const allow = page.getByRole('button', { name: 'Allow once' });
    await allow.waitFor();
    await allow.click();
    await page.locator('#events').getByText('Answered: Allow once').waitFor();
    // The buttons gave way to the request they answered.
    await page.locator('#events .ev.stage', { hasText: 'Permission requested: Run `echo browser-ok`' }).waitFor();
    // The answer streams in word groups; together they read as one sentence.
    await page.waitForFunction(
      () => document.querySelector('#events')?.textContent?.includes('exited with code 0'),
      undefined,
      { timeout: T },
    );
    await page.locator('[data-turn-state="done"]').nth(1).waitFor();
    assert.match(await page.locator('#events').innerText(), /browser-ok/);
    // One card per tool call, replaced in place as its updates arrive: it ends completed, with the command's output.
    const cards = page.locator('#events [data-tool-status]');
    assert.deepEqual(await cards.evaluateAll((els) => els.map((e) => e.getAttribute('data-tool-status'))), [
      'completed',
    ]);
    assert.match(await cards.first().innerText(), /browser-ok/);
    assert.deepEqual(await cards.locator('summary .badge').allInnerTexts(), ['done']);

    // Answered elsewhere (the CLI, over the API): the open page's buttons give way all the same.
    await page.getByLabel('Message', { exact: true }).fill('run: echo answered-elsewhere');
    await page.getByRole('button', { name: 'Send' }).click();
    const form = page.locator('form[data-request-id]');
    const requestId = await form.getAttribute('data-request-id');
    const convId = new URL(page.url()).pathname.split('/').at(-1)!;
    const answered = await call(
      stack.url,
      stack.apiKey,
      'POST',
      `/api/conversations/${convId}/requests/${encodeURIComponent(requestId!)}`,
      { option_id: 'allow_once' },
    );
    assert.equal(answered.status, 200, JSON.stringify(answered.body));
    await page
      .locator('#events .ev.stage', { hasText: 'Permission requested: Run `echo answered-elsewhere`' })
      .waitFor();
    await page.locator('[data-turn-state="done"]').nth(2).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Allow once' }).count(), 0);
    assert.equal(await page.locator('#events').getByText('Answered: Allow once').count(), 2);
  });

  it('shows a runner going offline and coming back, on the runners page and in the roster, without reloading', async () => {
    const runnerPage = await ctx.newPage();
    browser.watch(runnerPage);
    await runnerPage.goto(`${stack.url}/account/runners`);
    const row = runnerPage.locator(`tr[data-runner="${RUNNER_NAME}"]`);
    await row.locator('.runner-status', { hasText: 'online' }).waitFor();
    await page.goto(`${stack.url}/`);
    const status = page.locator('.mate-status').first();
    await status.locator('.where', { hasText: `on ${RUNNER_NAME}` }).waitFor();
    // Let both pages' event streams connect before the change they must show.
    await runnerPage.waitForTimeout(300);

    await stack.stopRunner();
    await row.locator('.runner-status', { hasText: 'offline' }).waitFor();
    await page.locator('.mate-status[data-presence="machine_offline"]').waitFor();
    await stack.startRunner();
    await row.locator('.runner-status', { hasText: 'online' }).waitFor();
    await page.locator('.mate-status[data-presence="online"]').waitFor();
    await runnerPage.close();
  });

  it('renders every page without console errors at 390 px and 1280 px', async () => {
    // Earlier tests provoke refusals (401, 422) on purpose; only this walk must be clean.
    consoleErrors.length = 0;
    const convHref = await page.locator('.mate-status a').first().getAttribute('href');
    const paths = [
      '/',
      '/agents',
      '/agents/new',
      '/account/runners',
      '/account/api-keys',
      convHref!,
      '/docs',
      '/docs/runners',
      '/docs/integrations/daytona',
      '/signin',
    ];
    for (const width of [390, 1280]) {
      await page.setViewportSize({ width, height: 900 });
      for (const p of paths) {
        const res = await page.goto(`${stack.url}${p}`);
        assert.equal(res?.status(), 200, p);
        await page.waitForLoadState('load');
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 1, `${p} at ${width}px is ${overflow}px wider than the screen`);
        await screenshot(page, `${width}${p === convHref ? '_conversation' : p.replace(/[^a-z0-9]+/gi, '_')}.png`);
      }
    }
    assert.deepEqual(consoleErrors, []);
  });

  it("draws a docs page's Mermaid diagram in the browser, and loads Mermaid on no page without one", async () => {
    consoleErrors.length = 0;
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${stack.url}/docs/architecture`);
    const drawn = page.locator('pre.mermaid svg').first();
    await drawn.waitFor({ timeout: T });
    assert.match((await drawn.textContent()) ?? '', /recovering/);
    assert.equal(await page.locator('script[src$="/mermaid.min.js"]').count(), 1);
    await screenshot(page, '1280_docs_architecture.png');
    await page.goto(`${stack.url}/docs/runners`);
    assert.equal(await page.locator('script[src$="/mermaid.min.js"]').count(), 0);
    assert.deepEqual(consoleErrors, []);
  });
});
