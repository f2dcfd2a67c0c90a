/**
 * The server end of one runner's WebSocket: numbered requests, reply routing, session
 * subscriptions (reply → replay → live), heartbeat, and the close sequence.
 */
import type { Logger } from 'pino';
import { WebSocket } from 'ws';
import type { RawData } from 'ws';
import { z } from 'zod';
import type { SandboxResult } from '../../sandbox/index.ts';
import { err, fail, ok, sandboxError } from '../../sandbox/index.ts';
import {
  CLOSE,
  TOO_DEEP,
  decodeBase64,
  decodeOutputFrameBytes,
  encodeFrame,
  nestsDeeperThan,
  replySchema,
} from '../../wire/index.ts';
import type { Request } from '../../wire/index.ts';
import { RUNNER_DISCONNECTED, RUNNER_TIMEOUT, malformed, quote, wireError } from './errors.ts';
import type { OutgoingRequest, RunnerConnection, RunnerHost, RunnerInfo, SessionListener } from './host.ts';

export interface AcceptOptions {
  readonly logger: Logger;
  /** Heartbeat (host.heartbeat, then a WS ping); default 20 s. */
  readonly heartbeatMs?: number;
  /** Default call timeout; default 30 s. */
  readonly callTimeoutMs?: number;
  /** A socket silent (no frame, no pong) this long is dropped; default 120 s. */
  readonly idleTimeoutMs?: number;
}

export const DEFAULT_HEARTBEAT_MS = 20_000;
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 120_000;
/** setTimeout fires at once for delays above this, so longer ones are treated as no limit. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** A close reason must fit in a control frame (123 bytes). */
const MAX_REASON_BYTES = 123;
/** RFC 6455 1011: the server hit an unexpected condition (here: the host threw). */
const INTERNAL_ERROR = 1011;

export const alreadyConnectedReason = (name: string): string => `a runner named ${name} is already connected`;

/**
 * Server-side stream decoding is lenient on purpose: bad base64 is taken as the raw text,
 * missing `data` is empty, missing `code` is 0. Only the routing fields must be right.
 */
const inboundStreamSchema = z.object({
  stream: z.enum(['stdout', 'stderr', 'exit']),
  session_id: z.string().min(1),
  data: z.unknown().optional(),
  code: z.unknown().optional(),
  replay_for: z.unknown().optional(),
});

interface Pending {
  readonly op: string;
  readonly resolve: (r: SandboxResult<Record<string, unknown>>) => void;
  readonly listener: SessionListener | undefined;
  timer: NodeJS.Timeout | undefined;
}

interface Subscription {
  readonly listener: SessionListener;
  /** The request that installed it: replay frames tagged with this id go only here. */
  readonly reqId: number;
}

const rawBytes = (data: RawData): Buffer => {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
};

const truncateReason = (reason: string): string => {
  const bytes = Buffer.from(reason, 'utf8');
  return bytes.length <= MAX_REASON_BYTES
    ? reason
    : bytes
        .subarray(0, MAX_REASON_BYTES)
        .toString('utf8')
        .replace(/\uFFFD+$/, '');
};

class SocketRunnerConnection implements RunnerConnection {
  readonly info: RunnerInfo;
  readonly #ws: WebSocket;
  readonly #host: RunnerHost;
  readonly #log: Logger;
  readonly #callTimeoutMs: number;
  readonly #pending = new Map<number, Pending>();
  readonly #subs = new Map<string, Subscription[]>();
  #nextId = 0;
  #closed = false;
  #heartbeat: NodeJS.Timeout | undefined;
  #lastHeard = Date.now();

