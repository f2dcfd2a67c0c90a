/**
 * Serves the runner protocol to one peer over any ordered transport of JSON text frames:
 * decode, dispatch to a Backend concurrently, reply by id, then run the op's follow-up.
 */
import type { Logger } from 'pino';
import type { Reply, Request, StreamFrame } from '../wire/index.ts';
import { decodeFrame, encodeFrameBytes, errorReply, okReply } from '../wire/index.ts';
import type { Backend, OpContext, OpResult, StreamOut } from './backend.ts';
import { FramePool } from './frame-pool.ts';

/**
 * One peer's ordered text channel (a WebSocket, a newline-delimited vsock stream, ...).
 * `send` takes one frame's JSON text as UTF-8 bytes and must keep call order on the wire;
 * writes from every request share it.
 */
export interface FrameTransport {
  readonly open: boolean;
  /** Queues a frame; `written` runs once the transport no longer reads `frame` (sent, or dropped with the connection). */
  send(frame: Buffer, written?: () => void): void;
  drained(): Promise<void>;
}

export interface ProtocolServerOptions {
  /** When set, `ping` is answered with this agent name (the microVM guest link); otherwise `not_supported`. */
  readonly pingAgent?: string;
}

export class ProtocolServer {
  readonly #backend: Backend;
  readonly #transport: FrameTransport;
  readonly #log: Logger;
  readonly #opts: ProtocolServerOptions;
  readonly out: StreamOut;
  readonly #pool = new FramePool();

  constructor(backend: Backend, transport: FrameTransport, logger: Logger, opts: ProtocolServerOptions = {}) {
    this.#backend = backend;
    this.#transport = transport;
    this.#log = logger;
    this.#opts = opts;
    this.out = {
      get open() {
        return transport.open;
      },
      // #write encodes a frame into a buffer of its own before returning.
      copiesOnSend: true,
      send: (frame: StreamFrame) => this.#write(frame),
      drained: () => transport.drained(),
    };
  }

  /** Takes one inbound text frame. Never throws; the request runs concurrently with others. */
  receive(text: string): void {
    const decoded = decodeFrame(text);
    if (decoded.kind === 'refused') {
      if (decoded.id !== undefined) this.#write(errorReply(decoded.id, decoded.code, decoded.detail));
      else
        this.#log.warn(
          { code: decoded.code, detail: decoded.detail },
          'runner: ignoring a frame that is not a request',
        );
      return;
    }
    if (decoded.kind !== 'request') {
      this.#log.warn({ kind: decoded.kind }, 'runner: ignoring a frame that is not a request');
      return;
    }
    void this.#handle(decoded.request);
  }

  async #handle(req: Request): Promise<void> {
    let outcome: OpResult<object>;
    try {
      outcome = await this.#dispatch(req, { requestId: req.id, out: this.out });
    } catch (e) {
      // Backends are total; a throw is a bug, answered as an untyped error rather than a crash.
      outcome = { ok: false, error: { code: 'provider', detail: e instanceof Error ? e.message : String(e) } };
    }
    if (!outcome.ok) {
      const { code, detail } = outcome.error;
      if (code === 'provider' || code === 'unavailable')
        this.#log.warn({ op: req.op, id: req.id, code, detail }, 'runner: op failed');
      else this.#log.debug({ op: req.op, id: req.id, code, detail }, 'runner: op refused');
      this.#write(errorReply(req.id, code, detail));
      return;
    }
    this.#write(okReply(req.id, outcome.value.result as Record<string, unknown>));
    try {
      outcome.value.followUp?.();
    } catch (e) {
      this.#log.error({ op: req.op, id: req.id, err: e }, 'runner: follow-up step failed');
    }
  }

  #dispatch(req: Request, ctx: OpContext): Promise<OpResult<object>> {
    const b = this.#backend;
    switch (req.op) {
      case 'create':
        return b.create(req);
      case 'get':
        return b.get(req);
      case 'destroy':
        return b.destroy(req);
      case 'list':
        return b.list(req);
      case 'suspend':
        return b.suspend(req);
      case 'resume':
        return b.resume(req);
      case 'write_file':
        return b.writeFile(req);
      case 'exec':
        return b.exec(req);
      case 'spawn':
        return b.spawn(req, ctx);
      case 'stdin':
        return b.stdin(req);
      case 'stdin_close':
        return b.stdinClose(req);
      case 'detach':
        return b.detach(req);
      case 'list_sessions':
        return b.listSessions(req);
      case 'attach':
        return b.attach(req, ctx);
      case 'apply_network_policy':
        return b.applyNetworkPolicy
          ? b.applyNetworkPolicy(req)
          : Promise.resolve({ ok: false, error: { code: 'not_supported', detail: 'network_policy' } });
      case 'ping':
        return Promise.resolve(
          this.#opts.pingAgent === undefined
            ? { ok: false, error: { code: 'not_supported', detail: 'ping' } }
            : { ok: true, value: { result: { agent: this.#opts.pingAgent } } },
        );
    }
  }

  #write(frame: Reply | StreamFrame): void {
    if (!this.#transport.open) return;
    try {
      let pooled: Buffer | undefined;
      const bytes = encodeFrameBytes(frame, (size) => (pooled = this.#pool.take(size)));
      const buf = pooled;
      this.#transport.send(bytes, buf && (() => this.#pool.give(buf)));
    } catch (e) {
      this.#log.warn({ err: e }, 'runner: write failed');
    }
  }
}
