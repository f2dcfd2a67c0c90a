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
  for await (const m of readSse(
    streamOf(
      ': connected\n\nid: 1\nevent: out',
      'put\ndata: {"a":1}\n\n: heartbeat\n\nid: 2\r\ndata: x\r\ndata: y\r\n\r\n',
    ),
  ))
    got.push(m);
  assert.deepEqual(got, [
    { id: '1', event: 'output', data: '{"a":1}' },
    { id: '2', event: 'message', data: 'x\ny' },
  ]);
});

const acp = (update: unknown) =>
  JSON.stringify({ jsonrpc: '2.0', method: 'session/update', params: { sessionId: 's', update } });

test('the renderer streams agent text, folds thoughts and shows tools and stages', () => {
  let out = '';
  const r = new EventRenderer((s) => (out += s));
  r.render({ kind: 'stage', stage: 'provision', state: 'started', data: '{}' });
  r.render({
    kind: 'output',
    stream: 'acp',
    data: acp({ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'hmm' } }),
  });
  r.render({
    kind: 'output',
    stream: 'acp',
    data: acp({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hel' } }),
  });
  r.render({
    kind: 'output',
    stream: 'acp',
    data: acp({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'lo' } }),
  });
  r.render({
    kind: 'output',
    stream: 'acp',
    data: acp({ sessionUpdate: 'tool_call', toolCallId: 't1', title: 'echo hi', status: 'pending' }),
  });
  r.render({
    kind: 'output',
    stream: 'acp',
    data: acp({
      sessionUpdate: 'tool_call_update',
      toolCallId: 't1',
      status: 'completed',
      content: [{ type: 'content', content: { type: 'text', text: 'hi\n' } }],
    }),
  });
  r.render({ kind: 'output', stream: 'acp', data: 'not json' });
  r.render({ kind: 'stage', stage: 'turn', state: 'failed', data: '{"reason":"peer_down"}' });
  assert.equal(
    out,
    '· starting a sandbox…\n· thinking: hmm\nHello\n· tool: echo hi\n· tool completed\n  hi\n· turn failed: peer_down\n',
  );
});

test("the renderer merges Claude's tool updates: the command once it is known, its output, an edit as a diff", () => {
  let out = '';
  const r = new EventRenderer((s) => (out += s));
  const ev = (update: unknown) => r.render({ kind: 'output', stream: 'acp', turn_id: 't', data: acp(update) });
  ev({
    sessionUpdate: 'tool_call',
    toolCallId: 'b',
    title: 'Terminal',
    kind: 'execute',
    status: 'pending',
    rawInput: {},
    _meta: { claudeCode: { toolName: 'Bash' } },
  });
  assert.equal(out, '', 'an empty first call waits for its details');
  ev({
    sessionUpdate: 'tool_call_update',
    toolCallId: 'b',
    title: 'ls',
    rawInput: { command: 'ls', description: 'List' },
  });
  ev({
    sessionUpdate: 'tool_call_update',
    toolCallId: 'b',
    status: 'completed',
    rawOutput: { stdout: 'a.ts\n', stderr: '' },
  });
  ev({
    sessionUpdate: 'tool_call',
    toolCallId: 'e',
    title: 'Edit',
    kind: 'edit',
    status: 'pending',
    _meta: { claudeCode: { toolName: 'Edit' } },
  });
  ev({
    sessionUpdate: 'tool_call_update',
    toolCallId: 'e',
    title: 'Edit a.txt',
    content: [{ type: 'diff', path: '/w/a.txt', oldText: 'red\n', newText: 'green\n' }],
  });
  ev({
    sessionUpdate: 'tool_call_update',
    toolCallId: 'e',
    status: 'completed',
    rawOutput: 'The file /w/a.txt has been updated successfully.',
  });
  assert.equal(
    out,
    [
      '· tool: ls (Bash, execute)',
      '· tool completed',
      '  a.ts',
      '· tool: Edit a.txt (Edit, edit)',
      '  --- /w/a.txt',
      '  +++ /w/a.txt',
      '  @@ -1,1 +1,1 @@',
      '  -red',
      '  +green',
      '· tool completed',
      '  The file /w/a.txt has been updated successfully.',
      '',
    ].join('\n'),
  );
});

test('a lost session and a restart for a new credential are said in words, never silently', () => {
  let out = '';
  const r = new EventRenderer((s) => (out += s));
  const detail = 'the agent could not load its previous session, so it started a new one';
  r.render({ kind: 'stage', stage: 'session', state: 'done', data: JSON.stringify({ event: 'reset', detail }) });
  r.render({
    kind: 'stage',
    stage: 'session',
    state: 'started',
    data: JSON.stringify({ event: 'relaunch', detail: "the agent's model credential changed" }),
  });
  assert.match(out, new RegExp(`· the agent started afresh: ${detail}\n`));
  assert.match(out, /· restarting the agent: the agent's model credential changed\n/);
});

test('the renderer says a place in the capacity queue, and when it starts', () => {
  let out = '';
  const r = new EventRenderer((s) => (out += s));
  r.render({ kind: 'stage', stage: 'queue', state: 'started', data: '{"position":2,"turn_id":"t"}' });
  r.render({ kind: 'stage', stage: 'queue', state: 'started', data: '{"event":"position","position":1}' });
  r.render({ kind: 'stage', stage: 'queue', state: 'done', data: '{}' });
  assert.match(out, /queued — 2nd in line; it starts as capacity frees/);
  assert.match(out, /queued — 1st in line/);
  assert.match(out, /capacity freed: starting/);
});
