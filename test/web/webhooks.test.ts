/**
 * The Webhooks page in chromium against a real stack, at 1280 and 390 px: a webhook is added with its
 * secret shown once, a runner going offline reaches a local receiver signed, and the delivery and its
 * attempt show on the endpoint's page; turning it off and removing it (after a confirmation).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { verifyWebhook } from '../../src/server/webhooks/signature.ts';
import { call, type Json } from '../helpers/http.ts';
import {
  launchChromium,
  screenshot,
  skipWithoutChromium,
  startStack,
  type Browser,
  type Stack,
  until,
} from './harness.ts';

const T = 20_000;

for (const width of [1280, 390]) {
  describe(`webhooks in the web UI at ${width} px (chromium)`, { skip: skipWithoutChromium }, () => {
    let stack: Stack;
    let browser: Browser;
    let page: Page;
    let receiver: Server;
    let url = '';
    const got: Array<{ body: string; signature: string | undefined; timestamp: string | undefined }> = [];
    const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);

    before(async () => {
      receiver = createServer((req, res) => {
        let body = '';
        req.on('data', (d: Buffer) => (body += d.toString()));
        req.on('end', () => {
          got.push({
            body,
            signature: req.headers['x-fountain-signature'] as string,
            timestamp: req.headers['x-fountain-timestamp'] as string,
          });
          res.end('ok');
        });
      });
      await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
      url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      stack = await startStack();
      browser = await launchChromium(T);
      page = browser.page;
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${stack.url}/signin`);
      await page.getByLabel('API key').fill(stack.apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Team' }).waitFor();
    });

    after(async () => {
      await browser?.close();
      await stack?.stop();
      await new Promise<void>((r) => receiver?.close(() => r()));
    });

    it('adds a webhook, shows its secret once, delivers signed and shows the attempt; then turns it off and removes it', async () => {
      await page.goto(`${stack.url}/account/webhooks`);
      await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
      await page.getByLabel('Address your service listens at').fill(url);
      await page.getByLabel('a runner went offline').check();
      await page.getByRole('button', { name: 'Add webhook' }).click();
      const secret = (await page.locator('code.secret').textContent())!.trim();
      assert.match(secret, /^whsec_/);
      await screenshot(page, `webhooks-added-${width}.png`);
      assert.ok(
        await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
        'nothing overflows the page',
      );
      await page.goto(`${stack.url}/account/webhooks`);
      assert.ok(!(await page.content()).includes(secret), 'the secret is not shown again');

      await stack.startRunner();
      await stack.stopRunner();
      const delivered = await until(
        () => got.find((g) => JSON.parse(g.body).type === 'runner.offline'),
        'runner.offline',
        T,
      );
      assert.ok(verifyWebhook(secret, delivered, delivered.body));

      const [hook] = (await api('GET', '/api/webhooks')).body.data as Json[];
      await page.getByRole('link', { name: url }).click();
      await page.getByText('a runner went offline').first().waitFor();
      await page
        .getByText(/answered 200 in \d+ ms/)
        .first()
        .waitFor();
      await screenshot(page, `webhooks-deliveries-${width}.png`);
      assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));

      await page.goto(`${stack.url}/account/webhooks`);
      await page.getByRole('button', { name: 'Turn off' }).click();
      await page.getByText('off: disabled by the account').waitFor();
      assert.equal((await api('GET', `/api/webhooks/${hook.id}`)).body.data.enabled, false);
      page.once('dialog', (d) => void d.accept());
      await page.getByRole('button', { name: `Remove the webhook to ${url}` }).click();
      await page.getByText('No webhooks yet.').waitFor();
      assert.deepEqual(browser.consoleErrors, []);
    });
  });
}
