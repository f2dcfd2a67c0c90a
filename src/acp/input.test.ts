import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ok } from '../sandbox/index.ts';
import { AcpClient, requestWriteId } from './client.ts';
import { LineSplitter, MAX_LINE_BYTES, decodeLine } from './lines.ts';
import { JournalSkipper } from './skipper.ts';
import { recorder, silentLogger } from './testing/demo-process.ts';

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);

/** A client whose stdin is an in-memory byte sink; its stdout is whatever the test feeds. */
function clientWithSink() {
  const written: string[] = [];
  const rec = recorder();
  const client = new AcpClient({
    write: async (bytes) => {
      written.push(new TextDecoder().decode(bytes));
      return ok(undefined);
    },
    handler: rec.handler,
    logger: silentLogger,
  });
  const sent = (): Array<Record<string, unknown>> =>
    written
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { client, rec, sent };
}

describe('LineSplitter', () => {
  it('reassembles lines cut anywhere, including inside a multi-byte character', () => {
    const text = '{"a":"héllo ✓"}\n{"b":"wörld 🌊"}\r\n\n';
    const bytes = enc(text);
    for (const size of [1, 2, 3, 5, 7, bytes.length]) {
      const s = new LineSplitter();
      const got: string[] = [];
      for (let i = 0; i < bytes.length; i += size) {
        for (const item of s.push(bytes.subarray(i, i + size))) {
          assert.equal(item.kind, 'line');
          if (item.kind === 'line') got.push(decodeLine(item.bytes).text ?? '<bad>');
        }
      }
      assert.deepEqual(got, ['{"a":"héllo ✓"}', '{"b":"wörld 🌊"}', ''], `chunk size ${size}`);
      assert.equal(s.pending, false);
    }
  });

  it('accepts a line of exactly the limit and reports a longer one once, then carries on', () => {
    const s = new LineSplitter(16);
    const items = [
      ...s.push(enc('x'.repeat(16) + '\n')),
      ...s.push(enc('y'.repeat(10))),
      ...s.push(enc('y'.repeat(10))),
      ...s.push(enc('yyy\nok\n')),
    ];
    assert.deepEqual(
      items.map((i) =>
        i.kind === 'line' ? new TextDecoder().decode(i.bytes) : `too_large:${new TextDecoder().decode(i.prefix)}`,
      ),
      ['x'.repeat(16), `too_large:${'y'.repeat(20)}`, 'ok'],
    );
  });

  it('hands back an unterminated last line on flush', () => {
    const s = new LineSplitter();
    assert.deepEqual(s.push(enc('{"partial":')), []);
    s.push(enc('true}'));
    assert.equal(new TextDecoder().decode(s.flush() ?? new Uint8Array()), '{"partial":true}');
    assert.equal(s.flush(), null);
  });
});

describe('JournalSkipper', () => {
  const journal = [
    '{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{}}', // an agent request that reuses the id: not a boundary
    '{"jsonrpc":"2.0","method":"session/update","params":{"id":5}}',
    'not json at all',
    '{"jsonrpc":"2.0","id":"5","result":{}}', // a string id is another id
    '{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"boom"}}', // an error reply is a reply
    '{"jsonrpc":"2.0","id":6,"method":"session/request_permission","params":{}}',
    '{"jsonrpc":"2.0","id":5,"result":{}}',
  ]
    .map((l) => `${l}\n`)
    .join('');

  it('drops all lines up to and including the first reply to previous_id, error replies included', () => {
    const sk = new JournalSkipper(5);
    const out = sk.push(enc(journal));
    assert.ok(out.ok);
    assert.equal(new TextDecoder().decode(out.value), journal.split('\n').slice(5).join('\n'));
    assert.equal(sk.discardedLines, 5);
    const after = sk.push(enc('passes through verbatim'));
    assert.ok(after.ok);
    assert.equal(new TextDecoder().decode(after.value), 'passes through verbatim');
  });

  it('fails with runner_replay_line_too_large on an oversized line before the boundary, and stays failed', () => {
    const sk = new JournalSkipper(1);
    const big = new Uint8Array(MAX_LINE_BYTES + 1).fill(0x61);
    const r = sk.push(big);
    assert.equal(r.ok ? 'ok' : r.error.code, 'runner_replay_line_too_large');
    const again = sk.push(enc('{"jsonrpc":"2.0","id":1,"result":{}}\n'));
    assert.equal(again.ok ? 'ok' : again.error.code, 'runner_replay_line_too_large');
    assert.equal(sk.boundarySeen, false);
  });

  it('lets a long line after the boundary through untouched (the client applies its own limit)', () => {
    const sk = new JournalSkipper(1);
    const tail = new Uint8Array(MAX_LINE_BYTES + 10).fill(0x62);
    const chunk = Buffer.concat([enc('{"jsonrpc":"2.0","id":1,"result":{}}\n'), tail]);
    const r = sk.push(chunk);
    assert.ok(r.ok);
    assert.equal(r.value.length, tail.length);
  });
});