  constructor(ws: WebSocket, info: RunnerInfo, host: RunnerHost, opts: AcceptOptions) {
    this.#ws = ws;
    this.info = info;
    this.#host = host;
    this.#log = opts.logger.child({ runner_id: info.runnerId, runner: info.name });
    this.#callTimeoutMs = opts.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  }

  /** Wires the socket's events; called only once the host accepted the registration. */
  start(opts: AcceptOptions): void {
    const ws = this.#ws;
    ws.on('message', (data, isBinary) => this.#guard('message', () => this.#onMessage(data, isBinary)));
    ws.on('pong', () => {
      this.#lastHeard = Date.now();
    });
    ws.on('error', (e) => this.#log.warn({ err: e.message }, 'runner socket error'));
    ws.on('close', (code, reason) => {
      this.#log.info({ code, reason: reason.toString('utf8') }, 'runner socket closed');
      this.#teardown();
    });
    const heartbeatMs = opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    const idleMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#heartbeat = setInterval(() => this.#guard('heartbeat', () => this.#beat(idleMs)), heartbeatMs);
    this.#heartbeat.unref();
    this.#guard('presence', () => this.#host.presence(this.info, 'online'));
    if (ws.readyState !== WebSocket.OPEN) this.#teardown();
  }

  call(
    request: OutgoingRequest,
    opts: { timeoutMs?: number | null; listener?: SessionListener } = {},
  ): Promise<SandboxResult<Record<string, unknown>>> {
    if (this.#closed || this.#ws.readyState !== WebSocket.OPEN)
      return Promise.resolve(fail('unavailable', RUNNER_DISCONNECTED));
    const id = ++this.#nextId;
    let text: string;
    try {
      text = encodeFrame({ ...request, id } as Request);
    } catch (e) {
      return Promise.resolve(
        fail('invalid', `request cannot be encoded: ${e instanceof Error ? e.message : String(e)}`),
      );
    }
    return new Promise((resolve) => {
      const pending: Pending = { op: request.op, resolve, listener: opts.listener, timer: undefined };
      this.#pending.set(id, pending);
      const timeout = opts.timeoutMs === undefined ? this.#callTimeoutMs : opts.timeoutMs;
      if (timeout !== null && timeout <= MAX_TIMER_MS) {
        pending.timer = setTimeout(() => this.#settle(id, fail('unavailable', RUNNER_TIMEOUT)), Math.max(0, timeout));
      }
      try {
        this.#ws.send(text, (e) => {
          if (e) this.#settle(id, fail('unavailable', RUNNER_DISCONNECTED));
        });
      } catch {
        this.#settle(id, fail('unavailable', RUNNER_DISCONNECTED));
      }
    });
  }

  unsubscribe(sessionId: string, listener: SessionListener): void {
    const subs = this.#subs.get(sessionId);
    if (!subs) return;
    const left = subs.filter((s) => s.listener !== listener);
    if (left.length === subs.length) return;
    if (left.length > 0) {
      this.#subs.set(sessionId, left);
      return;
    }
    this.#subs.delete(sessionId);
    // Fire-and-forget: id 0 matches no pending request, so its reply is dropped.
    if (this.#closed || this.#ws.readyState !== WebSocket.OPEN) return;
    try {
      this.#ws.send(encodeFrame({ id: 0, op: 'detach', session_id: sessionId }));
    } catch (e) {
      this.#log.debug({ err: String(e) }, 'detach not sent');
    }
  }

  close(code: number, reason: string): void {
    try {
      this.#ws.close(code, truncateReason(reason));
    } catch {
      this.#ws.terminate();
    }
    // The runner must stop being routable now, not after the peer answers the close handshake.
    this.#teardown();
  }

  /** Runs a hook or listener so that neither a throw nor a rejected promise (an async hook) escapes. */
  #guard(what: string, fn: () => unknown): void {
    const report = (e: unknown): void => {
      this.#log.error({ err: e instanceof Error ? e.message : String(e), what }, 'runner connection handler failed');
    };
    try {
      const r = fn();
      if (r instanceof Promise) r.catch(report);
    } catch (e) {
      report(e);
    }
  }

  #beat(idleMs: number): void {
    if (this.#closed) return;
    if (Date.now() - this.#lastHeard > idleMs) {
      this.#log.warn({ idle_ms: idleMs }, 'runner socket idle; dropping it');
      this.#ws.terminate();
      this.#teardown();
      return;
    }
    this.#guard('heartbeat hook', () => this.#host.heartbeat(this.info));
    if (this.#ws.readyState === WebSocket.OPEN) this.#ws.ping();
  }

  #onMessage(data: RawData, isBinary: boolean): void {
    this.#lastHeard = Date.now();
    if (this.#closed) return;
    if (isBinary) {
      this.close(CLOSE.unsupportedData, 'frames must be JSON text');
      return;
    }
    const bytes = rawBytes(data);
    const output = decodeOutputFrameBytes(bytes);
    if (output) {
      this.#deliver(output.session_id, output.replay_for, (s) => s.listener.output(output.stream, output.data));
      return;
    }
    if (nestsDeeperThan(bytes)) {
      this.close(CLOSE.unsupportedData, TOO_DEEP);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(bytes.toString('utf8'));
    } catch {
      this.close(CLOSE.unsupportedData, 'frames must be JSON text');
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.#log.warn({ frame: quote(value) }, 'ignoring a frame that is not a JSON object');
      return;
    }
    const obj = value as Record<string, unknown>;
    if ('stream' in obj) this.#onStream(obj);
    else if ('id' in obj && !('op' in obj)) this.#onReply(obj);
    else this.#log.warn({ frame: quote(obj) }, 'ignoring a frame that is neither a reply nor a stream frame');
  }

  #onReply(obj: Record<string, unknown>): void {
    const id = obj.id;
    const pending = typeof id === 'number' ? this.#pending.get(id) : undefined;
    if (typeof id !== 'number' || !pending) {
      // Replies to id 0 (detach) land here by design; anything else is late or bogus.
      if (id !== 0) this.#log.warn({ id: quote(id) }, 'reply matches no pending request');
      return;
    }
    const parsed = replySchema.safeParse(obj);
    if (!parsed.success) {
      this.#settle(id, err(malformed('reply', obj)));
      return;
    }
    const reply = parsed.data;
    if (!reply.ok) {
      this.#settle(id, err(wireError(reply.error, reply.detail)));
      return;
    }
    const sessionId = reply.result.session_id;
    if (pending.listener && typeof sessionId === 'string' && sessionId.length > 0) {
      // Installed synchronously, before the caller's promise resumes: the replay frames
      // that follow in the same read are delivered to this listener.
      const subs = this.#subs.get(sessionId) ?? [];
      subs.push({ listener: pending.listener, reqId: id });
      this.#subs.set(sessionId, subs);
    }
    this.#settle(id, ok(reply.result));
  }

  #onStream(obj: Record<string, unknown>): void {
    const parsed = inboundStreamSchema.safeParse(obj);
    if (!parsed.success) {
      this.#log.warn({ frame: quote(obj) }, 'ignoring a malformed stream frame');
      return;
    }
    const f = parsed.data;
    const replayFor = typeof f.replay_for === 'number' && Number.isSafeInteger(f.replay_for) ? f.replay_for : undefined;
    if (f.stream === 'exit') {
      const code = typeof f.code === 'number' && Number.isSafeInteger(f.code) ? f.code : 0;
      const targets = this.#targets(f.session_id, replayFor);
      this.#subs.delete(f.session_id);
      for (const s of targets) this.#guard('listener exit', () => s.listener.exit(code));
      return;
    }
    const bytes = typeof f.data === 'string' ? (decodeBase64(f.data) ?? Buffer.from(f.data, 'utf8')) : Buffer.alloc(0);
    const stream = f.stream;
    this.#deliver(f.session_id, replayFor, (s) => s.listener.output(stream, bytes));
  }

  /** A replay copy goes only to the subscriber its request installed; live output to every one. */
  #targets(sessionId: string, replayFor: number | undefined): Subscription[] {
    const subs = this.#subs.get(sessionId);
    if (!subs) return [];
    return replayFor === undefined ? [...subs] : subs.filter((s) => s.reqId === replayFor);
  }

  #deliver(sessionId: string, replayFor: number | undefined, fn: (s: Subscription) => void): void {
    for (const s of this.#targets(sessionId, replayFor)) this.#guard('listener output', () => fn(s));
  }

  #settle(id: number, result: SandboxResult<Record<string, unknown>>): void {
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    if (pending.timer) clearTimeout(pending.timer);
    if (!result.ok && result.error.detail === RUNNER_TIMEOUT)
      this.#log.warn({ id, op: pending.op }, 'runner call timed out');
    pending.resolve(result);
  }

