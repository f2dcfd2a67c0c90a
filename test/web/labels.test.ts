/**
 * Conversation labels in chromium at 1280 and 390 px against a real server: add labels on the conversation
 * page, a bad one refused in words, remove one; the list shows each line's labels, a label filters the list
 * (its chip or the Labels box). Screenshots at each step; no page wider than the screen; no console error.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { insertAgent } from '../../src/server/agents/store.ts';
import { conversations } from '../../src/server/store/conversation-schema.ts';
import { mintSignInLink } from '../../src/server/web/session.ts';
import { call } from '../helpers/http.ts';
import { launchChromium, screenshot, skipWithoutChromium, startStack, type Browser, type Stack } from './harness.ts';

const T = 30_000;

async function noOverflow(page: Page, width: number, what: string): Promise<void> {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(w <= width, `${what} at ${width}px: the page is ${w}px wide`);
}

const listedIds = (page: Page): Promise<string[]> =>
  page.locator('.conv-list li.conv-item').evaluateAll((els) => els.map((e) => e.getAttribute('data-conversation-id')!));

describe('conversation labels on the web', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let agentId: string;
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);
  const newConversation = async (title: string): Promise<string> => {
    const [row] = await stack.db
      .insert(conversations)
      .values({ accountId: stack.accountId, agentId, title, status: 'idle', runtime: 'demo', turnCount: 1 })
      .returning({ id: conversations.id });
    return row!.id;
  };

  before(async () => {
    stack = await startStack();
    const agent = await insertAgent(stack.db, stack.accountId, {
      name: 'Demo',
      description: '',
      system: '',
      runtime: 'demo',
      model: 'fountain/demo',
      sandboxProvider: 'runner',
      permissionPolicy: {},
      metadata: {},
    });
    assert.ok(agent.ok);
    agentId = agent.agent.id;
    browser = await launchChromium(T);
    await browser.page.goto(await mintSignInLink(stack.db, stack.accountId, stack.url));
    await browser.page.getByRole('heading', { name: 'Team' }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  for (const width of [1280, 390]) {
    it(`at ${width} px`, { timeout: 120_000 }, async () => {
      const { page } = browser;
      browser.consoleErrors.length = 0;
      await page.setViewportSize({ width, height: 800 });
      const shot = (step: string) => screenshot(page, `labels-${width}-${step}.png`);
      const mine = await newConversation(`Flaky login test ${width}`);
      const other = await newConversation(`Docs typo ${width}`);
      assert.equal(
        (await api('POST', `/api/conversations/${other}/labels`, { labels: [`w=${width}`, 'team=docs'] })).status,
        200,
      );

      // On the conversation page: add two labels, one at a time.
      await page.goto(`${stack.url}/conversations/${mine}`);
      const bar = page.locator('#labels');
      const box = bar.getByLabel('Add a label');
      await box.fill('bug');
      await bar.getByRole('button', { name: 'Add label' }).click();
      await bar.locator('.label-chip[data-label="bug"]').waitFor();
      await page.getByLabel('Add a label').fill(`w=${width}`);
      await page.getByLabel('Add a label').press('Enter');
      await bar.locator(`.label-chip[data-label="w=${width}"]`).waitFor();
      await noOverflow(page, width, 'the conversation page with labels');
      await shot('conversation');

      // A label that breaks the rule is refused in words; nothing is stored.
      await page.getByLabel('Add a label').fill('two words');
      await page.getByLabel('Add a label').press('Enter');
      await page.locator('#label-error').waitFor();
      assert.match(await page.locator('#label-error').innerText(), /key or key=value/);
      assert.deepEqual((await api('GET', `/api/conversations/${mine}`)).body.data.labels, ['bug', `w=${width}`]);
      await noOverflow(page, width, 'the refusal');
      await shot('refused');

      // Remove one: its × button.
      await page.getByRole('button', { name: 'Remove label bug' }).click();
      await page.locator(`#labels .label-chip[data-label="w=${width}"]`).waitFor();
      assert.equal(await page.locator('#labels .label-chip[data-label="bug"]').count(), 0);
      assert.deepEqual((await api('GET', `/api/conversations/${mine}`)).body.data.labels, [`w=${width}`]);

      // The list: each line's labels; a chip filters the list by itself.
      await page.goto(`${stack.url}/conversations`);
      const line = page.locator(`.conv-list li.conv-item[data-conversation-id="${other}"]`);
      await line.locator('.label-chip[data-label="team=docs"]').waitFor();
      await noOverflow(page, width, 'the list with labels');
      await shot('list');
      await page.locator(`li.conv-item[data-conversation-id="${mine}"] .label-chip[data-label="w=${width}"]`).click();
      await page.waitForURL((u) => u.searchParams.get('label') === `w=${width}`);
      assert.deepEqual((await listedIds(page)).sort(), [mine, other].sort());
      assert.equal(await page.getByLabel('Labels').inputValue(), `w=${width}`);
      // The Labels box: every label of a comma list must match.
      await page.getByLabel('Labels').fill(`w=${width}, team=docs`);
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL((u) => (u.searchParams.get('label') ?? '').includes('team=docs'));
      assert.deepEqual(await listedIds(page), [other]);
      await noOverflow(page, width, 'the filtered list');
      await shot('filtered');
      // A filter that is not a label says so.
      await page.getByLabel('Labels').fill('two words');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.getByText('The label filter is not valid').waitFor();
      assert.deepEqual(browser.consoleErrors, []);
    });
  }
});
