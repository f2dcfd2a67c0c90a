/**
 * What every local model-API server shares: a loopback HTTP server, JSON bodies, SSE writing, the
 * expected key, and a log of what was asked (path, model, whether the key was right).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Whether the TCP client at `clientPort` (connected to `serverPort` on loopback) is a socket this very
 * process holds: the kernel's socket table gives the connection's inode, this process's fds name it.
 * In the tests the Fountain server (its model gateway) runs in this process and every agent in another.
 */
function clientInThisProcess(clientPort: number, serverPort: number): boolean {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(4, '0');
  let inode: string | null = null;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length > 9 && cols[1]!.endsWith(`:${hex(clientPort)}`) && cols[2]!.endsWith(`:${hex(serverPort)}`))
        inode = cols[9]!;
    }
  }
  if (inode === null) return false;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === `socket:[${inode}]`) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/** The usage a model API reports for a call, in Anthropic's terms (input not read from a cache). */
export interface Reported {
  readonly input: number;
  readonly output: number;
  readonly cacheRead: number;
  readonly cacheWrite: number;
}

export interface Asked {
  readonly method: string;
  readonly path: string;
  readonly model: string | null;
  readonly authorized: boolean;
  /** Tool names offered (empty for a tool-less request). */
  readonly tools: readonly string[];
  /** What the scripted model answered: `tool:<command>`, `call:<tool>`, `text:<text>`, or null for auxiliary calls. */
  answered: string | null;
  /** The request body as sent (system prompt, tool descriptions…), for checks of what the runtime told the model. */
  readonly body?: unknown;
  /** The usage the server reported in its answer (null: none, e.g. a refusal or a count). */
  reported: Reported | null;
  /** The request came from this process (the in-process Fountain server), not from an agent's. */
  readonly fromServer: boolean;
}

/** An image a runtime sent on to the model, as a recorded request holds it: its declared type and bytes. */
export interface SentImage {
  readonly media_type: string;
  readonly bytes: Buffer;
}

/** Base64 as the vendors decode it (padded, no other characters); null when it is not, or decodes to nothing. */
export function base64Bytes(data: string): Buffer | null {
  if (data.length === 0 || data.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) return null;
  return Buffer.from(data, 'base64');
}

export type Handler = (
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
  api: ModelApiServer,
) => Promise<void> | void;

export class ModelApiServer {
  readonly asked: Asked[] = [];
  /** The key the server accepts; change it to make the next calls 401. */
  key: string;
  /** What the next generating calls report as their usage; set it to see the gateway meter other figures. */
  usage: Reported = { input: 120, output: 12, cacheRead: 0, cacheWrite: 0 };
  #server: Server;
  url = '';
  /** Where the request being handled came from: set before the handler runs, read by its synchronous `record`. */
  #fromServer = false;

  private constructor(key: string, handler: Handler) {
    this.key = key;
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = null;
        if (text) {
          try {
            body = JSON.parse(text);
          } catch {
            res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"invalid json"}');
            return;
          }
        }
        this.#fromServer = clientInThisProcess(req.socket.remotePort ?? 0, req.socket.localPort ?? 0);
        Promise.resolve(handler(req, res, body, this)).catch((e: unknown) => {
          if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: String(e) }));
        });
      });
    });
  }

  static async start(key: string, handler: Handler): Promise<ModelApiServer> {
    const s = new ModelApiServer(key, handler);
    await new Promise<void>((resolve) => s.#server.listen(0, '127.0.0.1', resolve));
    s.url = `http://127.0.0.1:${(s.#server.address() as AddressInfo).port}`;
    return s;
  }

  record(a: Omit<Asked, 'answered' | 'reported' | 'fromServer'>): Asked {
    const entry: Asked = { ...a, answered: null, reported: null, fromServer: this.#fromServer };
    this.asked.push(entry);
    if (process.env.FOUNTAIN_MODEL_API_DEBUG)
      console.error(
        `[model api ${new Date().toISOString().slice(11, 23)}] ${a.method} ${a.path} model=${a.model} authorized=${a.authorized} tools=${a.tools.length}`,
      );
    return entry;
  }

  /** The model names of the calls that got a scripted answer. */
  get modelsAnswered(): string[] {
    return this.asked.filter((a) => a.answered !== null).map((a) => a.model ?? '');
  }

  /** The usage to report for `asked`'s answer, noted on it. */
  report(asked: Asked): Reported {
    asked.reported = { ...this.usage };
    return asked.reported;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** Starts an SSE response; `send(event, data)` writes one event (event line omitted when null). */
export function sse(res: ServerResponse): { send: (event: string | null, data: unknown) => void; end: () => void } {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  return {
    send: (event, data) =>
      res.write(
        `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`,
      ),
    end: () => res.end(),
  };
}

/** Splits a string into a few pieces, so every answer really streams as several deltas. */
export function pieces(s: string, n = 3): string[] {
  if (s.length < n) return [s];
  const size = Math.ceil(s.length / n);
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}

export const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};