  /** The close sequence, once: unregister before presence offline, then fail calls, then tell listeners. */
  #teardown(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    this.#guard('unregister', () => this.#host.unregister(this));
    this.#guard('presence', () => this.#host.presence(this.info, 'offline'));
    for (const id of [...this.#pending.keys()]) this.#settle(id, err(sandboxError('unavailable', RUNNER_DISCONNECTED)));
    const subs = [...this.#subs.values()].flat();
    this.#subs.clear();
    for (const s of subs) this.#guard('listener disconnected', () => s.listener.disconnected(RUNNER_DISCONNECTED));
  }
}

/**
 * Takes over an upgraded runner socket whose registration checks passed. Returns null when the
 * host already holds a connection for this runner: the socket is closed with 4409 and no presence
 * is announced. Never throws.
 */
export function acceptRunnerSocket(
  ws: WebSocket,
  info: RunnerInfo,
  host: RunnerHost,
  opts: AcceptOptions,
): RunnerConnection | null {
  const conn = new SocketRunnerConnection(ws, info, host, opts);
  let registered: boolean | 'failed';
  try {
    registered = host.register(conn);
  } catch (e) {
    opts.logger.error(
      { err: e instanceof Error ? e.message : String(e), runner_id: info.runnerId },
      'runner registration failed',
    );
    registered = 'failed';
  }
  if (registered !== true) {
    ws.on('error', () => {});
    try {
      if (registered === false) ws.close(CLOSE.alreadyConnected, truncateReason(alreadyConnectedReason(info.name)));
      else ws.close(INTERNAL_ERROR, 'registration failed');
    } catch {
      ws.terminate();
    }
    return null;
  }
  conn.start(opts);
  return conn;
}
