/**
 * A newcomer's first minutes in the browser, as real processes: `fountain up` on a fresh home, the
 * printed one-time link opened in chromium, the demo agent messaged on the Team page, a permission answered.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { FOUNTAIN_BIN, launchChromium, screenshot, skipWithoutChromium, until, type Browser } from './harness.ts';

// The first sandbox is a cold start on a shared machine: generous, and never asserted as a duration.
const T = 60_000;

/** The environment of someone who has never run Fountain: their own HOME, none of our variables. */
function newcomerEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, FOUNTAIN_LOG_FORMAT: 'json' };
  for (const k of Object.keys(env)) if (k.startsWith('FOUNTAIN_') && k !== 'FOUNTAIN_LOG_FORMAT') delete env[k];
  return env;
}

const shoot = async (page: Page, name: string) => {
  for (const width of [390, 1280]) {
    await page.setViewportSize({ width, height: 900 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `${name} at ${width}px is ${overflow}px wider than the screen`);
    // Long sandbox paths and replies must wrap inside their card, not run over its edge.
    const spilled = await page
      .locator('.card')
      .evaluateAll((els) => els.filter((e) => e.scrollWidth - e.clientWidth > 1).map((e) => e.className));
    assert.deepEqual(spilled, [], `${name} at ${width}px`);
    await screenshot(page, `new-user_${width}_${name}.png`);
  }
};

describe('a new user: fountain up, the printed link, the demo agent', { skip: skipWithoutChromium }, () => {
  let home: string;
  let up: ReturnType<typeof spawn>;
  let exited: Promise<number | null>;
  let out = '';
  let err = '';
  let browser: Browser;
  let page: Page;
  let link: string;
  let base: string;

  before(async () => {
    home = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-newcomer-')));
    up = spawn(process.execPath, [FOUNTAIN_BIN, 'up', '--port', '0'], {
      env: newcomerEnv(home),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    up.stdout!.on('data', (d) => (out += d));
    up.stderr!.on('data', (d) => (err += d));
    exited = new Promise((r) => up.on('exit', (code) => r(code)));
    await until(
      () => out.includes('Ctrl-C stops everything') || up.exitCode !== null,
      `fountain up to start (${err})`,
      180_000,
    );
    browser = await launchChromium(T);
    page = browser.page;
  });

  after(async () => {
    await browser?.close();
    if (up && up.exitCode === null) {
      up.kill('SIGKILL');
      await exited;
    }
    if (home) rmSync(home, { recursive: true, force: true });
  });

  it('prints the link on a line of its own, where data lives, and how to stop', () => {
    assert.equal(up.exitCode, null, `fountain up exited early:\n${out}\n${err}`);
    const m = /^\s+(http:\/\/127\.0\.0\.1:(\d+)\/signin\/link\?token=fst_[0-9a-f]+)$/m.exec(out);
    assert.ok(m, out);
    link = m[1]!;
    base = `http://127.0.0.1:${m[2]}`;
    assert.match(out, new RegExp(`^Fountain is up at ${base}$`, 'm'));
    assert.match(out, /works once, within 15 minutes/);
    assert.match(out, /demo agent: created — message it on the Team page/);
    assert.ok(out.includes(`data: ${join(home, '.fountain', 'server')} (embedded database)`), out);
    assert.ok(out.includes(`saved as profile "default" in ${join(home, '.fountain', 'credentials')}`), out);
    assert.match(out, /Ctrl-C stops everything\. Your data stays/);
    assert.ok(existsSync(join(home, '.fountain', 'credentials')));
  });

  it('opens the link straight into a signed-in Team page with the demo agent on it', async () => {
    await page.goto(link);
    assert.equal(page.url(), `${base}/`);
    await page.getByRole('heading', { name: 'Team', level: 1 }).waitFor();
    assert.equal(await page.getByLabel('API key').count(), 0, 'no sign-in form');
    const card = page.locator('section.mate', { has: page.getByRole('heading', { name: 'demo' }) });
    await card.getByText('No conversation yet: a message starts one.').waitFor();
    await shoot(page, 'team-first');
  });

  it('messages the demo agent and sees its answer stream onto the Team page', async () => {
    const card = page.locator('section.mate', { has: page.getByRole('heading', { name: 'demo' }) });
    await card.getByLabel('Message demo').fill('hello from a newcomer');
    await card.getByRole('button', { name: 'Send' }).click();
    await card.getByText('Sent.').waitFor();
    assert.equal(await card.getByLabel('Message demo').inputValue(), '', 'the box is ready for the next message');
    await card.locator('[data-preview="them"]', { hasText: 'You said: hello from a newcomer' }).waitFor();
    await card.locator('.mate-status[data-presence="online"]').waitFor();
  });

  it('asks permission for a command, answered with the buttons in the conversation', async () => {
    const card = page.locator('section.mate', { has: page.getByRole('heading', { name: 'demo' }) });
    await card.getByLabel('Message demo').fill('run: echo newcomer-ok');
    await card.getByRole('button', { name: 'Send' }).click();
    await card
      .locator('[data-preview="asking"]', { hasText: 'demo asks permission: Run `echo newcomer-ok`' })
      .waitFor();
    await card.getByRole('link', { name: 'Answer in the conversation' }).click();

    const events = page.locator('#events');
    await events.getByText('You said: hello from a newcomer').waitFor();
    await page.getByRole('button', { name: 'Allow once' }).click();
    await events.getByText('Answered: Allow once').waitFor();
    await page.waitForFunction(
      () => document.querySelector('#events')?.textContent?.includes('exited with code 0'),
      undefined,
      { timeout: T },
    );
    await page.locator('[data-turn-state="done"]').nth(1).waitFor();
    assert.match(await events.innerText(), /newcomer-ok/);
    assert.equal(await page.getByRole('button', { name: 'Allow once' }).count(), 0, 'no stale buttons');
    await shoot(page, 'conversation');
  });

  it('finds the answer on the Team page and in the reloaded conversation', async () => {
    const conversation = page.url();
    await page.goto(conversation);
    const events = page.locator('#events');
    await events.locator('.ev.text', { hasText: 'You said: hello from a newcomer' }).waitFor();
    await events.locator('.ev.text', { hasText: 'I ran echo newcomer-ok; it exited with code 0' }).waitFor();
    await page.goto(`${base}/`);
    await page.locator('[data-preview="them"]', { hasText: 'I ran `echo newcomer-ok`' }).waitFor();
    await shoot(page, 'team-after');
    assert.deepEqual(browser.consoleErrors, []);
  });

  it('clicking the spent link again: home when signed in, a page in words otherwise', async () => {
    await page.goto(link);
    await page.getByRole('heading', { name: 'Team', level: 1 }).waitFor();

    // Another browser, or this one signed out: no session to fall back on.
    await browser.ctx.clearCookies();
    const res = await page.goto(link);
    assert.equal(res?.status(), 401);
    assert.match(res?.headers()['content-type'] ?? '', /text\/html/);
    const alert = page.getByRole('alert').filter({ hasText: 'This sign-in link has already been used' });
    await alert.waitFor();
    assert.match(await alert.innerText(), /paste the owner API key that `fountain up` printed/);
    await page.getByLabel('API key').waitFor();
  });

  it('stops on Ctrl-C and keeps the data for next time', async () => {
    up.kill('SIGINT');
    assert.equal(await exited, 0, err);
    assert.match(out, /stopping…/);
    assert.ok(existsSync(join(home, '.fountain', 'server', 'pgdata')));
  });
});
