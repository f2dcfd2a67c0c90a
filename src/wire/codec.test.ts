import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeBase64,
  decodeBase64Bytes,
  decodeFrame,
  decodeOutputFrameBytes,
  encodeBase64,
  encodeFrame,
  encodeFrameBytes,
  outputFrame,
} from './index.ts';

test('requests decode by op and keep their fields', () => {
  const r = decodeFrame(
    '{"id":7,"op":"spawn","name":"runner-x","cmd":"claude-agent-acp","args":[],"env":[["K","v"]],"dir":"/home/sprite","stdin":true,"detachable":true}',
  );
  assert.equal(r.kind, 'request');
  if (r.kind === 'request' && r.request.op === 'spawn') assert.deepEqual(r.request.env, [['K', 'v']]);
});

test('unknown ops are not_supported and keep the id so they can be answered', () => {
  assert.deepEqual(decodeFrame('{"id":3,"op":"fly"}'), {
    kind: 'refused',
    code: 'not_supported',
    detail: 'fly',
    id: 3,
  });
});

test('bad input is refused, never thrown', () => {
  for (const text of ['not json', '[]', '42', '{"x":1}', '{"id":"a","op":"get"}', '{"stream":"stdout"}']) {
    const r = decodeFrame(text);
    assert.equal(r.kind, 'refused', text);
  }
  const bad64 = decodeFrame('{"id":1,"op":"stdin","session_id":"s-1","data":"%%%"}');
  assert.equal(bad64.kind, 'refused');
  if (bad64.kind === 'refused') assert.equal(bad64.id, 1);
});

test('replies and stream frames round-trip', () => {
  const reply = { id: 4, ok: false as const, error: 'command_exited', detail: 'gone' };
  assert.deepEqual(decodeFrame(encodeFrame(reply)), { kind: 'reply', reply });
  const frame = { stream: 'stdout' as const, session_id: 's-1-1', data: 'aGk=', replay_for: 3 };
  assert.deepEqual(decodeFrame(encodeFrame(frame)), { kind: 'stream', frame });
  assert.equal(decodeBase64('aGk=')?.toString(), 'hi');
  assert.equal(decodeBase64('aGk'), null);
});

test('decodeBase64 accepts exactly what the strict base64 grammar accepts', () => {
  const strict = /^[A-Za-z0-9+/]*={0,2}$/;
  const alphabet = ['A', 'z', '0', '+', '/', '=', '-', '_', ' ', '\n', 'Ł', 'Á', '\u0000', '"', 'é', '\u0141'];
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  for (let i = 0; i < 20_000; i++) {
    const len = rand(13);
    let text = '';
    for (let j = 0; j < len; j++) text += rand(3) === 0 ? alphabet[rand(alphabet.length)] : 'QUJD'[rand(4)];
    const expected = text.length % 4 === 0 && strict.test(text);
    const got = decodeBase64(text);
    assert.equal(got !== null, expected, JSON.stringify(text));
    if (got) assert.deepEqual(got, Buffer.from(text, 'base64'));
  }
  assert.deepEqual(decodeBase64(''), Buffer.alloc(0));
  assert.equal(decodeBase64('QUJ\u0141'), null);
  assert.equal(decodeBase64('ab==cd=='), null);
});

test('encodeBase64 encodes a view of a larger buffer without its neighbours', () => {
  const whole = Buffer.from('xxhiyy');
  assert.equal(encodeBase64(whole.subarray(2, 4)), 'aGk=');
  assert.equal(encodeBase64(new Uint8Array(whole.buffer, whole.byteOffset + 2, 2)), 'aGk=');
});

test('output frames built from bytes encode to the same JSON as JSON.stringify', () => {
  const bytes = Buffer.from('any "bytes" \\ \n\u0000 at all');
  for (const replayFor of [undefined, 0, 42]) {
    const frame = outputFrame('stderr', 's-"quoted"-1', bytes, replayFor);
    const text = encodeFrame(frame);
    assert.deepEqual(JSON.parse(text), JSON.parse(JSON.stringify(frame)));
    const back = decodeFrame(text);
    assert.equal(back.kind, 'stream');
    if (back.kind === 'stream' && back.frame.stream !== 'exit') assert.deepEqual(decodeBase64(back.frame.data), bytes);
  }
  // A frame built by hand takes the general path, whatever its data holds.
  const odd = { stream: 'stdout' as const, session_id: 's', data: 'not "base64"' };
  assert.deepEqual(JSON.parse(encodeFrame(odd)), odd);
});

