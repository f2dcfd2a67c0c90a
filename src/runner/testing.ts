/**
 * Test helpers for the runner: a StreamOut that keeps what it was sent, a capturing pino logger,
 * a wait-until with a hang guard, and a loopback WebSocket server. Used only by *.test.ts files.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Duplex } from 'node:stream';
import pino from 'pino';
import type { Logger } from 'pino';
import WebSocket, { WebSocketServer } from 'ws';
import { decodeFrame } from '../wire/index.ts';
import type { Reply, StreamFrame } from '../wire/index.ts';
import type { StreamOut } from './backend.ts';

export class CollectingOut implements StreamOut {
  readonly frames: StreamFrame[] = [];
  open = true;
  send(frame: StreamFrame): void {
    if (this.open) this.frames.push(frame);
  }
  drained(): Promise<void> {
    return Promise.resolve();
  }
  /** Concatenated stdout (and stderr) bytes of one session, replay and live alike. */
  bytes(sessionId: string, streams: readonly string[] = ['stdout']): Buffer {
    return Buffer.concat(
      this.frames
        .filter((f) => f.session_id === sessionId && streams.includes(f.stream) && f.stream !== 'exit')
        .map((f) => Buffer.from((f as { data: string }).data, 'base64')),
    );
  }
  exitCode(sessionId: string): number | undefined {
    const f = this.frames.find((x) => x.session_id === sessionId && x.stream === 'exit');
    return f && f.stream === 'exit' ? f.code : undefined;
  }
}

export interface CapturedLogger {
  logger: Logger;
  lines: Array<Record<string, unknown>>;
}

export function captureLogger(): CapturedLogger {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

/** Polls `check` until it returns a truthy value; the timeout only guards against a hang. */
export async function until<T>(check: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** What the loopback server does with one upgrade request. */
export type UpgradePlan = { refuse: number; body?: string } | { accept: true };

export interface Upgrade {
  readonly url: URL;
  readonly headers: IncomingHttpHeaders;
}

/**
 * A loopback stand-in for the server end of /api/runners/ws: refuses upgrades with given
 * statuses or accepts them and hands the socket to the test. Ports are ephemeral.
 */
export class LoopbackRunnerServer {
  readonly upgrades: Upgrade[] = [];
  readonly sockets: PeerSocket[] = [];
  #plan: (n: number) => UpgradePlan;
  readonly #http: Server;
  readonly #wss: WebSocketServer;

  private constructor(plan: (n: number) => UpgradePlan, autoPong: boolean) {
    this.#plan = plan;
    this.#wss = new WebSocketServer({ noServer: true, autoPong });
    this.#http = createServer((_req, res) => res.writeHead(426).end());
    this.#http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const n = this.upgrades.length;
      this.upgrades.push({ url: new URL(req.url ?? '/', 'http://127.0.0.1'), headers: req.headers });
      const plan = this.#plan(n);
      if ('refuse' in plan) {
        const body = plan.body ?? '';
        socket.end(
          `HTTP/1.1 ${plan.refuse} Refused\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
        return;
      }
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.sockets.push(new PeerSocket(ws)));
    });
  }

  static async start(
    plan: (n: number) => UpgradePlan,
    opts: { autoPong?: boolean } = {},
  ): Promise<LoopbackRunnerServer> {
    const s = new LoopbackRunnerServer(plan, opts.autoPong ?? true);
    await new Promise<void>((r) => s.#http.listen(0, '127.0.0.1', r));
    return s;
  }

  setPlan(plan: (n: number) => UpgradePlan): void {
    this.#plan = plan;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${(this.#http.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.ws.terminate();
    this.#wss.close();
    this.#http.closeAllConnections();
    await new Promise((r) => this.#http.close(r));
  }
}

/** The server's side of one accepted daemon socket: send requests, read what came back. */
export class PeerSocket {
  readonly ws: WebSocket;
  readonly frames: Array<Reply | StreamFrame> = [];
  closed = false;
  #nextId = 1;

  constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (data: Buffer) => {
      const d = decodeFrame(data.toString('utf8'));
      if (d.kind === 'reply') this.frames.push(d.reply);
      else if (d.kind === 'stream') this.frames.push(d.frame);
      else throw new Error(`daemon sent an undecodable frame: ${data.toString('utf8').slice(0, 200)}`);
    });
    ws.on('close', () => (this.closed = true));
  }

  /** Sends a request and waits for its reply. */
  async call(req: Record<string, unknown>): Promise<Reply> {
    const id = typeof req.id === 'number' ? req.id : 1000 + this.#nextId++;
    this.ws.send(JSON.stringify({ ...req, id }));
    return this.reply(id);
  }

  reply(id: number): Promise<Reply> {
    return until(() => this.frames.find((f): f is Reply => 'ok' in f && f.id === id), `reply ${id}`);
  }

  stdout(sessionId: string): string {
    return Buffer.concat(
      this.frames
        .filter((f): f is StreamFrame => 'stream' in f && f.session_id === sessionId && f.stream === 'stdout')
        .map((f) => Buffer.from((f as { data: string }).data, 'base64')),
    ).toString();
  }
}
