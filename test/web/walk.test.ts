/**
 * The walk a new user takes, in chromium at phone and desktop width: sign in, the conversations list, a
 * new conversation, a `run:` answered, a 150 KB one-line message, terminate, the ended state. Nothing may
 * sit off-screen or widen the page; every step leaves a screenshot; the console stays clean.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { call } from '../helpers/http.ts';
import { launchChromium, screenshot, skipWithoutChromium, startStack, type Browser, type Stack } from './harness.ts';

const T = 30_000;

/** Everything that can be seen or clicked lies inside the viewport's width, and the page is no wider. */
async function assertFits(page: Page, what: string): Promise<void> {
  const r = await page.evaluate(() => {
    const width = window.innerWidth;
    const off = [...document.querySelectorAll('button, a, input, select, textarea, pre, .ev, .card, td')]
      .filter((el) => {
        const b = el.getBoundingClientRect();
        if ((b.width === 0 && b.height === 0) || el.classList.contains('skip')) return false;
        // Inside a box that scrolls sideways on purpose (code), being wider is fine.
        for (let p = el.parentElement; p; p = p.parentElement)
          if (
            p.scrollWidth > p.clientWidth &&
            getComputedStyle(p).overflowX !== 'visible' &&
            p !== document.documentElement &&
            p !== document.body
          )
            return false;
        return b.left < -1 || b.right > width + 1;
      })
      .map(
        (el) =>
          `${el.tagName.toLowerCase()}.${el.className} (${Math.round(el.getBoundingClientRect().left)}..${Math.round(el.getBoundingClientRect().right)})`,
      );
    return { overflow: document.documentElement.scrollWidth - width, off: off.slice(0, 5) };
  });
  assert.ok(r.overflow <= 1, `${what}: the page is ${r.overflow}px wider than the screen`);
  assert.deepEqual(r.off, [], `${what}: off-screen`);
}

describe('the walk: sign in → conversations → new → run: answered → long message → terminate', {
  skip: skipWithoutChromium,
}, () => {
  let stack: Stack;
  let browser: Browser;

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    const made = await call(stack.url, stack.apiKey, 'POST', '/api/agents', {
      name: 'demo',
      runtime: 'demo',
      model: 'fountain/demo',
      system: '',
      permission_policy: { default: 'ask' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    browser = await launchChromium(T);
    browser.page.on('dialog', (d) => void d.accept());
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  for (const width of [1280, 390]) {
    it(`at ${width} px`, { timeout: 180_000 }, async () => {
      const { page } = browser;
      // The page with the 150 KB message is very tall: that one is shot as the screen shows it.
      const shot = async (step: string, fullPage = true) => screenshot(page, `walk-${width}-${step}.png`, fullPage);
      await page.setViewportSize({ width, height: 844 });
      await browser.ctx.clearCookies();

      await page.goto(`${stack.url}/conversations`);
      await page.getByLabel('API key').fill(stack.apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Conversations', exact: true }).waitFor();
      await assertFits(page, 'conversations');
      await shot('1-conversations');

      await page.getByLabel('Agent', { exact: true }).selectOption({ label: 'demo' });
      await page.getByRole('button', { name: 'Start conversation' }).click();
      await page.waitForURL(/\/conversations\/[0-9a-f-]{36}$/);
      const convId = new URL(page.url()).pathname.split('/').at(-1)!;

      await page.getByLabel('Message', { exact: true }).fill(`run: echo walk-${width}`);
      await page.getByRole('button', { name: 'Send' }).click();
      await page.getByRole('button', { name: 'Allow once' }).click();
      await page.locator('#events').getByText('Answered: Allow once').waitFor();
      await page.locator('[data-turn-state="done"]').first().waitFor();
      await page.locator('.ev.tool pre.cmd', { hasText: `$ echo walk-${width}` }).waitFor();
      assert.match(await page.locator('#events').innerText(), new RegExp(`walk-${width}`));
      assert.doesNotMatch(await page.locator('#events').innerText(), /provision|stop reason|sprite/i);
      await assertFits(page, 'after run:');
      await shot('2-run-answered');

      // 150 KB on one line: the prompt, and the demo's echo of it, wrap inside their blocks.
      const long = `${'x'.repeat(150_000)}-end`;
      await page.getByLabel('Message', { exact: true }).fill(long);
      await page.getByRole('button', { name: 'Send' }).click();
      await page.locator('[data-turn-state="done"]').nth(1).waitFor();
      await assertFits(page, 'after the long message');
      await shot('3-long-message', false);

      await page.getByRole('button', { name: 'Terminate' }).click();
      await page.locator('#composer[data-ended="true"]').waitFor();
      await page.getByText('This conversation has ended.').waitFor();
      assert.equal(await page.getByRole('button', { name: 'Send' }).count(), 0);
      assert.equal(await page.getByRole('button', { name: 'Interrupt' }).count(), 0);
      assert.equal(await page.getByRole('button', { name: 'Terminate' }).count(), 0);
      assert.equal(await page.getByText('Sent.').count(), 0);
      await page.locator('#conv-status .conv-status', { hasText: 'ended' }).waitFor();
      await assertFits(page, 'ended');
      await shot('4-ended');

      await page.goto(`${stack.url}/conversations?status=terminated`);
      const row = page.locator(`[data-conversation-id="${convId}"]`);
      await row.getByText('demo').first().waitFor();
      assert.match(await row.innerText(), /run: echo walk-/);
      await assertFits(page, 'conversations, filtered');
      await shot('5-conversations-after');
      assert.deepEqual(browser.consoleErrors, []);
    });
  }

  it('answers an unknown page with an HTML 404 and serves a favicon', async () => {
    const res = await fetch(`${stack.url}/no/such/page`, { headers: { accept: 'text/html' } });
    assert.equal(res.status, 404);
    assert.match(res.headers.get('content-type') ?? '', /text\/html/);
    assert.match(await res.text(), /Page not found/);
    const api = await fetch(`${stack.url}/api/no-such-route`);
    assert.equal(api.status, 404);
    assert.equal(((await api.json()) as { error: string }).error, 'not_found');
    const icon = await fetch(`${stack.url}/static/favicon.svg`);
    assert.equal(icon.status, 200);
    assert.match(icon.headers.get('content-type') ?? '', /image\/svg\+xml/);
  });
});
