/**
 * Images in prompts against a real server, runner and demo agent: each image reaches the agent as an ACP
 * image block (the demo agent names its type, bytes and pixels), is kept once and shown in the history with
 * a url for its bytes (the key required); the refusals (count, size, type, magic bytes, a runtime that does
 * not advertise images, a body over the limit) store nothing; a deleted conversation takes its images along.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { request } from 'node:http';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { rowsOf } from '../src/server/store/engine-db.ts';
import { answerOf, call, type Json } from './helpers/http.ts';
import { FOUNTAIN_BIN, startStack, until, type Stack } from './web/harness.ts';
import { BLIND_DEMO_AGENT, GIF_1x1, JPEG_1x1, PNG_3x2, WEBP_1x1 } from './fixtures/images.ts';

const T = 120_000;

describe('images in prompts', () => {
  let stack: Stack;
  let agentId: string;
  let blindAgentId: string;
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);
  const img = (bytes: Buffer, media_type: string) => ({ data: bytes.toString('base64'), media_type });
  const turnsWithImages = async (): Promise<number> =>
    Number(
      rowsOf<{ n: string }>(
        await stack.db.execute(sql`SELECT count(*) AS n FROM turns WHERE jsonb_array_length(images) > 0`),
      )[0]!.n,
    );
  /** Whether the server keeps a blob of these bytes (the embedded database's are files in its data directory). */
  const stored = (bytes: Buffer): boolean => {
    const hex = createHash('sha256').update(bytes).digest('hex');
    return existsSync(join(stack.dataDir, 'blobs', hex.slice(0, 2), hex));
  };
  const ALL = [PNG_3x2, JPEG_1x1, GIF_1x1, WEBP_1x1];

  const turnDone = async (convId: string, turnId: string): Promise<Json> =>
    until(
      async () => {
        const r = await api('GET', `/api/conversations/${convId}/turns`);
        const t = (r.body.data as Json[]).find((x) => x.id === turnId);
        return t && ['completed', 'failed', 'interrupted'].includes(t.status) ? t : null;
      },
      `turn ${turnId} to end`,
      60_000,
    );
  const eventsOf = async (convId: string): Promise<Json[]> =>
    (await api('GET', `/api/conversations/${convId}/events?limit=1000`)).body.data;

  before(
    async () => {
      stack = await startStack();
      await stack.startRunner();
      const made = await api('POST', '/api/agents', {
        name: 'Looker',
        runtime: 'demo',
        model: 'fountain/demo',
        system: '',
        permission_policy: { default: 'auto_allow' },
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      agentId = made.body.data.id;
      const blind = await api('POST', '/api/agents', BLIND_DEMO_AGENT);
      assert.equal(blind.status, 201, JSON.stringify(blind.body));
      blindAgentId = blind.body.data.id;
    },
    { timeout: T },
  );
  after(async () => {
    await stack?.stop();
  });

  it('a first prompt and a later one carry images to the agent; the history names them and serves the bytes', {
    timeout: T,
  }, async () => {
    const created = await api('POST', '/api/conversations', {
      agent_id: agentId,
      prompt: 'what is in this picture?',
      images: [img(PNG_3x2, 'image/png')],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const convId = created.body.data.id;
    const first = await until(async () => {
      const r = await api('GET', `/api/conversations/${convId}/turns`);
      return r.body.data[0];
    }, 'the first turn');
    const done1 = await turnDone(convId, first.id);
    assert.equal(done1.status, 'completed', JSON.stringify(done1));
    assert.equal(done1.image_count, 1);
    assert.match(answerOf(await eventsOf(convId), first.id), /Image 1: image\/png, \d+ bytes, 3×2 px/);

    const sent = await api('POST', `/api/conversations/${convId}/prompts`, {
      prompt: 'and these?',
      images: [
        img(JPEG_1x1, 'image/jpeg'),
        img(GIF_1x1, 'image/gif'),
        img(WEBP_1x1, 'image/webp'),
        img(PNG_3x2, 'image/png'),
      ],
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const done2 = await turnDone(convId, sent.body.turn_id);
    assert.equal(done2.status, 'completed', JSON.stringify(done2));
    const said = answerOf(await eventsOf(convId), sent.body.turn_id);
    assert.match(said, /I received 4 images/);
    assert.match(said, /Image 1: image\/jpeg, \d+ bytes, 1×1 px/);
    assert.match(said, /Image 2: image\/gif, \d+ bytes, 1×1 px/);
    assert.match(said, /Image 3: image\/webp, \d+ bytes/);
    assert.match(said, /Image 4: image\/png, \d+ bytes, 3×2 px/);

    // The history: the turn lists its images, and its started event names them (no bytes in either).
    assert.deepEqual(
      done2.images.map((i: Json) => [i.position, i.media_type, i.size]),
      [
        [0, 'image/jpeg', JPEG_1x1.length],
        [1, 'image/gif', GIF_1x1.length],
        [2, 'image/webp', WEBP_1x1.length],
        [3, 'image/png', PNG_3x2.length],
      ],
    );
    const started = (await eventsOf(convId)).find(
      (e) => e.turn_id === sent.body.turn_id && e.stage === 'turn' && e.state === 'started',
    );
    const meta = JSON.parse(started.data);
    assert.deepEqual(
      meta.images.map((i: Json) => i.url),
      done2.images.map((i: Json) => i.url),
    );
    assert.ok(!started.data.includes(PNG_3x2.toString('base64')), 'the event carries no bytes');

    // The bytes, with their type, for the key's holder only.
    const url = stack.url + done2.images[3].url;
    const got = await fetch(url, { headers: { authorization: `Bearer ${stack.apiKey}` } });
    assert.equal(got.status, 200);
    assert.equal(got.headers.get('content-type'), 'image/png');
    assert.deepEqual(Buffer.from(await got.arrayBuffer()), PNG_3x2);
    assert.equal((await fetch(url)).status, 401);
    const other = `ftn_${'0'.repeat(64)}`;
    assert.equal((await fetch(url, { headers: { authorization: `Bearer ${other}` } })).status, 401);
    for (const bad of [
      done2.images[3].url.replace(/\/3$/, '/4'),
      done2.images[3].url.replace(/\/3$/, '/x'),
      done2.images[3].url.replace(sent.body.turn_id, first.id).replace(/\/3$/, '/1'),
      `/api/conversations/${convId}/turns/not-a-uuid/images/0`,
    ]) {
      const r = await fetch(stack.url + bad, { headers: { authorization: `Bearer ${stack.apiKey}` } });
      assert.equal(r.status, 404, bad);
    }

    // The same PNG, sent twice, is one blob; deleting the conversation takes them (no other turn names them).
    assert.ok(ALL.every(stored), 'each image kept');
    assert.equal(new Set([...done1.images, ...done2.images].map((i: Json) => i.url)).size, 5);
    assert.equal((await api('DELETE', `/api/conversations/${convId}`)).status, 204);
    assert.ok(!ALL.some(stored), 'the images went with the conversation');
    assert.equal((await fetch(url, { headers: { authorization: `Bearer ${stack.apiKey}` } })).status, 404);
  });

  it('refuses, storing nothing: too many, too large, an unknown type, bytes that are not the declared type', {
    timeout: T,
  }, async () => {
    const created = await api('POST', '/api/conversations', { agent_id: agentId });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const convId = created.body.data.id;
    const prompt = (images: unknown[]) =>
      api('POST', `/api/conversations/${convId}/prompts`, { prompt: 'look', images });
    const named = await turnsWithImages();
    const cases: Array<[unknown[], number, string, RegExp]> = [
      [Array.from({ length: 11 }, () => img(PNG_3x2, 'image/png')), 422, 'too_many_images', /at most 10 images/],
      [[img(Buffer.alloc(10 * 1024 * 1024 + 1, 1), 'image/png')], 413, 'image_too_large', /at most 10 MB/],
      [[img(PNG_3x2, 'image/bmp')], 422, 'unsupported_image_type', /PNG, JPEG, GIF or WebP/],
      [
        [img(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'), 'image/png')],
        422,
        'unsupported_image_type',
        /its bytes/,
      ],
      [
        [img(PNG_3x2, 'image/png'), img(GIF_1x1, 'image/jpeg')],
        422,
        'unsupported_image_type',
        /image 2 is declared image\/jpeg but its bytes are image\/gif/,
      ],
      [[{ data: '***', media_type: 'image/png' }], 422, 'invalid_image', /not base64/],
    ];
    for (const [images, status, code, words] of cases) {
      const r = await prompt(images);
      assert.deepEqual([r.status, r.body.error], [status, code], JSON.stringify(r.body).slice(0, 300));
      assert.match(r.body.message, words);
    }
    const made = await api('POST', '/api/conversations', {
      agent_id: agentId,
      prompt: 'x',
      images: [img(PNG_3x2, 'image/gif')],
    });
    assert.deepEqual([made.status, made.body.error], [422, 'unsupported_image_type']);
    assert.equal(await turnsWithImages(), named, 'no turn names an image');
    assert.equal((await api('GET', `/api/conversations/${convId}/turns`)).body.data.length, 0);
    assert.ok(!ALL.some(stored), 'no blob stored');
  });

  it('a runtime that does not advertise images: refused in words, before and after its agent answered', {
    timeout: T,
  }, async () => {
    // Not yet started: its capability is unknown, so the turn is taken and fails in words at the agent.
    const created = await api('POST', '/api/conversations', {
      agent_id: blindAgentId,
      prompt: 'look at this',
      images: [img(PNG_3x2, 'image/png')],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const convId = created.body.data.id;
    const first = await until(
      async () => (await api('GET', `/api/conversations/${convId}/turns`)).body.data[0],
      'turn',
    );
    const done = await turnDone(convId, first.id);
    assert.equal(done.status, 'failed');
    assert.match(done.reason ?? '', /custom runtime does not take images/);
    // Now known: refused at once, naming the runtime, nothing stored.
    const again = await api('POST', `/api/conversations/${convId}/prompts`, {
      prompt: 'and this?',
      images: [img(GIF_1x1, 'image/gif')],
    });
    assert.deepEqual(
      [again.status, again.body.error, again.body.runtime],
      [422, 'image_not_supported_by_runtime', 'custom'],
    );
    assert.match(again.body.message, /the custom runtime does not take images/);
    // Without images it still talks.
    const plain = await api('POST', `/api/conversations/${convId}/prompts`, { prompt: 'hello' });
    assert.equal(plain.status, 200, JSON.stringify(plain.body));
    assert.equal((await turnDone(convId, plain.body.turn_id)).status, 'completed');

    // Ten images of 10 MB pass the body limit (and are then refused for this runtime); more is a clear 413.
    const ten = Buffer.alloc(10 * 1024 * 1024, 0);
    PNG_3x2.copy(ten);
    const bigBody = Buffer.from(
      JSON.stringify({ prompt: 'ten', images: Array.from({ length: 10 }, () => img(ten, 'image/png')) }),
    );
    assert.ok(bigBody.length > 130 * 1024 * 1024);
    const big = new Promise<{ status: number; body: Json }>((resolve, reject) => {
      const req = request(`${stack.url}/api/conversations/${convId}/prompts`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${stack.apiKey}`,
          'content-type': 'application/json',
          'content-length': String(bigBody.length),
        },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.end(bigBody);
    });
    const bigR = await big;
    assert.deepEqual([bigR.status, bigR.body.error], [422, 'image_not_supported_by_runtime']);
    // Refused from its Content-Length, before a byte of it is read: the client need not send it all.
    const over = await new Promise<{ status: number; body: Json }>((resolve, reject) => {
      const req = request(`${stack.url}/api/conversations/${convId}/prompts`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${stack.apiKey}`,
          'content-type': 'application/json',
          'content-length': String(161 * 1024 * 1024),
        },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
          req.destroy();
        });
      });
      req.on('error', reject);
      req.write('{"prompt":"x","images":[');
    });
    assert.deepEqual([over.status, over.body.error], [413, 'payload_too_large']);
    assert.ok(!stored(ten) && !stored(GIF_1x1), 'nothing stored for the refused prompts');
  });

  it('fountain chat --image sends the file with the message (the real CLI against the server)', {
    timeout: T,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-img-'));
    writeFileSync(join(dir, 'pic.png'), PNG_3x2);
    writeFileSync(join(dir, 'notes.txt'), 'not an image');
    const env = {
      ...process.env,
      FOUNTAIN_API_KEY: stack.apiKey,
      FOUNTAIN_BASE_URL: stack.url,
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_HOME: dir,
    };
    // Spawned, not spawnSync: the server answers from this process's event loop.
    const run = (args: string[]): Promise<{ code: number | null; out: string; err: string }> =>
      new Promise((resolve) => {
        const child = spawn(process.execPath, [FOUNTAIN_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        let err = '';
        child.stdout.on('data', (d) => (out += d));
        child.stderr.on('data', (d) => (err += d));
        child.on('exit', (code) => resolve({ code, out, err }));
      });
    const bad = await run(['chat', 'Looker', '--message', 'see', '--image', join(dir, 'notes.txt')]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /notes\.txt is not a PNG, JPEG, GIF or WebP image/);
    const ok = await run(['chat', 'Looker', '--message', 'see this', '--image', join(dir, 'pic.png')]);
    assert.equal(ok.code, 0, ok.err);
    assert.match(ok.out, /Image 1: image\/png, \d+ bytes, 3×2 px/);
  });
});