test('encodeFrameBytes writes the bytes of encodeFrame, payloads past one encoding slice included', () => {
  for (const size of [0, 1, 2, 3, 49_151, 49_152, 49_153, 200_001]) {
    const bytes = Buffer.alloc(size);
    for (let i = 0; i < size; i++) bytes[i] = (i * 131 + 7) & 0xff;
    for (const replayFor of [undefined, 9]) {
      const frame = outputFrame('stdout', 's-ü-1', bytes, replayFor);
      assert.deepEqual(encodeFrameBytes(frame), Buffer.from(encodeFrame(frame)), `size ${size}`);
    }
  }
  // Pieces of every length around the 3-byte groups encode as their concatenation would.
  const whole = Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 29) & 0xff));
  for (const cuts of [[1], [2], [1, 2], [1, 3, 4], [49_151, 49_153], [5, 6, 7, 98_000]]) {
    const parts: Buffer[] = [];
    let from = 0;
    for (const c of [...cuts, whole.length]) {
      parts.push(whole.subarray(from, c));
      from = c;
    }
    const frame = outputFrame('stderr', 's-1', parts, 2);
    assert.deepEqual(
      encodeFrameBytes(frame),
      Buffer.from(encodeFrame(outputFrame('stderr', 's-1', whole, 2))),
      `cuts ${cuts.join(',')}`,
    );
    assert.equal(frame.stream !== 'exit' && frame.data, whole.toString('base64'));
  }
  const reply = { id: 4, ok: true as const, result: { session_id: 's-1' } };
  assert.deepEqual(encodeFrameBytes(reply), Buffer.from(JSON.stringify(reply)));
});

test('received output frames decode from bytes exactly as the general path decodes them', () => {
  const bytes = Buffer.from(Array.from({ length: 200_003 }, (_, i) => (i * 17) & 0xff));
  for (const stream of ['stdout', 'stderr'] as const) {
    for (const replayFor of [undefined, 0, 12345]) {
      const got = decodeOutputFrameBytes(encodeFrameBytes(outputFrame(stream, 's-1764400000-4', bytes, replayFor)));
      assert.deepEqual(
        got,
        replayFor === undefined
          ? { stream, session_id: 's-1764400000-4', data: bytes }
          : { stream, session_id: 's-1764400000-4', data: bytes, replay_for: replayFor },
      );
    }
  }
  // Anything laid out otherwise is left to the general path.
  for (const text of [
    '{"stream":"exit","session_id":"s","code":0}',
    '{"session_id":"s","stream":"stdout","data":"aGk="}',
    '{"stream":"stdout","session_id":"s\\"q","data":"aGk="}',
    '{"stream":"stdout","session_id":"","data":"aGk="}',
    '{"stream":"stdout","session_id":"s","data":"aGk"}',
    '{"stream":"stdout","session_id":"s","data":"aG-="}',
    '{"stream":"stdout","session_id":"s","data":"aGk=","replay_for":-1}',
    '{"stream":"stdout","session_id":"s","data":"aGk=","replay_for":1.5}',
    '{"stream":"stdout","session_id":"s","data":"aGk="} ',
    '{"stream":"stdout","session_id":"s","data":"aGk=","extra":1}',
    '{"stream":"stdout","session_id":"s","data":"aGk=",',
  ]) {
    assert.equal(decodeOutputFrameBytes(Buffer.from(text)), null, text);
  }
  assert.deepEqual(decodeOutputFrameBytes(Buffer.from('{"stream":"stderr","session_id":"s","data":""}')), {
    stream: 'stderr',
    session_id: 's',
    data: Buffer.alloc(0),
  });
});

test('decodeBase64Bytes is as strict as decodeBase64 across slice boundaries', () => {
  const good = Buffer.alloc(100_000, 0x41).toString('base64');
  assert.deepEqual(decodeBase64Bytes(Buffer.from(good)), decodeBase64(good));
  for (const at of [0, 65_535, 65_536, 65_540, good.length - 5]) {
    for (const bad of ['=', '-', '_', ' ', '\u00e9']) {
      const text = Buffer.from(good, 'latin1');
      text.write(bad, at, 'latin1');
      assert.equal(decodeBase64Bytes(text), null, `${JSON.stringify(bad)} at ${at}`);
    }
  }
});

test('a frame nested deeper than MAX_FRAME_DEPTH is refused before it is parsed (issue 22 #11)', () => {
  const deep = (n: number) =>
    `{"id":9,"op":"exec","name":"x","cmd":"a","args":[],"env":${'['.repeat(n)}${']'.repeat(n)}}`;
  const r = decodeFrame(deep(100_000));
  assert.equal(r.kind, 'refused');
  if (r.kind === 'refused') {
    assert.equal(r.code, 'invalid');
    assert.match(r.detail, /nested deeper than 64 levels/);
  }
  // Brackets inside strings are text, not nesting; a frame at the bound is still decoded.
  const quoted = decodeFrame(`{"id":2,"op":"exec","name":"x","cmd":"${'['.repeat(500)}","args":[],"env":[]}`);
  assert.equal(quoted.kind, 'request');
  const bounded = `{"id":4,"ok":true,"result":${'{"a":'.repeat(62)}1${'}'.repeat(62)}}`;
  assert.equal(decodeFrame(bounded).kind, 'reply');
  assert.equal(decodeFrame(`{"id":4,"ok":true,"result":${'{"a":'.repeat(64)}1${'}'.repeat(64)}}`).kind, 'refused');
});
