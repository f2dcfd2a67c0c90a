/**
 * Test support for turn recovery end to end: a loopback TCP proxy the test severs, restores and
 * retargets between server nodes, and the check that every line of a turn's output was stored once.
 */
import assert from 'node:assert/strict';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { startRunnerChild, type RunnerChild } from '../../src/server/conversations/testing.ts';
import type { EventRow } from '../../src/server/store/conversation-schema.ts';

/**
 * Where a trapped `stdin` request is cut: `before` it reaches the daemon (the frame is swallowed), or
 * `after` it (the frame is passed on and nothing the daemon sends comes back, its reply included).
 */
export type StdinCut = 'before' | 'after';

interface Trap {
  readonly where: StdinCut;
  readonly sprung: () => void;
}

/** The server's request frames are unmasked text on the wire: a stdin request shows this much of itself. */
const STDIN_MARK = Buffer.from('"op":"stdin"');

/** A loopback TCP proxy between the daemon and the server: sever drops every connection and refuses new ones. */
export class CutProxy {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #refusing = false;
  #trap: Trap | null = null;
  /** Set once an `after` trap sprang: the daemon's frames go nowhere until the connection is severed. */
  #muted = false;
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
    down.on('data', (chunk: Buffer) => {
      if (!this.#muted) up.write(chunk);
    });
    // The tail of the previous chunk is searched with the next, for a mark split between two reads.
    let tail: Buffer = Buffer.alloc(0);
    up.on('data', (chunk: Buffer) => {
      const trap = this.#trap;
      if (trap && Buffer.concat([tail, chunk]).includes(STDIN_MARK)) {
        this.#trap = null;
        if (trap.where === 'before') {
          this.sever();
        } else {
          this.#muted = true;
          down.write(chunk);
        }
        trap.sprung();
        return;
      }
      tail = chunk.subarray(Math.max(0, chunk.length - STDIN_MARK.length));
      down.write(chunk);
    });
  }

  /**
   * Springs on the next `stdin` request the server sends: `before` severs at once, the frame unsent;
   * `after` passes it on and mutes the daemon (its reply never arrives) until the test severs. Resolves when sprung.
   */
  trapStdin(where: StdinCut): Promise<void> {
    return new Promise((sprung) => {
      this.#trap = { where, sprung };
    });
  }

  /** Cuts every connection (both ends see a reset) and refuses new ones until restore(). */
  sever(): void {
    this.#refusing = true;
    this.#muted = false;
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

/**
 * A `fountain runner` child named `r` (sandboxes under `<tmp>/sandboxes`) dialing the server on
 * `serverPort` through a new CutProxy, reconnecting every 100–200 ms so a restored link is back at once.
 */
export async function runnerBehindProxy(
  serverPort: number,
  apiKey: string,
  tmp: string,
): Promise<{ proxy: CutProxy; runner: RunnerChild }> {
  const proxy = await CutProxy.start(serverPort);
  const runner = startRunnerChild({
    name: 'r',
    root: join(tmp, 'sandboxes'),
    baseUrl: `http://127.0.0.1:${proxy.port}`,
    apiKey,
    home: tmp,
    extraArgs: ['--reconnect-base-ms', '100', '--reconnect-cap-ms', '200'],
  });
  return { proxy, runner };
}
