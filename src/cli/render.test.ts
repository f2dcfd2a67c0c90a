import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readSse } from './api.ts';
import { EventRenderer } from './render.ts';

const streamOf = (...chunks: string[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const ch of chunks) c.enqueue(new TextEncoder().encode(ch));
      c.close();
    },
  });

test('readSse splits messages across chunk boundaries and skips comments', async () => {
  const got = [];
  for await (const m of readSse(streamOf(': connected\n\nid: 1\nevent: out', 'put\ndata: {"a":1}\n\n: heartbeat\n\nid: 2\r\ndata: x\r\ndata: y\r\n\r\n'))) got.push(m);
  assert.deepEqual(got, [
    { id: '1', event: 'output', data: '{"a":1}' },
    { id: '2', event: 'message', data: 'x\ny' },
  ]);
});

const acp = (update: unknown) => JSON.stringify({ jsonrpc: '2.0', method: 'session/update', params: { sessionId: 's', update } });

test('the renderer streams agent text, folds thoughts and shows tools and stages', () => {
  let out = '';
  const r = new EventRenderer((s) => (out += s));
  r.render({ kind: 'stage', stage: 'provision', state: 'started', data: '{}' });
  r.render({ kind: 'output', stream: 'acp', data: acp({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hmm' } }) });
  r.render({ kind: 'output', stream: 'acp', data: acp({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hel' } }) });
  r.render({ kind: 'output', stream: 'acp', data: acp({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'lo' } }) });
  r.render({ kind: 'output', stream: 'acp', data: acp({ sessionUpdate: 'tool_call', toolCallId: 't1', title: 'echo hi', status: 'pending' }) });
  r.render({ kind: 'output', stream: 'acp', data: acp({ sessionUpdate: 'tool_call_update', toolCallId: 't1', status: 'completed', content: [{ type: 'content', content: { type: 'text', text: 'hi\n' } }] }) });
  r.render({ kind: 'output', stream: 'acp', data: 'not json' });
  r.render({ kind: 'stage', stage: 'turn', state: 'failed', data: '{"reason":"peer_down"}' });
  assert.equal(out, '· starting a sandbox…\n· thinking: hmm\nHello\n· tool: echo hi (pending)\n· tool completed\n  hi\n· turn failed: peer_down\n');
});
