/**
 * A FrameTransport over one `ws` WebSocket: ordered sends, a write timeout that kills a stalled
 * socket, and a drained() that resolves once everything sent so far reached the kernel.
 */
import WebSocket from 'ws';
import type { FrameTransport } from './protocol-server.ts';

export class WsTransport implements FrameTransport {
  readonly #ws: WebSocket;
  readonly #writeTimeoutMs: number;
  #sent = 0;
  #flushed = 0;
  #waiters: Array<{ seq: number; resolve: () => void }> = [];
  #stallTimer: NodeJS.Timeout | null = null;

  constructor(ws: WebSocket, writeTimeoutMs: number) {
    this.#ws = ws;
    this.#writeTimeoutMs = writeTimeoutMs;
    ws.once('close', () => this.#flushAll());
  }

  get open(): boolean {
    return this.#ws.readyState === WebSocket.OPEN;
  }

  send(frame: Buffer, written?: () => void): void {
    const seq = ++this.#sent;
    this.#armStall();
    // ws calls back once the socket took the frame, or with an error when the socket is gone.
    this.#ws.send(frame, { binary: false }, () => {
      written?.();
      this.#done(seq);
    });
  }

  drained(): Promise<void> {
    if (this.#flushed >= this.#sent || !this.open) return Promise.resolve();
    const seq = this.#sent;
    return new Promise((resolve) => this.#waiters.push({ seq, resolve }));
  }

  #done(seq: number): void {
    this.#flushed = Math.max(this.#flushed, seq);
    const ready = this.#waiters.filter((w) => w.seq <= this.#flushed);
    this.#waiters = this.#waiters.filter((w) => w.seq > this.#flushed);
    for (const w of ready) w.resolve();
    if (this.#flushed >= this.#sent) this.#clearStall();
    else this.#armStall(true);
  }

  /** A write that makes no progress for the write timeout means the peer is gone. */
  #armStall(restart = false): void {
    if (this.#stallTimer && !restart) return;
    this.#clearStall();
    this.#stallTimer = setTimeout(() => this.#ws.terminate(), this.#writeTimeoutMs);
  }

  #clearStall(): void {
    if (this.#stallTimer) clearTimeout(this.#stallTimer);
    this.#stallTimer = null;
  }

  #flushAll(): void {
    this.#clearStall();
    for (const w of this.#waiters) w.resolve();
    this.#waiters = [];
  }
}
