/**
 * One connection of the daemon: dial with the bearer key, serve the protocol over the socket,
 * keep it alive with pings, and report how it ended so the daemon can retry or give up.
 */
import WebSocket from 'ws';
import type { Logger } from 'pino';
import { MAX_FRAME_BYTES } from '../wire/index.ts';
import type { Backend } from './backend.ts';
import type { Outcome } from './dial.ts';
import { classifyClose, classifyRefusal } from './dial.ts';
import { ProtocolServer } from './protocol-server.ts';
import { WsTransport } from './ws-transport.ts';

export interface ConnectionTimings {
  readonly pingIntervalMs: number;
  readonly pingTimeoutMs: number;
  readonly dialTimeoutMs: number;
  readonly writeTimeoutMs: number;
}

export interface ConnectOptions {
  readonly url: URL;
  readonly apiKey: string;
  readonly backend: Backend;
  readonly logger: Logger;
  readonly timings: ConnectionTimings;
  readonly signal: AbortSignal;
  readonly onConnected?: () => void;
  /** Told true when the server takes the socket and at each heartbeat, false when the connection ends. */
  readonly onLink?: (up: boolean) => void;
}

const MAX_REFUSAL_BODY = 64 * 1024;

/**
 * Whether frames to `url` need a random mask. A client masks so that a plain-text intermediary
 * cannot be fed attacker-chosen bytes (RFC 6455, section 10.3); over TLS or to this machine none can read
 * them, and an all-zero mask (which ws sends as is) saves copying every frame here and unmasking
 * it on the server.
 */
export function maskingNeeded(url: URL): boolean {
  if (url.protocol === 'wss:' || url.protocol === 'https:') return false;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return !(host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host));
}

const zeroMask = (mask: Buffer): void => {
  mask.fill(0);
};

/** Resolves once the connection attempt or the connection itself is over. Never rejects. */
export function connectOnce(opts: ConnectOptions): Promise<Outcome> {
  const { logger: log, timings: t } = opts;
  return new Promise((resolve) => {
    if (opts.signal.aborted) return resolve({ kind: 'stopped' });
    let settled = false;
    let opened = false;
    let refused: Outcome | null = null;
    let pingTimedOut = false;
    /**
     * The server took the socket and answered over it (a pong to the ping sent on open, or a ping of
     * its own): a drop after this is a new failure, not a server that accepts and drops at once.
     */
    let established = false;
    let stopping = false;
    let pingTimer: NodeJS.Timeout | null = null;
    let pongTimer: NodeJS.Timeout | null = null;
    let killTimer: NodeJS.Timeout | null = null;

    const ws = new WebSocket(opts.url, {
      headers: { Authorization: `Bearer ${opts.apiKey}` },
      maxPayload: MAX_FRAME_BYTES,
      handshakeTimeout: t.dialTimeoutMs,
      perMessageDeflate: false,
      ...(maskingNeeded(opts.url) ? {} : { generateMask: zeroMask }),
    });

    const finish = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      if (pingTimer) clearInterval(pingTimer);
      if (pongTimer) clearTimeout(pongTimer);
      if (killTimer) clearTimeout(killTimer);
      opts.signal.removeEventListener('abort', onAbort);
      if (opened) opts.onLink?.(false);
      resolve(outcome);
    };
    const onAbort = () => {
      stopping = true;
      if (ws.readyState === WebSocket.CONNECTING) {
        ws.terminate();
        return;
      }
      ws.close(1001, 'runner stopping');
      killTimer = setTimeout(() => ws.terminate(), 1000);
    };
    opts.signal.addEventListener('abort', onAbort);

    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        if (size < MAX_REFUSAL_BODY) chunks.push(c);
        size += c.length;
      });
      const settle = () => {
        refused ??= classifyRefusal(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'));
        ws.terminate();
      };
      res.once('end', settle);
      res.once('error', settle);
    });

    ws.on('error', (e) => log.debug({ err: e.message }, 'runner: socket error'));

    ws.on('open', () => {
      opened = true;
      log.debug('runner: socket open');
      const server = new ProtocolServer(opts.backend, new WsTransport(ws, t.writeTimeoutMs), log);
      ws.on('message', (data, isBinary) => {
        if (isBinary) {
          log.warn('runner: ignoring a binary frame');
          return;
        }
        const text = Buffer.isBuffer(data)
          ? data.toString('utf8')
          : Array.isArray(data)
            ? Buffer.concat(data).toString('utf8')
            : Buffer.from(data).toString('utf8');
        server.receive(text);
      });
      const ping = () => {
        if (pongTimer) return;
        try {
          ws.ping();
        } catch {
          return;
        }
        pongTimer = setTimeout(() => {
          // A half-open socket (host slept, NAT forgot us) never says so; stop waiting and redial.
          pingTimedOut = true;
          log.warn('runner: ping unanswered; reconnecting');
          ws.terminate();
        }, t.pingTimeoutMs);
      };
      // The first exchange: its pong proves the link works end to end, so the backoff can start over.
      ping();
      pingTimer = setInterval(ping, t.pingIntervalMs);
    });

    // "connected" is said once the server has answered, so a socket that drops at once never claims it.
    const answered = () => {
      if (established) return;
      established = true;
      log.info({ url: `${opts.url.origin}${opts.url.pathname}` }, 'runner: connected');
      opts.onConnected?.();
    };
    // Every exchange is a heartbeat for the status file (the runner image's health check).
    ws.on('ping', () => {
      answered();
      opts.onLink?.(true);
    });
    ws.on('pong', () => {
      answered();
      opts.onLink?.(true);
      if (pongTimer) clearTimeout(pongTimer);
      pongTimer = null;
    });

    ws.on('close', (code, reason) => {
      if (stopping) return finish({ kind: 'stopped' });
      if (!opened) return finish(refused ?? { kind: 'retry', reason: 'could not connect' });
      if (pingTimedOut) return finish({ kind: 'retry', reason: 'ping timeout', established });
      const outcome = classifyClose(code, reason.toString('utf8'));
      finish(outcome.kind === 'retry' ? { ...outcome, established: outcome.established ?? established } : outcome);
    });
  });
}
