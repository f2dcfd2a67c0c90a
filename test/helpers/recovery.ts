/**
 * Test support for turn recovery end to end: a loopback TCP proxy the test severs, restores and
 * retargets between server nodes, and the check that every line of a turn's output was stored once.
 */
import assert from 'node:assert/strict';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { EventRow } from '../../src/server/store/conversation-schema.ts';

/** A loopback TCP proxy between the daemon and the server: sever drops every connection and refuses new ones. */
export class CutProxy {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #refusing = false;
  upstreamPort: number;
  connections = 0;

  private constructor(server: Server, upstreamPort: number) {
    this.#server = server;
    this.upstreamPort = upstreamPort;
  }

  static async start(upstreamPort: number): Promise<CutProxy> {
    const server = createServer();
    const proxy = new CutProxy(server, upstreamPort);
    server.on('connection', (down) => proxy.#accept(down));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  #accept(down: Socket): void {
    if (this.#refusing) {
      down.destroy();
      return;
    }
    const up = createConnection({ host: '127.0.0.1', port: this.upstreamPort });
    const pair: [Socket, Socket] = [down, up];
    this.#pairs.add(pair);
    this.connections++;
    const end = () => {
      this.#pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    down.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
    down.pipe(up);
    up.pipe(down);
  }

  /** Cuts every connection (both ends see a reset) and refuses new ones until restore(). */
  sever(): void {
    this.#refusing = true;
    for (const [a, b] of this.#pairs) {
      a.destroy();
      b.destroy();
    }
    this.#pairs.clear();
  }

  restore(): void {
    this.#refusing = false;
  }

  close(): Promise<void> {
    this.sever();
    return new Promise((r) => this.#server.close(() => r()));
  }
}

/** Every acp event of the turn exactly once: distinct lines, consecutive ordinals in the agent's output. */
export function assertStoredOnce(all: readonly EventRow[], turnId: string): void {
  const acp = all.filter((e) => e.turnId === turnId && e.stream === 'acp');
  assert.ok(acp.length > 0);
  assert.equal(new Set(acp.map((e) => e.data)).size, acp.length, 'an acp line was stored twice');
  const seqs = acp.map((e) => e.seq);
  assert.ok(seqs.every((s) => typeof s === 'number'));
  for (let i = 1; i < seqs.length; i++)
    assert.equal(seqs[i], seqs[i - 1]! + 1, `acp seqs not consecutive at ${i}: ${seqs.join(',')}`);
  const reply = JSON.parse(acp.at(-1)!.data);
  assert.equal(reply.result?.stopReason, 'end_turn', 'the last stored line is the prompt reply');
}
