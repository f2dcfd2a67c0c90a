/**
 * Words and layout in chromium at 1280 and 390 px against a real stack: every signed-in page fits the
 * screen (document scrollWidth never wider than it), says no host path, API path or policy key, styles
 * every input, and asks before each delete; on a phone the header folds behind "Menu" and the conversations
 * list comes before the new-conversation form; the list previews each conversation's last message; the
 * agent form's model follows the runtime and warns of a missing credential before saving, and "Create
 * agent" lands on the agent.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { mintSignInLink } from '../../src/server/web/session.ts';
import { call, type Json } from '../helpers/http.ts';
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

/** What page text must never show: host paths, API paths, raw policy keys. */
const INTERNALS = /\/api\/|switch_mode|\bauto_allow\b|\bauto_deny\b|\/tmp\/|fountain-web-|runner-[0-9a-f]{32}/;

describe('words and layout', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let convId: string;
  let agentId: string;
  let envId: string;
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    const made = await api('POST', '/api/agents', {
      name: 'Demo',
      runtime: 'demo',
      model: 'fountain/demo',
      system: '',
      permission_policy: { default: 'ask' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    agentId = made.body.data.id;
    const env = await api('POST', '/api/environments', { name: 'with-a-rather-long-environment-name' });
    assert.equal(env.status, 201, JSON.stringify(env.body));
    envId = env.body.data.id;
    const cred = await api('PUT', '/api/account/inference-credentials/openai_api_key', {
      value: 'sk-test-words-layout',
      base_url: 'https://a-very-long-gateway-host-name.example.test/v1/openai/compatible',
      validate: false,
    });
    assert.ok(cred.status < 300, JSON.stringify(cred.body));
    const conv = await api('POST', '/api/conversations', { agent_id: agentId, prompt: 'run: uname -a' });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    convId = conv.body.data.id;
    // Answer the request the demo's command asks, so the page holds a tool card and its output.
    const asked = await until(async () => {
      const turns = (await api('GET', `/api/conversations/${convId}/turns`)).body.data as Json[];
      return turns.find((t) => t.pending_permission)?.pending_permission as Json;
    }, 'the permission request');
    await api('POST', `/api/conversations/${convId}/requests/${encodeURIComponent(asked.request_id)}`, {
      option_id: 'allow_once',
    });
    await until(
      async () => (await api('GET', `/api/conversations/${convId}`)).body.data.status === 'idle',
      'the turn to end',
    );
    browser = await launchChromium(T);
    await browser.page.goto(await mintSignInLink(stack.db, stack.accountId, stack.url));
    await browser.page.getByRole('heading', { name: 'Team' }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  const pages = () => [
    '/',
    '/conversations',
    `/conversations/${convId}`,
    '/agents',
    '/agents/new',
    `/agents/${agentId}/edit`,
    '/environments',
    '/environments/new',
    `/environments/${envId}/edit`,
    '/account/runners',
    '/account/api-keys',
    '/account/credentials',
    '/docs',
  ];

  for (const width of [1280, 390]) {
    it(`every page fits ${width} px, in plain words, inputs styled, deletes confirmed`, {
      timeout: 180_000,
    }, async () => {
      const { page } = browser;
      browser.consoleErrors.length = 0;
      await page.setViewportSize({ width, height: 800 });
      for (const path of pages()) {
        const res = await page.goto(`${stack.url}${path}`);
        assert.equal(res?.status(), 200, path);
        await page.waitForLoadState('load');
        const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(scrollWidth <= width, `${path} at ${width}px: the page is ${scrollWidth}px wide`);
        // The Runners page belongs to the runner installer's work; its words are checked there.
        if (path !== '/account/runners' && !path.startsWith('/docs')) {
          const text = await page.evaluate(() => document.body.innerText);
          assert.doesNotMatch(text, INTERNALS, `${path} shows an internal name`);
        }
        const unstyled = await page.evaluate(() =>
          [...document.querySelectorAll('input, select, textarea')]
            .filter((el) => {
              const t = (el as HTMLInputElement).type;
              if (['hidden', 'checkbox', 'radio', 'submit', 'button'].includes(t)) return false;
              // A file input drawn as its label's button (the message box's "Add images") is not seen itself.
              if (el.classList.contains('visually-hidden') && el.closest('label.button')) return false;
              const s = getComputedStyle(el);
              return s.borderTopLeftRadius !== '6px' || parseFloat(s.paddingLeft) < 8;
            })
            .map((el) => `${el.tagName.toLowerCase()}#${el.id}[${(el as HTMLInputElement).type}]`),
        );
        assert.deepEqual(unstyled, [], `${path}: unstyled inputs`);
        const unconfirmed = await page.evaluate(() =>
          [...document.querySelectorAll('form')]
            .filter((f) => /\/(delete|remove|revoke|terminate)$/.test(f.getAttribute('action') ?? ''))
            .filter((f) => !/confirm\(/.test(f.getAttribute('onsubmit') ?? '') && !f.hasAttribute('hx-confirm'))
            .map((f) => f.getAttribute('action')),
        );
        assert.deepEqual(unconfirmed, [], `${path}: deletes without a confirmation`);
        await screenshot(page, `words-${width}${path.replace(/[^a-z0-9]+/gi, '_')}.png`);
      }
      assert.deepEqual(browser.consoleErrors, []);
    });

    it(`the header and the conversations list at ${width} px`, async () => {
      const { page } = browser;
      await page.setViewportSize({ width, height: 800 });
      await page.goto(`${stack.url}/conversations`);
      const menu = page.getByRole('button', { name: 'Menu' });
      const agentsLink = page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Agents' });
      if (width < 640) {
        // One row: the brand and "Menu"; the links open under it.
        assert.equal(await agentsLink.isVisible(), false);
        const header = await page.locator('header.top').boundingBox();
        assert.ok(header && header.height < 70, `the header is ${header?.height}px tall`);
        await menu.click();
        await agentsLink.waitFor();
        assert.equal(await menu.getAttribute('aria-expanded'), 'true');
        await screenshot(page, `words-${width}-menu-open.png`, false);
        await menu.click();
        // The list comes first, then the form that starts a new one.
        const list = await page.locator('.conv-list').boundingBox();
        const form = await page.locator('#new-conversation').boundingBox();
        assert.ok(list && form && list.y < form.y, 'the list sits above the new-conversation form');
      } else {
        assert.equal(await menu.isVisible(), false);
        assert.ok(await agentsLink.isVisible());
      }
      // Titled by the gist of its first message, not "Demo: …".
      const title = page.locator(`li.conv-item[data-conversation-id="${convId}"] .conv-title`);
      assert.equal(await title.innerText(), 'run: uname -a');
      const preview = page.locator(`li.conv-item[data-conversation-id="${convId}"] .conv-preview`);
      assert.match(await preview.innerText(), /^Demo: I ran uname -a; it exited with code 0/);
    });
  }

  it('the agent form: the model follows the runtime, a missing credential is said before saving', async () => {
    const { page } = browser;
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${stack.url}/agents/new`);
      const model = page.getByLabel('Model');
      const warning = page.locator('#credential_warning');
      assert.equal(await model.inputValue(), 'fountain/demo');
      assert.equal(await warning.isVisible(), false);
      await page.getByLabel('Runtime').selectOption('claude');
      assert.equal(await model.inputValue(), 'anthropic/claude-sonnet-4-5');
      assert.match(await page.locator('#model_hint').innerText(), /anthropic\/claude-opus-4-1/);
      await warning.waitFor();
      assert.match(await warning.innerText(), /No Claude Code OAuth token .* or Anthropic API key is set/);
      assert.equal(await warning.getByRole('link').getAttribute('href'), '/account/credentials');
      await screenshot(page, `words-${width}-agent-form-warning.png`);
      // Codex takes OpenAI models, and the account has that key: no warning.
      await page.getByLabel('Runtime').selectOption('codex');
      assert.equal(await model.inputValue(), 'openai/gpt-5');
      await warning.waitFor({ state: 'hidden' });
      // A model typed by hand stays when the next runtime takes it too.
      await model.fill('openai/gpt-5-codex');
      await page.getByLabel('Runtime').selectOption('opencode');
      assert.equal(await model.inputValue(), 'openai/gpt-5-codex');
      await model.fill('google/gemini-2.5-pro');
      await warning.getByText('No Gemini API key is set').waitFor();
    }
    // Create agent lands on the agent.
    await page.goto(`${stack.url}/agents/new`);
    await page.getByLabel('Name').fill('Landed');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await page.locator('#agent-created', { hasText: 'Created Landed' }).waitFor();
    assert.match(new URL(page.url()).pathname, /^\/agents\/[0-9a-f-]{36}\/edit$/);
    await page.getByRole('heading', { name: 'Start a conversation' }).waitFor();
  });
});
