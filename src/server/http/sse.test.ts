import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { encodeSse, sseOncePer, type SseMessage } from './sse.ts';

const MESSAGES: SseMessage[] = [
  { id: '17', event: 'output', data: '{"a":"b"}' },
  { event: 'stage', data: 'line one\nline two\r\nline three\rend' },
  { data: '' },
  { id: '0', data: 'x' },
];

test("encodeSse writes what hono's writeSSE writes, byte for byte", async () => {
  const app = new Hono();
  app.get('/', (c) =>
    streamSSE(c, async (s) => {
      for (const m of MESSAGES) await s.writeSSE({ ...m });
    }),
  );
  const viaHono = Buffer.from(await (await app.request('/')).arrayBuffer());
  const ours = Buffer.concat(MESSAGES.map((m) => encodeSse(m)));
  assert.equal(ours.toString(), viaHono.toString());
  assert.throws(() => encodeSse({ event: 'a\nb', data: '' }), /must not contain/);
});

test('sseOncePer builds a message once per key and hands every caller the same bytes', () => {
  let built = 0;
  const encode = sseOncePer((k: { n: number }) => {
    built++;
    return { id: String(k.n), data: 'd' };
  });
  const one = { n: 1 };
  const first = encode(one);
  for (let i = 0; i < 5; i++) assert.equal(encode(one), first);
  assert.equal(built, 1);
  assert.notEqual(encode({ n: 1 }), first, 'another event object is encoded on its own');
  assert.equal(built, 2);
});
