import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeBase64, decodeFrame, encodeFrame } from './index.ts';

test('requests decode by op and keep their fields', () => {
  const r = decodeFrame('{"id":7,"op":"spawn","name":"runner-x","cmd":"claude-agent-acp","args":[],"env":[["K","v"]],"dir":"/home/sprite","stdin":true,"detachable":true}');
  assert.equal(r.kind, 'request');
  if (r.kind === 'request' && r.request.op === 'spawn') assert.deepEqual(r.request.env, [['K', 'v']]);
});

test('unknown ops are not_supported and keep the id so they can be answered', () => {
  assert.deepEqual(decodeFrame('{"id":3,"op":"fly"}'), { kind: 'refused', code: 'not_supported', detail: 'fly', id: 3 });
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
