/**
 * Fork and move on the conversation page in chromium at 1280 and 390 px, against a real stack with two
 * real runners: "Fork from here" under a completed turn opens the new conversation, which recalls the
 * fact; "Move to…" sends the conversation to the other runner, and its next message is answered there. A
 * turn whose checkpoint is no longer kept offers no fork.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { startRunnerChild, type RunnerChild } from '../../src/server/conversations/testing.ts';
import { answerOf, call, type Json } from '../helpers/http.ts';
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

describe('fork and move on the conversation page', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let second: RunnerChild;
  let tmp: string;
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);
  const turns = async (id: string): Promise<Json[]> =>
    (await api('GET', `/api/conversations/${id}/turns`)).body.data as Json[];
  const completed = (id: string, turnId: string) =>
    until(
      async () => (await turns(id)).find((t) => t.id === turnId && t.status === 'completed'),
      `turn ${turnId} to complete`,
      T,
    );
  const checkpointed = (turnId: string) =>
    until(
      async () =>
        (
          (await stack.db.execute(sql`SELECT 1 AS one FROM checkpoints WHERE turn_id = ${turnId}`)) as unknown as {
            rows: unknown[];
          }
        ).rows.length > 0,
      'the checkpoint after the turn',
      T,
    );
  const ask = async (id: string, prompt: string): Promise<string> => {
    const p = await api('POST', `/api/conversations/${id}/prompts`, { prompt });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    await completed(id, p.body.turn_id);
    const events = (await api('GET', `/api/conversations/${id}/events?limit=1000`)).body.data as Json[];
    return answerOf(events, p.body.turn_id);
  };

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-web-second-')));
    second = startRunnerChild({
      name: 'second',
      root: join(tmp, 'root'),
      baseUrl: stack.url,
      apiKey: stack.apiKey,
      home: tmp,
    });
    await until(() => stack.host.online(stack.accountId).some((r) => r.name === 'second'), 'runner second', T);
    browser = await launchChromium(T);
  });
  after(async () => {
    await browser?.close();
    await second?.stop();
    await stack?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('forks from a turn and moves between runners, at 1280 and 390 px', { timeout: 180_000 }, async () => {
    const { page } = browser;
    const agent = (await api('POST', '/api/agents', { name: 'demo', runtime: 'demo', model: 'fountain/demo' })).body
      .data;
    const created = await api('POST', '/api/conversations', { agent_id: agent.id, prompt: 'remember: web fact 7' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id: string = created.body.data.id;
    const [first] = await turns(id);
    await completed(id, first.id);
    await checkpointed(first.id);

    await page.goto(`${stack.url}/conversations/${id}`);
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();

    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${stack.url}/conversations/${id}`);
      // Fork: the button under the completed turn opens the new conversation.
      await page.locator(`form[data-fork="${first.id}"]`).getByRole('button', { name: 'Fork from here' }).click();
      await page.waitForURL((u) => u.pathname.startsWith('/conversations/') && !u.pathname.endsWith(id), {
        timeout: T,
      });
      const forkId = new URL(page.url()).pathname.split('/').pop()!;
      await page.getByRole('heading', { name: /fork at turn 1/ }).waitFor();
      await page.getByText('Forked from another conversation after turn 1').waitFor();
      await screenshot(page, `fork-${width}.png`);
      assert.match(await ask(forkId, 'recall'), /web fact 7/);

      // Move: to whichever runner it is not on; the page then says where it goes.
      await page.goto(`${stack.url}/conversations/${id}`);
      const here = (await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.name as string;
      const there = here === 'second' ? 'mac-mini' : 'second';
      await page.getByLabel('Move to…').selectOption({ label: there });
      await page.locator('#move').getByRole('button', { name: 'Move' }).click();
      await page.getByText(`Moved to runner ${there}`).first().waitFor();
      await page.locator('#placement').filter({ hasText: there }).waitFor();
      await screenshot(page, `move-${width}.png`);
      assert.match(await ask(id, 'recall'), /web fact 7/);
      assert.equal((await api('GET', `/api/conversations/${id}`)).body.data.sandbox.runner.name, there);
    }
    // Only the newest checkpoints are kept: turn 1's is gone by now, and so is its button.
    const last = (await turns(id)).at(-1)!;
    await checkpointed(last.id);
    await page.goto(`${stack.url}/conversations/${id}`);
    await page.locator(`form[data-fork="${last.id}"]`).getByRole('button', { name: 'Fork from here' }).waitFor();
    assert.equal(await page.locator(`form[data-fork="${first.id}"]`).count(), 0, 'no fork where no checkpoint is kept');
    assert.deepEqual(browser.consoleErrors, []);
  });
});
