/**
 * The server end for the connections benchmark, in its own process so its memory and CPU can be
 * read from /proc: `fountain` mode is the runner hub with acceptRunnerSocket, `bare` a plain ws server.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { WebSocketServer } from 'ws';
import { startRunnerTestHub } from '../../src/providers/runner/test-hub.ts';
import { openFileLimit } from './limits.ts';

const mode = process.argv[2];
const heartbeatMs = Number(process.argv[3] ?? 20_000);
const send = (m: unknown) => process.send?.(m);

let count = () => 0;
if (mode === 'fountain') {
  const hub = await startRunnerTestHub({ logger: pino({ level: 'silent' }), heartbeatMs });
  count = () => hub.host.online().length;
  send({ url: hub.url, fileLimit: openFileLimit() });
} else {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const server = createServer((_q, r) => r.writeHead(426).end());
  server.on('upgrade', (req, socket, head) => wss.handleUpgrade(req, socket, head, () => {}));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  count = () => wss.clients.size;
  send({ url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/api/runners/ws`, fileLimit: openFileLimit() });
}

process.on('message', (m: unknown) => {
  if (m === 'measure') {
    // Two collections: the first may only promote what the second frees.
    globalThis.gc?.();
    globalThis.gc?.();
    const mem = process.memoryUsage();
    send({ connections: count(), rss: mem.rss, heapUsed: mem.heapUsed, external: mem.external + mem.arrayBuffers });
  } else if (m === 'exit') process.exit(0);
});
process.on('disconnect', () => process.exit(0));
