/**
 * The conversation page's "Files changed" panel in chromium at 1280 and 390 px against a real server, runner
 * and the demo agent's Claude-shaped Edit tool: it appears live when an edit's turn ends, names the file
 * inside the sandbox (never the runner's host path), counts added and removed lines over every edit, and
 * opens to each edit's diff; a refused edit changes nothing. The tool cards show paths under the sandbox home
 * (`~/…`), never the runner's host path. No page wider than the screen, no console error.
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
const HOST_PATH = /\/tmp\/|fountain-web-|runner-[0-9a-f]{32}/;

const turnsDone = (page: Page) => page.locator('#events [data-turn-state="done"]').count();

async function noOverflow(page: Page, width: number, what: string): Promise<void> {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(w <= width, `${what} at ${width}px: the page is ${w}px wide`);
}

describe('files changed and their diffs', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let agentId: string;

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    const made = await call(stack.url, stack.apiKey, 'POST', '/api/agents', {
      name: 'Editor',
      runtime: 'demo',
      model: 'fountain/demo',
      system: '',
      // Edits go through; "Edit src/skip.txt" is the one refused.
      permission_policy: { 'Edit src/skip.txt': 'auto_deny', default: 'auto_allow' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    agentId = made.body.data.id;
    browser = await launchChromium(T);
    await browser.page.goto(await mintSignInLink(stack.db, stack.accountId, stack.url));
    await browser.page.getByRole('heading', { name: 'Team' }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  for (const width of [1280, 390]) {
    it(`at ${width} px`, { timeout: 180_000 }, async () => {
      const { page } = browser;
      browser.consoleErrors.length = 0;
      await page.setViewportSize({ width, height: 800 });
      const shot = (step: string) => screenshot(page, `files-${width}-${step}.png`);
      const conv = await call(stack.url, stack.apiKey, 'POST', '/api/conversations', {
        agent_id: agentId,
        prompt: 'edit: notes.txt :: x => hello world',
      });
      assert.equal(conv.status, 201, JSON.stringify(conv.body));
      await page.goto(`${stack.url}/conversations/${conv.body.data.id}`);
      await until(async () => (await turnsDone(page)) === 1, 'the first edit to end', T);
      // Shown live, once the turn ended, without a reload.
      const panel = page.locator('#files');
      await panel.getByText('Files changed (1)').waitFor();
      const notes = panel.locator('details.file-change[data-file="notes.txt"]');
      assert.match(await notes.locator('summary').innerText(), /^notes\.txt \+1 −0 · 1 edit$/);

      const box = page.getByLabel('Message', { exact: true });
      await box.fill('edit: notes.txt :: hello => goodbye');
      await box.press('Enter');
      await until(async () => (await turnsDone(page)) === 2, 'the second edit to end', T);
      await box.fill('edit: src/skip.txt :: a => b');
      await box.press('Enter');
      await until(async () => (await turnsDone(page)) === 3, 'the refused edit to end', T);
      await until(
        async () => /^notes\.txt \+2 −1 · 2 edits$/.test(await notes.locator('summary').innerText()),
        'both edits counted',
        T,
      );
      assert.equal(await panel.locator('details.file-change').count(), 1, 'the refused edit changed nothing');

      // After a reload, the same; opened, each edit's diff.
      await page.reload();
      await page.locator('#files').getByText('Files changed (1)').waitFor();
      await page.locator('#files details.file-change[data-file="notes.txt"] summary').click();
      const diffs = page.locator('#files details.file-change[data-file="notes.txt"] .diff');
      assert.equal(await diffs.count(), 2);
      assert.match(await diffs.nth(0).locator('.add').first().innerText(), /^\+hello world$/);
      assert.match(await diffs.nth(1).locator('.del').first().innerText(), /^-hello world$/);
      assert.match(await diffs.nth(1).locator('.add').first().innerText(), /^\+goodbye world$/);
      assert.doesNotMatch(await page.locator('#files').innerText(), HOST_PATH, 'no host path in the panel');
      // The tool cards (title, input, diff) name the file under the sandbox home, never the runner's host path.
      const cards = await page.locator('#events').innerText();
      assert.doesNotMatch(cards, HOST_PATH, 'no host path in the tool cards');
      assert.match(cards, /file_path: ~\/notes\.txt/);
      await noOverflow(page, width, 'the conversation with its files panel');
      await page.locator('#files').scrollIntoViewIfNeeded();
      await shot('panel');
      assert.deepEqual(browser.consoleErrors, []);
    });
  }
});
