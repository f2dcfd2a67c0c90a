/**
 * The egress proxy of one sandbox: TCP listeners on its gateway address that read the name a
 * connection is for (SNI or Host), check it against the live policy, and splice it to that name.
 */
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import type { Logger } from 'pino';
import { normalizeName } from './policy.ts';
import { MAX_SNIFF_BYTES, sniffName } from './sniff.ts';

/** Resolves a name to the addresses the proxy dials, from the host's point of view. */
export type Lookup = (name: string) => Promise<readonly string[]>;

export interface EgressProxyOptions {
  readonly address: string;
  readonly ports: readonly number[];
  readonly allowed: (name: string) => boolean;
  readonly lookup: Lookup;
  readonly logger: Logger;
  /** How long a client may take to send its name, and an upstream to accept. */
  readonly handshakeMs?: number;
}

const isLoopback = (a: string): boolean => a.startsWith('127.') || a === '::1' || a.startsWith('::ffff:127.');

interface Spliced {
  readonly name: string;
  readonly client: Socket;
  readonly upstream: Socket;
}

export class EgressProxy {
  readonly #opts: EgressProxyOptions;
  readonly #servers: Server[] = [];
  readonly #live = new Set<Spliced>();
  readonly #pending = new Set<Socket>();

  private constructor(opts: EgressProxyOptions) {
    this.#opts = opts;
  }

  static async start(opts: EgressProxyOptions): Promise<EgressProxy> {
    const proxy = new EgressProxy(opts);
    try {
      for (const port of opts.ports) proxy.#servers.push(await proxy.#listen(port));
    } catch (e) {
      await proxy.close();
      throw e;
    }
    return proxy;
  }

  /** Connections open right now, by name; for tests and logs. */
  openNames(): string[] {
    return [...this.#live].map((s) => s.name);
  }

  /** Ends every spliced connection whose name the policy no longer allows. */
  revoke(): number {
    let n = 0;
    for (const s of [...this.#live]) {
      if (!this.#opts.allowed(s.name)) {
        s.client.destroy();
        s.upstream.destroy();
        this.#live.delete(s);
        n += 1;
      }
    }
    return n;
  }

  async close(): Promise<void> {
    for (const s of this.#live) {
      s.client.destroy();
      s.upstream.destroy();
    }
    this.#live.clear();
    for (const s of this.#pending) s.destroy();
    this.#pending.clear();
    await Promise.all(this.#servers.map((srv) => new Promise<void>((r) => srv.close(() => r()))));
    this.#servers.length = 0;
  }

  #listen(port: number): Promise<Server> {
    const server = createServer((client) => this.#accept(client, port));
    server.on('error', (e) => this.#opts.logger.warn({ err: e.message, port }, 'runner: egress proxy listener error'));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.#opts.address, port, exclusive: true }, () => {
        server.off('error', reject);
        resolve(server);
      });
    });
  }

  #accept(client: Socket, port: number): void {
    const log = this.#opts.logger;
    this.#pending.add(client);
    client.on('error', () => {});
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => client.destroy(), this.#opts.handshakeMs ?? 10_000);
    const drop = (why: string, name?: string) => {
      clearTimeout(timer);
      this.#pending.delete(client);
      log.info({ port, name, why }, 'runner: egress refused');
      client.destroy();
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      const head = Buffer.concat(chunks);
      const sniffed = sniffName(head);
      if (sniffed.kind === 'more') {
        if (size > MAX_SNIFF_BYTES) drop('no name in the first bytes');
        return;
      }
      client.off('data', onData);
      client.pause();
      if (sniffed.kind === 'none') return drop(sniffed.why);
      const name = normalizeName(sniffed.name);
      if (name === null) return drop('not a domain name', sniffed.name);
      if (!this.#opts.allowed(name)) return drop('not allowed', name);
      void this.#splice(client, name, port, head).finally(() => {
        clearTimeout(timer);
        this.#pending.delete(client);
      });
    };
    client.on('data', onData);
    client.once('close', () => {
      clearTimeout(timer);
      this.#pending.delete(client);
    });
  }

  async #splice(client: Socket, name: string, port: number, head: Buffer): Promise<void> {
    const log = this.#opts.logger;
    let addresses: readonly string[];
    try {
      addresses = await this.#opts.lookup(name);
    } catch (e) {
      log.info({ host: name, err: e instanceof Error ? e.message : String(e) }, 'runner: egress lookup failed');
      client.destroy();
      return;
    }
    // The host's own loopback services are never egress, whatever a name resolves to.
    addresses = addresses.filter((a) => !isLoopback(a));
    // The policy may have changed while the name was looked up.
    if (client.destroyed || !this.#opts.allowed(name) || addresses.length === 0) {
      client.destroy();
      return;
    }
    const upstream = await this.#dial(addresses, port);
    if (upstream === null || client.destroyed) {
      upstream?.destroy();
      client.destroy();
      return;
    }
    const entry: Spliced = { name, client, upstream };
    this.#live.add(entry);
    const end = () => {
      this.#live.delete(entry);
      client.destroy();
      upstream.destroy();
    };
    client.once('close', end);
    upstream.once('close', end);
    upstream.on('error', () => {});
    upstream.write(head);
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
  }

  /** Tries each address in turn; null when none accepts. */
  async #dial(addresses: readonly string[], port: number): Promise<Socket | null> {
    for (const host of addresses) {
      const sock = await new Promise<Socket | null>((resolve) => {
        const s = connect({ host, port });
        const timer = setTimeout(() => {
          s.destroy();
          resolve(null);
        }, this.#opts.handshakeMs ?? 10_000);
        s.once('connect', () => {
          clearTimeout(timer);
          resolve(s);
        });
        s.once('error', () => {
          clearTimeout(timer);
          resolve(null);
        });
      });
      if (sock) return sock;
    }
    return null;
  }
}
