// A model API for the gateway benchmark, in its own process: Anthropic Messages, non-streamed or a
// stream of `x-bench-events` text deltas of 200 bytes each, written in batches with back-pressure.
import { createServer } from 'node:http';

const KEY = process.argv[2];
const delta = `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${'x'.repeat(200)}"}}\n\n`;
const BATCH = 64;

const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    if (req.headers['x-api-key'] !== KEY) {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}');
      return;
    }
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const usage = { input_tokens: 120, output_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'msg_bench',
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [{ type: 'text', text: 'ok' }],
          stop_reason: 'end_turn',
          usage,
        }),
      );
      return;
    }
    const n = Number(req.headers['x-bench-events'] ?? 10);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(
      `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_bench', type: 'message', role: 'assistant', model: body.model, content: [], usage: { ...usage, output_tokens: 1 } } })}\n\n`,
    );
    for (let sent = 0; sent < n; ) {
      const k = Math.min(BATCH, n - sent);
      sent += k;
      if (!res.write(delta.repeat(k))) await new Promise((r) => res.once('drain', r));
      if (res.destroyed) return;
    }
    res.end(
      `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":${n}}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n`,
    );
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
