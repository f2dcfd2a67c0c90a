/**
 * Images in the conversation page's message box, in chromium at 1280 and 390 px against a real server,
 * runner and demo agent: a picture pasted from the clipboard and one dropped on the box become chips
 * (thumbnail, name and size, remove), a non-image file, a file over 10 MB and an eleventh image are refused
 * in words before anything is sent, Enter sends the text with the images, the agent names each image it
 * got, and the user's message shows their thumbnails, served through a route the session guards. The
 * server refuses in words what the page's check would have (bytes not their type), and a runtime that does
 * not take images. No page wider than the screen, no console error.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { mintSignInLink } from '../../src/server/web/session.ts';
import { call } from '../helpers/http.ts';
import { BLIND_DEMO_AGENT, GIF_1x1, PNG_3x2, PNG_48x32 } from '../fixtures/images.ts';
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

/** Files as the page would get them from the desktop: name, type and bytes. */
interface DroppedFile {
  name: string;
  type: string;
  base64?: string;
  /** Instead of bytes: this many zero bytes (a file too large, without shipping it through the protocol). */
  zeros?: number;
}

/** Drops the files on the message box, as a drag from the desktop does (a DataTransfer holding Files). */
async function drop(page: Page, files: DroppedFile[]): Promise<void> {
  const dataTransfer = await page.evaluateHandle((list) => {
    const dt = new DataTransfer();
    for (const f of list) {
      const bytes = f.base64 ? Uint8Array.from(atob(f.base64), (ch) => ch.charCodeAt(0)) : new Uint8Array(f.zeros ?? 0);
      dt.items.add(new File([bytes], f.name, { type: f.type }));
    }
    return dt;
  }, files);
  const box = page.getByLabel('Message', { exact: true });
  await box.dispatchEvent('dragenter', { dataTransfer });
  await box.dispatchEvent('dragover', { dataTransfer });
  await box.dispatchEvent('drop', { dataTransfer });
}

/** Puts a PNG on the system clipboard (the async clipboard API, as a screenshot tool would) and pastes it. */
async function paste(page: Page, png: Buffer): Promise<void> {
  await page.evaluate(async (b64) => {
    const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
    await navigator.clipboard.write([new ClipboardItem({ 'image/png': new Blob([bytes], { type: 'image/png' }) })]);
  }, png.toString('base64'));
  const box = page.getByLabel('Message', { exact: true });
  await box.focus();
  await page.keyboard.press('Control+V');
}

const chips = (page: Page) => page.locator('#prompt-images li');
const note = (page: Page) => page.locator('#image-note');