describe('AcpClient input handling', () => {
  it('reports malformed lines without throwing, refuses unserved requests, and keeps going', async () => {
    const { client, rec, sent } = clientWithSink();
    const init = client.initialize();
    const junk = [
      'npm WARN something on stdout', // a log line on stdout
      '[{"jsonrpc":"2.0","id":9,"result":{}}]', // a batch
      '{"jsonrpc":"1.0","id":0,"result":{}}',
      '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk"}}}',
      '{"jsonrpc":"2.0","id":77,"result":{}}',
      '{"jsonrpc":"2.0","id":"fs1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/etc/passwd"}}',
      '{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s"}}',
    ];
    for (const line of junk) client.feed(enc(`${line}\n`));
    client.feed(new Uint8Array([0xff, 0xfe, 0x0a]));
    client.feed(
      enc('{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":false}}}\n'),
    );
    const r = await init;
    assert.ok(r.ok, 'a valid reply after the junk is still processed');
    assert.deepEqual(
      rec.problems.map((p) => [p.code, p.seq]),
      [
        ['acp_not_json', 0],
        ['acp_invalid_message', 1],
        ['acp_invalid_message', 2],
        ['acp_invalid_message', 3],
        ['acp_unexpected_response', 4],
        ['acp_request_refused', 5],
        ['acp_invalid_message', 6],
        ['acp_invalid_utf8', 7],
      ],
    );
    assert.equal(rec.problems[0]?.raw, 'npm WARN something on stdout');
    // JSON-RPC messages still reach onMessage verbatim, even when their params are bad.
    assert.deepEqual(
      rec.messages.map((m) => m.ctx.seq),
      [3, 4, 5, 6, 8],
    );
    assert.deepEqual(rec.permissions, []);
    await new Promise((res) => setImmediate(res));
    const replies = sent().filter((m) => !('method' in m));
    assert.deepEqual(replies, [
      { jsonrpc: '2.0', id: 'fs1', error: { code: -32601, message: 'Method not found: fs/read_text_file' } },
      { jsonrpc: '2.0', id: 'p1', error: { code: -32602, message: 'Invalid params' } },
    ]);
    const load = await client.loadSession({ sessionId: 's', cwd: '/' });
    assert.equal(load.ok ? 'ok' : load.error.code, 'acp_not_supported');
  });

  it('reports a line over 4 MiB as acp_line_too_large and reads the next line', async () => {
    const { client, rec } = clientWithSink();
    const init = client.initialize();
    const big = new Uint8Array(MAX_LINE_BYTES + 100).fill(0x7a);
    for (let i = 0; i < big.length; i += 1 << 20) client.feed(big.subarray(i, i + (1 << 20)));
    client.feed(enc('\n{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}\n'));
    assert.ok((await init).ok);
    assert.deepEqual(
      rec.problems.map((p) => [p.code, p.seq, p.raw?.length]),
      [['acp_line_too_large', 0, 256]],
    );
  });

  it('rejects a reply that does not match the SDK schema, and a protocol version it does not speak', async () => {
    const a = clientWithSink();
    const init = a.client.initialize();
    a.client.feed(enc('{"jsonrpc":"2.0","id":0,"result":{"agentCapabilities":{}}}\n'));
    const r = await init;
    assert.equal(r.ok ? 'ok' : r.error.code, 'acp_invalid_response');

    const b = clientWithSink();
    const init2 = b.client.initialize();
    b.client.feed(enc('{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"agentCapabilities":{}}}\n'));
    const r2 = await init2;
    assert.equal(r2.ok ? 'ok' : r2.error.code, 'acp_unsupported_protocol');
  });

  it('reads an unterminated last line at end of input, and fails the waiting request if no reply came', async () => {
    const a = clientWithSink();
    const init = a.client.initialize();
    a.client.feed(enc('{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}'));
    a.client.endOfInput();
    assert.ok((await init).ok);

    const b = clientWithSink();
    const init2 = b.client.initialize();
    b.client.endOfInput('agent exited with code 1');
    const r = await init2;
    assert.deepEqual(r.ok ? 'ok' : [r.error.code, r.error.message], [
      'acp_closed',
      'initialize: agent exited with code 1',
    ]);
  });

  it('reports a write failure as acp_write_failed with the sandbox error as cause', async () => {
    const client = new AcpClient({
      write: async () => ({ ok: false, error: { code: 'command_exited' } }),
      handler: {},
      logger: silentLogger,
    });
    const r = await client.initialize();
    assert.deepEqual(r.ok ? 'ok' : [r.error.code, r.error.cause?.code], ['acp_write_failed', 'command_exited']);
    // The failed request no longer blocks the next one.
    const again = await client.initialize();
    assert.equal(again.ok ? 'ok' : again.error.code, 'acp_write_failed');
  });

  it('fails an attached prompt with runner_replay_line_too_large when the journal has an oversized line before the boundary', async () => {
    const { client } = clientWithSink();
    const a = client.attachPrompt({ sessionId: 's', promptId: 4 });
    assert.ok(a.ok);
    assert.equal(client.boundarySeen, false);
    client.feed(new Uint8Array(MAX_LINE_BYTES + 1).fill(0x61));
    const r = await a.value.done;
    assert.equal(r.ok ? 'ok' : r.error.code, 'runner_replay_line_too_large');
    assert.equal(client.closed, true);
  });

  it('writes each request under its write id; an attached prompt is written again, same line, same id', async () => {
    const writes: Array<[string, string | undefined]> = [];
    const write = async (bytes: Uint8Array, writeId?: string) => {
      writes.push([new TextDecoder().decode(bytes), writeId]);
      return ok(undefined);
    };
    const first = new AcpClient({ write, handler: {}, logger: silentLogger, firstRequestId: 4 });
    first.attachPrompt({ sessionId: 's', promptId: 3 });
    const call = first.prompt('hi');
    assert.equal(call.ok ? 'ok' : call.error.code, 'acp_busy', 'one request at a time');
    assert.equal(first.attachedPromptId, 3);
    assert.ok((await first.repeatPrompt('hi')).ok);
    const again = new AcpClient({ write, handler: {}, logger: silentLogger });
    again.attachPrompt({ sessionId: 's', promptId: 3 });
    assert.ok((await again.repeatPrompt([{ type: 'text', text: 'hi' }])).ok);
    assert.equal(writes.length, 2);
    assert.deepEqual(writes[0], writes[1]);
    assert.equal(writes[0]![1], requestWriteId(3));
    assert.deepEqual(JSON.parse(writes[0]![0]), {
      jsonrpc: '2.0',
      id: 3,
      method: 'session/prompt',
      params: { sessionId: 's', prompt: [{ type: 'text', text: 'hi' }] },
    });
    // Without an attached prompt there is nothing to write again.
    const idle = new AcpClient({ write, handler: {}, logger: silentLogger });
    const r = await idle.repeatPrompt('hi');
    assert.equal(r.ok ? 'ok' : r.error.code, 'acp_invalid_state');
  });

  it('a prompt written again that cannot be written fails its reply', async () => {
    const client = new AcpClient({
      write: async () => ({ ok: false, error: { code: 'write_failed', detail: 'runner_disconnected' } }),
      handler: {},
      logger: silentLogger,
    });
    const a = client.attachPrompt({ sessionId: 's', promptId: 2 });
    assert.ok(a.ok);
    assert.equal((await client.repeatPrompt('hi')).ok, false);
    const r = await a.value.done;
    assert.equal(r.ok ? 'ok' : r.error.code, 'acp_write_failed');
  });

  it('answers a request from the agent with a permission outcome later, as the engine decides', async () => {
    const { client, rec, sent } = clientWithSink();
    client.feed(
      enc(
        '{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}\n',
      ),
    );
    assert.equal(rec.permissions.length, 1);
    await new Promise((res) => setTimeout(res, 5));
    assert.deepEqual(sent(), [], 'nothing is answered until the engine decides');
    assert.ok((await client.answerPermission(0, { outcome: 'selected', optionId: 'a' })).ok);
    assert.deepEqual(sent(), [{ jsonrpc: '2.0', id: 0, result: { outcome: { outcome: 'selected', optionId: 'a' } } }]);
  });
});
