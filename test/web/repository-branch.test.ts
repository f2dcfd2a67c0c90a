/**
 * "Start where the work is" in chromium at 1280 and 390 px, against a real server, runner and a local git
 * server over https: the New conversation form lists the agent's repository branches (asked of the remote
 * by the server with the environment's token), the conversation's computer checks the picked one out, the
 * demo agent commits, and "Push to a branch" sends the commit to a new branch read back on the git server.
 * A second push to the same branch is refused in words. The form's model, changed from the agent's, is the
 * one the agent process is launched with (the demo agent as a `custom` runtime, which is handed its model as
 * FOUNTAIN_MODEL) and the conversation's header names it. No page wider than the screen, no console error.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { demoAgentArgv } from '../../src/acp/index.ts';
import { mintSignInLink } from '../../src/server/web/session.ts';
import { startGitHttpsServer, type GitHttpsServer } from '../helpers/git-https.ts';
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

// A push runs git in the sandbox against the local git server: on a loaded machine over a minute.
const T = 120_000;

async function noOverflow(page: Page, width: number, what: string): Promise<void> {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(w <= width, `${what} at ${width}px: the page is ${w}px wide`);
}

describe('repository branch pick and push to a branch in the browser', { skip: skipWithoutChromium }, () => {
  const TOKEN = `clone-token-${randomBytes(12).toString('hex')}`;
  let tmp: string;
  let git: GitHttpsServer;
  let stack: Stack;
  let browser: Browser;

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'fountain-web-branch-'));
    git = await startGitHttpsServer(join(tmp, 'git'), TOKEN);
    git.addRepo('private/app', { 'README.md': 'the app\n' });
    git.addBranch('private/app', 'feature', { 'FEATURE.md': 'the feature branch\n' });
    // The server's own git (ls-remote) trusts the test CA the way git is told to: the server's environment.
    process.env.GIT_SSL_CAINFO = git.caFile;
    stack = await startStack({ env: { FOUNTAIN_SECRET_KEY: randomBytes(32).toString('hex') } });
    await stack.startRunner();
    const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);
    const env = await api('POST', '/api/environments', {
      name: 'project',
      env_vars: { GIT_SSL_CAINFO: git.caFile },
      secrets: { CLONE_TOKEN: TOKEN },
      repositories: [{ url: `${git.url}/private/app.git`, mount_path: 'app', secret_key: 'CLONE_TOKEN' }],
    });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    const agent = await api('POST', '/api/agents', {
      name: 'Builder',
      runtime: 'custom',
      model: 'acme/small',
      custom_runtime: { command: demoAgentArgv() },
      permission_policy: { default: 'auto_allow' },
      environment_id: env.body.data.id,
    });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    browser = await launchChromium(T);
    await browser.page.goto(await mintSignInLink(stack.db, stack.accountId, stack.url));
    await browser.page.getByRole('heading', { name: 'Team' }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
    await git?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  for (const width of [1280, 390]) {
    it(`at ${width} px`, { timeout: 240_000 }, async () => {
      const { page } = browser;
      browser.consoleErrors.length = 0;
      await page.setViewportSize({ width, height: 800 });
      const shot = (step: string) => screenshot(page, `branch-${width}-${step}.png`);
      await page.goto(`${stack.url}/conversations`);
      const pick = page.locator('#new-branch-select');
      await pick.waitFor({ timeout: T });
      const options = await pick.locator('option').allInnerTexts();
      // The default branch first, then the rest (a push at the other width adds its branch).
      assert.deepEqual(options.map((o) => o.trim()).slice(0, 3), [
        'As the environment says (app)',
        'app · main',
        'app · feature',
      ]);
      await pick.selectOption({ label: 'app · feature' });
      const model = page.getByLabel('Model', { exact: true });
      assert.equal(await model.inputValue(), 'acme/small', "prefilled with the agent's model");
      await model.fill(`acme/large-${width}`);
      await page
        .getByLabel('First message (optional)')
        .fill(
          `run: cd app && echo "from the page at ${width}" >> FEATURE.md && git commit -qam "web ${width}" && git rev-parse --abbrev-ref HEAD && echo "model=$FOUNTAIN_MODEL"`,
        );
      await noOverflow(page, width, 'the new conversation form');
      await shot('form');
      await page.getByRole('button', { name: 'Start conversation' }).click();
      await page.waitForURL(/\/conversations\/[0-9a-f-]{36}$/);
      await until(
        async () => (await page.locator('#events [data-turn-state="done"]').count()) === 1,
        'the first turn to end',
        T * 2,
      );
      assert.match(await page.locator('#events').innerText(), /\bfeature\b/, 'the feature branch is checked out');
      assert.match(await page.locator('#events').innerText(), new RegExp(`model=acme/large-${width}\\b`));
      assert.match(await page.locator('#conv-model').innerText(), new RegExp(`^acme/large-${width} \\(picked`));

      const branch = `web/${width}`;
      await page.getByLabel('New branch').fill(branch);
      await page.getByRole('button', { name: 'Push to a branch' }).click();
      const pushed = page.locator(`#push .pushed[data-pushed-branch="${branch}"]`);
      await pushed.waitFor({ timeout: T });
      assert.match(await pushed.innerText(), new RegExp(`^Pushed 1 commit to ${branch}$`));
      assert.equal(
        git.git('private/app', ['show', `${branch}:FEATURE.md`]),
        `the feature branch\nfrom the page at ${width}\n`,
        'the git server has the commit on the new branch',
      );
      await noOverflow(page, width, 'the conversation with its push control');
      await page.locator('#push').scrollIntoViewIfNeeded();
      await shot('pushed');

      await page.getByLabel('New branch').fill(branch);
      await page.getByRole('button', { name: 'Push to a branch' }).click();
      await page.locator('#push-error').waitFor({ timeout: T });
      assert.match(await page.locator('#push-error').innerText(), /already has a branch web\//);
      await noOverflow(page, width, 'the push refusal');
      assert.ok(!(await page.content()).includes(TOKEN), 'the token is not on the page');
      assert.deepEqual(browser.consoleErrors, []);
    });
  }
});