describe('images in the message box', { skip: skipWithoutChromium }, () => {
  let stack: Stack;
  let browser: Browser;
  let agentId: string;
  let blindAgentId: string;

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    const made = await call(stack.url, stack.apiKey, 'POST', '/api/agents', {
      name: 'Looker',
      runtime: 'demo',
      model: 'fountain/demo',
      system: '',
      permission_policy: { default: 'auto_allow' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    agentId = made.body.data.id;
    const blind = await call(stack.url, stack.apiKey, 'POST', '/api/agents', BLIND_DEMO_AGENT);
    assert.equal(blind.status, 201, JSON.stringify(blind.body));
    blindAgentId = blind.body.data.id;
    browser = await launchChromium(T);
    await browser.ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.url });
    await browser.page.goto(await mintSignInLink(stack.db, stack.accountId, stack.url));
    await browser.page.getByRole('heading', { name: 'Team' }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  const open = async (page: Page, agent: string): Promise<string> => {
    const conv = await call(stack.url, stack.apiKey, 'POST', '/api/conversations', {
      agent_id: agent,
      prompt: 'hello',
    });
    assert.equal(conv.status, 201, JSON.stringify(conv.body));
    await page.goto(`${stack.url}/conversations/${conv.body.data.id}`);
    await until(async () => (await turnsDone(page)) === 1, 'the first turn to end', T);
    return conv.body.data.id as string;
  };

  for (const width of [1280, 390]) {
    it(`paste and drop at ${width} px`, { timeout: 180_000 }, async () => {
      const { page } = browser;
      browser.consoleErrors.length = 0;
      await page.setViewportSize({ width, height: 800 });
      const shot = (step: string, fullPage = true) => screenshot(page, `prompt-images-${width}-${step}.png`, fullPage);
      const convId = await open(page, agentId);
      await page.getByText(/paste or drop images/).waitFor();

      // Pasted from the clipboard, then dropped from the desktop: two chips, each with its thumbnail.
      await paste(page, PNG_48x32);
      await until(async () => (await chips(page).count()) === 1, 'the pasted image chip', T);
      await drop(page, [{ name: 'dot.png', type: 'image/png', base64: PNG_3x2.toString('base64') }]);
      await until(async () => (await chips(page).count()) === 2, 'the dropped image chip', T);
      assert.match(await chips(page).nth(1).innerText(), new RegExp(`^dot\\.png · ${PNG_3x2.length} bytes`));
      const thumbWidths = await chips(page)
        .locator('img')
        .evaluateAll((imgs) => imgs.map((i) => (i as HTMLImageElement).naturalWidth));
      assert.deepEqual(thumbWidths, [48, 3], 'both chips show their image');

      // Refused in words, nothing added: a file that is not an image, and one over 10 MB.
      await drop(page, [{ name: 'notes.txt', type: 'text/plain', base64: Buffer.from('hello').toString('base64') }]);
      await until(async () => /notes\.txt is not an image/.test(await note(page).innerText()), 'the refusal', T);
      assert.equal(
        await note(page).innerText(),
        'notes.txt is not an image this box takes: send PNG, JPEG, GIF or WebP.',
      );
      await drop(page, [{ name: 'huge.png', type: 'image/png', zeros: 10 * 1024 * 1024 + 1 }]);
      await until(async () => /huge\.png is 10\.0 MB/.test(await note(page).innerText()), 'the size refusal', T);
      assert.match(await note(page).innerText(), /each image may be at most 10\.0 MB/);
      assert.equal(await chips(page).count(), 2);

      // A third, removed again with its ×.
      await drop(page, [{ name: 'spare.gif', type: 'image/gif', base64: GIF_1x1.toString('base64') }]);
      await until(async () => (await chips(page).count()) === 3, 'the third chip', T);
      await noOverflow(page, width, 'the message box with its chips');
      await page.locator('#composer').scrollIntoViewIfNeeded();
      await shot('chips');
      await page.getByRole('button', { name: 'Remove spare.gif' }).click();
      assert.equal(await chips(page).count(), 2);

      // Enter sends the text with both images; the agent names each, in order.
      const box = page.getByLabel('Message', { exact: true });
      await box.fill('What are these?');
      await box.press('Enter');
      await until(async () => (await turnsDone(page)) === 2, 'the turn with the images to end', T);
      const answer = await page.locator('#events .ev.text').last().innerText();
      assert.match(answer, /I received 2 images\./);
      // The pasted picture went through the clipboard (which may re-encode it): its pixels stay 48×32.
      assert.match(answer, /Image 1: image\/png, \d+ bytes, 48×32 px/);
      assert.ok(answer.includes(`Image 2: image/png, ${PNG_3x2.length} bytes, 3×2 px`), answer);
      assert.equal(await chips(page).count(), 0, 'the chips left with the message');
      assert.equal(await box.inputValue(), '');

      // The user's message shows their thumbnails, live and after a reload, loaded through the page's route.
      const thumbs = async () => {
        const mine = page.locator('#events .ev.you').last().locator('img.thumb');
        await until(async () => (await mine.count()) === 2, 'two thumbnails', T);
        await until(
          async () =>
            (await mine.evaluateAll((imgs) => imgs.every((i) => (i as HTMLImageElement).naturalWidth > 0))) || null,
          'the thumbnails to load',
          T,
        );
        return mine;
      };
      let mine = await thumbs();
      assert.equal(await mine.nth(1).getAttribute('alt'), `Image 2: PNG, ${PNG_3x2.length} bytes`);
      await page.reload();
      mine = await thumbs();
      const src = (await mine.nth(1).getAttribute('src'))!;
      assert.match(src, new RegExp(`^/conversations/${convId}/turns/[0-9a-f-]{36}/images/1$`));
      const withSession = await page.request.get(stack.url + src);
      assert.equal(withSession.status(), 200);
      assert.equal(withSession.headers()['content-type'], 'image/png');
      assert.deepEqual(Buffer.from(await withSession.body()), PNG_3x2);
      // Without the session, the sign-in page, never the bytes.
      const signedOut = await fetch(stack.url + src, { redirect: 'manual' });
      assert.equal(signedOut.status, 303);
      assert.match(signedOut.headers.get('location') ?? '', /^\/signin/);
      // The events carry addresses only, never the bytes.
      const events = await call(stack.url, stack.apiKey, 'GET', `/api/conversations/${convId}/events?limit=1000`);
      assert.doesNotMatch(JSON.stringify(events.body), new RegExp(PNG_3x2.toString('base64').slice(0, 40)));

      await noOverflow(page, width, 'the conversation with the thumbnails');
      await page.locator('#events .ev.you').last().scrollIntoViewIfNeeded();
      await shot('sent', false);
      assert.deepEqual(browser.consoleErrors, []);
    });
  }

  it('at most 10 images, checked in the page and by the server', { timeout: 180_000 }, async () => {
    const { page } = browser;
    browser.consoleErrors.length = 0;
    await page.setViewportSize({ width: 1280, height: 800 });
    const convId = await open(page, agentId);
    const eleven = Array.from({ length: 11 }, (_, i) => ({
      name: `dot-${i + 1}.png`,
      type: 'image/png',
      base64: PNG_3x2.toString('base64'),
    }));
    await drop(page, eleven);
    await until(async () => /at most 10 images/.test(await note(page).innerText()), 'the count refusal', T);
    assert.equal(await note(page).innerText(), 'dot-11.png was not added: at most 10 images go with one message.');
    assert.equal(await chips(page).count(), 10);

    // What the page checks, the server checks again, and says so in words: bytes that are not their type.
    const form = {
      prompt: 'hello',
      image: `data:image/png;base64,${GIF_1x1.toString('base64')}`,
    };
    const htmx = await page.request.post(`${stack.url}/conversations/${convId}/prompts`, {
      form,
      headers: { 'hx-request': 'true', origin: stack.url },
    });
    assert.equal(htmx.status(), 200);
    assert.match(await htmx.text(), /Image 1 is declared image\/png but its bytes are image\/gif\./);
    const plain = await page.request.post(`${stack.url}/conversations/${convId}/prompts`, {
      form,
      headers: { origin: stack.url },
      maxRedirects: 0,
    });
    assert.equal(plain.status(), 422);
    const turns = await call(stack.url, stack.apiKey, 'GET', `/api/conversations/${convId}/turns`);
    assert.equal(turns.body.data.length, 1, 'a refused message starts no turn');
    assert.deepEqual(browser.consoleErrors, []);
  });

  it('a runtime that takes no images: refused in words, the chips kept', { timeout: 180_000 }, async () => {
    const { page } = browser;
    browser.consoleErrors.length = 0;
    await page.setViewportSize({ width: 390, height: 800 });
    await open(page, blindAgentId);
    await drop(page, [{ name: 'dot.png', type: 'image/png', base64: PNG_3x2.toString('base64') }]);
    await until(async () => (await chips(page).count()) === 1, 'the chip', T);
    const box = page.getByLabel('Message', { exact: true });
    await box.fill('Look at this');
    await box.press('Enter');
    const result = page.locator('#prompt-result .error');
    await result.waitFor();
    assert.match(await result.innerText(), /^The custom runtime does not take images/);
    assert.equal(await chips(page).count(), 1, 'kept, to send again without them or elsewhere');
    assert.equal(await box.inputValue(), 'Look at this');
    await noOverflow(page, 390, 'the refusal');
    await page.locator('#composer').scrollIntoViewIfNeeded();
    await screenshot(page, 'prompt-images-390-refused.png', false);
    assert.deepEqual(browser.consoleErrors, []);
  });
});
