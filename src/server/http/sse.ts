/**
 * Opening an SSE response: its headers and a first `: connected` comment go out at once, so a
 * listener knows it is connected before the first event (or heartbeat), however long that takes.
 */
import type { Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';

export function openSse(c: Context, run: (stream: SSEStreamingApi) => Promise<void>): Response {
  c.header('cache-control', 'no-cache');
  c.header('connection', 'keep-alive');
  // Proxies that buffer responses (nginx) would hold the comment back too.
  c.header('x-accel-buffering', 'no');
  return streamSSE(c, async (stream) => {
    await stream.write(': connected\n\n');
    await run(stream);
  });
}
