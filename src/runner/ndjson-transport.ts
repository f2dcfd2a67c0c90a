/**
 * The runner protocol over any byte stream as newline-delimited JSON (the microVM guest link's
 * framing): the same ProtocolServer and Backend as the WebSocket, another carrier.
 */
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { MAX_FRAME_BYTES } from '../wire/index.ts';
import type { Backend } from './backend.ts';
import { ProtocolServer } from './protocol-server.ts';
import type { FrameTransport, ProtocolServerOptions } from './protocol-server.ts';

class StreamTransport implements FrameTransport {
  readonly #stream: Duplex;
  #sent = 0;
  #flushed = 0;
  #waiters: Array<{ seq: number; resolve: () => void }> = [];

  constructor(stream: Duplex) {
    this.#stream = stream;
    stream.once('close', () => {
      for (const w of this.#waiters) w.resolve();
      this.#waiters = [];
    });
  }

  get open(): boolean {
    return !this.#stream.destroyed && this.#stream.writable;
  }

  send(frame: Buffer, written?: () => void): void {
    const seq = ++this.#sent;
    // Corked, the frame and its newline leave in one write without copying the frame.
    this.#stream.cork();
    this.#stream.write(frame);
    this.#stream.write('\n', () => {
      written?.();
      this.#flushed = Math.max(this.#flushed, seq);
      const ready = this.#waiters.filter((w) => w.seq <= this.#flushed);
      this.#waiters = this.#waiters.filter((w) => w.seq > this.#flushed);
      for (const w of ready) w.resolve();
    });
    this.#stream.uncork();
  }

  drained(): Promise<void> {
    if (this.#flushed >= this.#sent || !this.open) return Promise.resolve();
    const seq = this.#sent;
    return new Promise((resolve) => this.#waiters.push({ seq, resolve }));
  }
}

/**
 * Serves one connected stream until it closes. Sessions belong to the backend, not to the
 * stream, so a peer that reconnects can attach and replay.
 */
export function serveNdjson(
  stream: Duplex,
  backend: Backend,
  logger: Logger,
  opts: ProtocolServerOptions = {},
): ProtocolServer {
  const server = new ProtocolServer(backend, new StreamTransport(stream), logger, opts);
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let skipping = false;
  stream.on('data', (chunk: Buffer) => {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (skipping) {
        skipping = false;
        continue;
      }
      const line = pendingBytes ? Buffer.concat([...pending, piece]).toString('utf8') : piece.toString('utf8');
      pending = [];
      pendingBytes = 0;
      if (line.trim() !== '') server.receive(line);
    }
    if (start < chunk.length && !skipping) {
      pending.push(chunk.subarray(start));
      pendingBytes += chunk.length - start;
      if (pendingBytes > MAX_FRAME_BYTES) {
        // An endless line must not eat memory: drop it up to its newline.
        logger.warn('runner: dropping an oversized frame');
        pending = [];
        pendingBytes = 0;
        skipping = true;
      }
    }
  });
  stream.on('error', (e) => logger.debug({ err: e.message }, 'runner: stream error'));
  return server;
}
