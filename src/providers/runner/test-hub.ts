/**
 * A minimal runner hub for tests: node http + ws on 127.0.0.1:0 whose upgrade route does the
 * registration checks the real server does, then hands the socket to acceptRunnerSocket.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { MAX_FRAME_BYTES, parseRunnerCapabilities } from '../../wire/index.ts';
import { acceptRunnerSocket } from './connection.ts';
import type { AcceptOptions } from './connection.ts';
import { LocalRunnerHost } from './host.ts';
import type { RunnerConnection, RunnerHost } from './host.ts';

export const RUNNER_WS_PATH = '/api/runners/ws';
const RUNNER_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
/** The account every test runner belongs to unless enrolled otherwise. */
export const TEST_ACCOUNT_ID = '00000000-0000-4000-8000-000000000001';

export interface RunnerTestHubOptions extends Omit<AcceptOptions, 'logger'> {
  readonly logger: Logger;
  readonly host?: RunnerHost;
  /** Check 4 (a runner with that name is online → 409). Off to exercise acceptRunnerSocket's own 4409. */
  readonly refuseOnline?: boolean;
}

export interface RunnerTestHub {
  /** `ws://127.0.0.1:<port>/api/runners/ws` */
  readonly url: string;
  readonly host: RunnerHost;
  /** Fixes the runner id (and account) a name registers as; unknown names get a fresh id, like an upsert. */
  enroll(name: string, runnerId: string, accountId?: string): void;
  /** Every connection acceptRunnerSocket returned, in order (null for a refused registration). */
  readonly accepted: ReadonlyArray<RunnerConnection | null>;
  close(): Promise<void>;
}

function refuse(socket: Duplex, status: number, text: string, body: unknown): void {
  const payload = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
  );
}

export async function startRunnerTestHub(opts: RunnerTestHubOptions): Promise<RunnerTestHub> {
  const host = opts.host ?? new LocalRunnerHost();
  const enrolled = new Map<string, { runnerId: string; accountId: string }>();
  const accepted: Array<RunnerConnection | null> = [];
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  const server = createServer((_req, res) => {
    res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not_a_websocket' }));
  });

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== RUNNER_WS_PATH) return refuse(socket, 404, 'Not Found', { error: 'not_found' });
    const name = url.searchParams.get('name') ?? '';
    if (!RUNNER_NAME.test(name))
      return refuse(socket, 400, 'Bad Request', { errors: { name: ['has invalid format'] } });
    let entry = enrolled.get(name);
    if (!entry) {
      entry = { runnerId: randomUUID(), accountId: TEST_ACCOUNT_ID };
      enrolled.set(name, entry);
    }
    const { runnerId, accountId } = entry;
    if ((opts.refuseOnline ?? true) && host.whereis(runnerId)) {
      return refuse(socket, 409, 'Conflict', { error: 'runner_already_connected' });
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const capabilities = parseRunnerCapabilities(url.searchParams.get('capabilities'));
      accepted.push(
        acceptRunnerSocket(ws, { runnerId, accountId, name, connectedAt: new Date(), capabilities }, host, {
          ...opts,
          logger: opts.logger,
        }),
      );
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    url: `ws://127.0.0.1:${port}${RUNNER_WS_PATH}`,
    host,
    accepted,
    enroll(name, runnerId, accountId = TEST_ACCOUNT_ID) {
      enrolled.set(name, { runnerId, accountId });
    },
    async close() {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
