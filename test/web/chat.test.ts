/**
 * The conversation page's chat habits in chromium at 1280 and 390 px against a real stack: Enter sends and
 * Shift+Enter breaks the line (here and in the Team message box), the view follows new events unless the
 * reader scrolled up (then a "New messages" pill), a permission request reads "waiting for your approval"
 * in the header, the side list, the conversations list and the tab's title; copy buttons, local relative
 * times, inline Markdown in tool titles and permission lines, single line breaks kept in answers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { mintSignInLink } from '../../src/server/web/session.ts';
import { call } from '../helpers/http.ts';
import {
  launchChromium,
  screenshot,
  skipWithoutChromium,
  startStack,
  until,
  type Browser,
  type Stack,
} from './harness.ts';

const T = 30_000;

const turnsDone = (page: Page) => page.locator('#events [data-turn-state="done"]').count();

async function noOverflow(page: Page, width: number, what: string): Promise<void> {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(w <= width, `${what} at ${width}px: the page is ${w}px wide`);
}

describe('the conversation as a chat', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let agentId: string;

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    const made = await call(stack.url, stack.apiKey, 'POST', '/api/agents', {
      name: 'Demo',
      runtime: 'demo',
      model: 'fountain/demo',
      system: '',
      permission_policy: { default: 'ask' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    agentId = made.body.data.id;
    browser = await launchChromium(T);
    await browser.ctx.grantPermissions(['clipboard-read', 'clipboard-write', 'notifications'], {
      origin: stack.url,
    });
    await browser.page.goto(await mintSignInLink(stack.db, stack.accountId, stack.url));
    await browser.page.getByRole('heading', { name: 'Team' }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  for (const width of [1280, 390]) {
    it(`at ${width} px`, { timeout: 240_000 }, async () => {
      const { page } = browser;
      browser.consoleErrors.length = 0;
      await page.setViewportSize({ width, height: 700 });
      const shot = (step: string) => screenshot(page, `chat-${width}-${step}.png`);

      // The Team message box: Enter sends, Shift+Enter breaks the line.
      await page.goto(`${stack.url}/`);
      const teamBox = page.getByLabel('Message Demo');
      await teamBox.fill('hello');
      await teamBox.press('Shift+Enter');
      await teamBox.pressSequentially('there');
      assert.equal(await teamBox.inputValue(), 'hello\nthere', 'Shift+Enter is a newline, nothing sent');
      await teamBox.press('Enter');
      await page.getByRole('link', { name: 'Follow the conversation' }).click();
      const events = page.locator('#events');
      await events.getByText('You said: hello').waitFor();
      await until(async () => (await turnsDone(page)) === 1, 'the first turn to end', T);
      const convId = new URL(page.url()).pathname.split('/').at(-1)!;

      // The conversation box: the same keys.
      const box = page.getByLabel('Message', { exact: true });
      await box.fill('first line');
      await box.press('Shift+Enter');
      await box.pressSequentially('second line');
      assert.equal(await box.inputValue(), 'first line\nsecond line');
      assert.equal(await turnsDone(page), 1, 'Shift+Enter sent nothing');
      await box.press('Enter');
      await until(async () => (await turnsDone(page)) === 2, 'the second turn to end', T);
      assert.equal(await box.inputValue(), '', 'the box empties once sent');
      assert.match(await page.locator('.ev.you .prompt-text').nth(1).innerText(), /^first line\nsecond line$/);
      // The answer keeps its single line breaks: "You said: …" and "I am the Fountain demo agent" are two lines.
      const answer = page.locator('#events .ev.text.md').nth(1);
      await answer.locator('br').first().waitFor({ state: 'attached' });

      // A command that asks first: "waiting for your approval" in the header, the side list and the title.
      await box.fill('run: uname -a');
      await box.press('Enter');
      await page.getByRole('button', { name: 'Allow once' }).waitFor();
      const status = page.locator('#conv-status');
      await status.locator('.conv-status', { hasText: 'waiting for your approval' }).waitFor();
      await page.waitForFunction(() => document.title.startsWith('Waiting for your approval'));
      if (width >= 1000) {
        await page
          .locator(`aside.recent li[data-conversation-id="${convId}"][data-waiting="true"]`)
          .getByText('waiting for your approval')
          .waitFor();
      }
      // The view followed the new events down to the request.
      await until(
        () => page.evaluate(() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2),
        'the view to follow the request',
        T,
      );
      // The permission line is Markdown, not backticks.
      const request = page.locator('form[data-request-id]');
      assert.equal(await request.locator('code', { hasText: 'uname -a' }).count(), 1);
      assert.doesNotMatch(await request.innerText(), /`/);
      await shot('waiting');

      // The conversations list, in another tab, has the badge too.
      const list = await browser.ctx.newPage();
      browser.watch(list);
      await list.setViewportSize({ width, height: 700 });
      await list.goto(`${stack.url}/conversations`);
      await list
        .locator(`li.conv-item[data-conversation-id="${convId}"]`)
        .locator('.badge.asking', { hasText: 'waiting for your approval' })
        .waitFor();
      await noOverflow(list, width, 'conversations');
      await screenshot(list, `chat-${width}-list-waiting.png`);
      await list.close();

      // The notification is opt-in: one click, the browser's permission, and the button says so.
      const notify = page.locator('#notify-toggle');
      if ((await notify.innerText()) === 'Notifications on') {
        await notify.click();
        await notify.filter({ hasText: 'Notify me when it needs me' }).waitFor();
      }
      await notify.click();
      await notify.filter({ hasText: 'Notifications on' }).waitFor();

      await page.getByRole('button', { name: 'Allow once' }).click();
      await until(async () => (await turnsDone(page)) === 3, 'the run turn to end', T);
      await status.locator('.conv-status', { hasText: 'waiting for you' }).waitFor();
      assert.equal(await status.getByText('waiting for your approval').count(), 0);
      await page.waitForFunction(() => !document.title.startsWith('Waiting for your approval'));

      // One tool card: its title is "Run uname -a" once, in words and code, never "Run Run `uname -a`".
      const card = page.locator('#events [data-tool-status="completed"]').first();
      const summary = await card.locator('summary').innerText();
      assert.doesNotMatch(summary, /Run\s+Run/);
      assert.doesNotMatch(summary, /`/);
      assert.match(summary, /Run uname -a/);
      // "Its output:" and the output are on separate lines.
      const ran = page.locator('#events .ev.text.md').nth(2);
      assert.match(await ran.innerText(), /Its output:\n\s*Linux/);

      // Copy buttons: the command without its "$ ", the output as printed.
      await card.getByRole('button', { name: 'Copy command' }).click();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'uname -a');
      await card.locator('pre.out').locator('xpath=..').getByRole('button', { name: 'Copy' }).click();
      assert.match(await page.evaluate(() => navigator.clipboard.readText()), /^Linux /);

      // Times are local and relative, exact on hover.
      const started = page.locator('time[data-relative]').first();
      assert.match(await started.innerText(), /^(just now|\d+ min ago)$/);
      const exact = (await started.getAttribute('title')) ?? '';
      assert.ok(exact !== '' && !exact.includes('UTC'), exact);

      // Scrolled up, a new event does not pull the view down: a pill offers the way back.
      for (let i = 0; i < 3 && (await page.evaluate(() => document.documentElement.scrollHeight)) < 1500; i++) {
        await box.fill(`filler ${i}`);
        await box.press('Enter');
        await until(async () => (await turnsDone(page)) === 4 + i, 'a filler turn', T);
      }
      const before = await turnsDone(page);
      await page.evaluate(() => window.scrollTo({ top: 0, behavior: 'instant' }));
      await page.waitForTimeout(100);
      const sent = await call(stack.url, stack.apiKey, 'POST', `/api/conversations/${convId}/prompts`, {
        prompt: 'hello from elsewhere',
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      await until(async () => (await turnsDone(page)) === before + 1, 'the turn sent elsewhere', T);
      const pill = page.getByRole('button', { name: /New messages/ });
      await pill.waitFor();
      assert.equal(await page.evaluate(() => window.scrollY), 0, 'the view stayed where the reader left it');
      await shot('new-messages');
      await pill.click();
      await pill.waitFor({ state: 'hidden' });
      assert.ok(
        await page.evaluate(() => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 2),
      );

      await noOverflow(page, width, 'conversation');
      await shot('done');
      assert.deepEqual(browser.consoleErrors, []);
      // The next width starts afresh: the Team box's message then opens a new conversation.
      const ended = await call(stack.url, stack.apiKey, 'POST', `/api/conversations/${convId}/terminate`);
      assert.equal(ended.status, 204, JSON.stringify(ended.body));
      void agentId;
    });
  }
});
