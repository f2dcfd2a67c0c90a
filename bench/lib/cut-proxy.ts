/**
 * A loopback TCP proxy that plays a network between a runner and its server: pass bytes, cut every
 * connection and refuse new ones until restored, or let each connection through only to drop it.
 */
import { connect, createServer } from 'node:net';
import type { Socket } from 'node:net';

/**
 * - `up`: bytes flow both ways.
 * - `down`: a new connection is reset at once, as by a network with no route.
 * - `flap`: a new connection reaches the server, its first answer (the upgrade) is passed back, then
 *   both ends are dropped: a server that accepts and drops at once.
 */
export type ProxyMode = 'up' | 'down' | 'flap';

export interface CutProxy {
  /** `http://127.0.0.1:<port>`, to give the runner as its base URL. */
  readonly url: string;
  /** Connections accepted since the start, whatever became of them. */
  readonly accepted: number;
  /** Connections the server answered with `101 Switching Protocols` while flapping. */
  readonly upgradedThenDropped: number;
  /** Drops every open connection and refuses new ones until `restore`. */
  cut(): void;
  restore(): void;
  /** Sets how new connections are treated; `down` and `flap` also drop the open ones. */
  mode(m: ProxyMode): void;
  close(): Promise<void>;
}

/** A proxy to `target` (an http://host:port URL), or to whatever `target()` names when a connection arrives. */
export async function startCutProxy(target: string | (() => string)): Promise<CutProxy> {
  const resolveTarget = () => new URL(typeof target === 'string' ? target : target());
  const sockets = new Set<Socket>();
  let mode: ProxyMode = 'up';
  let accepted = 0;
  let flapped = 0;
  const track = (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  const server = createServer((inbound) => {
    accepted++;
    if (mode === 'down') {
      inbound.on('error', () => {});
      inbound.resetAndDestroy();
      return;
    }
    const { hostname, port } = resolveTarget();
    const outbound = connect(Number(port), hostname);
    track(inbound);
    track(outbound);
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
    if (mode === 'flap') {
      inbound.pipe(outbound);
      outbound.once('data', (chunk: Buffer) => {
        if (chunk.toString('latin1').startsWith('HTTP/1.1 101')) flapped++;
        inbound.write(chunk, () => {
          inbound.destroy();
          outbound.destroy();
        });
      });
      return;
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  const dropAll = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    get upgradedThenDropped() {
      return flapped;
    },
    cut() {
      mode = 'down';
      dropAll();
    },
    restore() {
      mode = 'up';
    },
    mode(m) {
      mode = m;
      if (m !== 'up') dropAll();
    },
    close() {
      dropAll();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
