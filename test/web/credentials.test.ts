/**
 * The Model credentials page in chromium against a real stack: a credential is set with a gateway
 * base URL, listed without its value (on the page and in the API), and removed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { call, type Json } from '../helpers/http.ts';
import { launchChromium, skipWithoutChromium, startStack, type Browser, type Stack } from './harness.ts';

const T = 20_000;

describe('model credentials in the web UI (chromium)', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  const KEY = 'sk-ant-web-test-9d41c7e2b8';
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);

  before(async () => {
    stack = await startStack();
    browser = await launchChromium(T);
    page = browser.page;
    await page.goto(`${stack.url}/signin`);
    await page.getByLabel('API key').fill(stack.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Team' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('sets a key with a base URL, never shows the value again, and removes it', async () => {
    await page.getByRole('link', { name: 'Model credentials' }).click();
    await page.getByLabel('Credential').selectOption('anthropic_api_key');
    await page.getByLabel('Key or token').fill(KEY);
    await page.getByLabel(/Base URL/).fill('https://gateway.example.test');
    // Not checked against the provider: this test has no network beyond loopback.
    await page.getByLabel('Check it against the provider before saving').uncheck();
    await page.getByRole('button', { name: 'Save credential' }).click();
    await page.getByRole('button', { name: 'Remove anthropic_api_key' }).waitFor();
    await page.getByText('https://gateway.example.test').waitFor();
    // POST-redirect-GET: the page after saving is a GET, so a reload sends nothing again.
    assert.equal(
      new URL(page.url()).pathname + new URL(page.url()).search,
      '/account/credentials?saved=anthropic_api_key',
    );
    await page.getByRole('status').filter({ hasText: 'anthropic_api_key saved.' }).waitFor();
    await page.reload();
    await page.getByRole('status').filter({ hasText: 'anthropic_api_key saved.' }).waitFor();
    assert.ok(!(await page.content()).includes(KEY), 'the page never shows the stored value');

    const listed = (await api('GET', '/api/account/inference-credentials')).body;
    assert.ok(!JSON.stringify(listed).includes(KEY), 'the API lists it without its value');
    const row = (listed.data as Json[]).find((r) => r.provider === 'anthropic_api_key');
    assert.equal(row?.base_url, 'https://gateway.example.test');

    // Removing asks first: dismissed, nothing happens; accepted, the credential goes.
    const asked: string[] = [];
    page.once('dialog', (d) => {
      asked.push(d.message());
      void d.dismiss();
    });
    await page.getByRole('button', { name: 'Remove anthropic_api_key' }).click();
    await page.waitForTimeout(200);
    assert.match(asked.join(), /Remove the anthropic_api_key credential\?/);
    assert.equal(await page.getByRole('button', { name: 'Remove anthropic_api_key' }).count(), 1);
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Remove anthropic_api_key' }).click();
    await page.getByRole('button', { name: 'Remove anthropic_api_key' }).waitFor({ state: 'detached' });
    const after = (await api('GET', '/api/account/inference-credentials')).body.data as Json[];
    assert.equal(
      after.find((r) => r.provider === 'anthropic_api_key'),
      undefined,
    );
  });
});
