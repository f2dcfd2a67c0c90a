/**
 * The server end for the connections benchmark, in its own process so its memory and CPU can be
 * read from /proc: `fountain` mode is the runner hub with acceptRunnerSocket, `server` the whole server
 * on its embedded database, `bare` a plain ws server.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { WebSocketServer } from 'ws';
import { openFileLimit } from './limits.ts';

const mode = process.argv[2];
const heartbeatMs = Number(process.argv[3] ?? 20_000);
const send = (m: unknown) => process.send?.(m);

let count = () => 0;
if (mode === 'server') {
  // The whole server on its embedded database, as `fountain server` runs it.
  // Imported only in the mode that uses them: the bare floor must not carry the server's modules.
  const { acceptRunnerSocket } = await import('../../src/providers/runner/index.ts');
  const { startServer } = await import('../../src/server/start.ts');
  const dataDir = mkdtempSync(join(tmpdir(), 'fountain-bench-server-'));
  const server = await startServer({
    dataDir,
    port: 0,
    env: { FOUNTAIN_RUNNER_HEARTBEAT_MS: String(heartbeatMs) },
    logger: pino({ level: 'silent' }),
    acceptRunnerSocket,
  });
  process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }));
  count = () => server.host.online().length;
  send({
    url: `${server.url.replace(/^http/, 'ws')}/api/runners/ws`,
    key: server.bootstrapKey,
    fileLimit: openFileLimit(),
  });
} else if (mode === 'fountain') {
  const { startRunnerTestHub } = await import('../../src/providers/runner/test-hub.ts');
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
