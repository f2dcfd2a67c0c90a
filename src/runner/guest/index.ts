/**
 * `fountain runner-guest`: the agent inside a microVM. Serves its one sandbox, /home/sprite, with
 * the process backend, over a unix socket (vsock through socat), or a virtio-serial port (QEMU).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { err, ok } from '../../sandbox/result.ts';
import type { Result } from '../../sandbox/result.ts';
import { openProcessBackend } from '../backends/process/index.ts';
import type { ProcessBackend } from '../backends/process/index.ts';
import { serveNdjson } from '../ndjson-transport.ts';
import { openPort } from './serial.ts';

export const GUEST_AGENT = 'fountain runner-guest';
export const SANDBOX = 'sprite';
/** Where the agent listens when socat bridges vsock to it. */
export const VSOCK_BRIDGE_SOCKET = '/run/fountain-runner-guest.sock';

export type GuestListen =
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'serial'; readonly path: string }
  | { readonly kind: 'vsock'; readonly port: number; readonly socat?: string; readonly bridgeSocket?: string };

export interface GuestOptions {
  readonly root: string;
  readonly listen: GuestListen;
  readonly logger: Logger;
}

export interface GuestAgent {
  readonly backend: ProcessBackend;
  stop(): Promise<void>;
}

export async function startGuest(opts: GuestOptions): Promise<Result<GuestAgent, string>> {
  const opened = openProcessBackend({ root: opts.root, logger: opts.logger });
  if (!opened.ok) return opened;
  const backend = opened.value;
  try {
    mkdirSync(join(opts.root, SANDBOX), { recursive: true, mode: 0o700 });
  } catch (e) {
    return err(`cannot create ${join(opts.root, SANDBOX)}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const log = opts.logger;
  const serve = (s: import('node:stream').Duplex) => serveNdjson(s, backend, log, { pingAgent: GUEST_AGENT });
  let stopping = false;

  if (opts.listen.kind === 'serial') {
    const path = opts.listen.path;
    // EOF means the host went away; the port keeps reading EOF until one connects again.
    const loop = async () => {
      while (!stopping) {
        try {
          const port = await openPort(path);
          serve(port);
          await new Promise<void>((r) => port.once('close', () => r()).once('end', () => r()));
          port.destroy();
        } catch (e) {
          log.debug({ err: e instanceof Error ? e.message : String(e) }, 'runner-guest: cannot open the port');
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    void loop();
    log.info({ port: path }, 'runner-guest: serving on a virtio-serial port');
    return ok({
      backend,
      stop: async () => {
        stopping = true;
        await backend.stopAll();
      },
    });
  }

  const socketPath = opts.listen.kind === 'unix' ? opts.listen.path : (opts.listen.bridgeSocket ?? VSOCK_BRIDGE_SOCKET);
  rmSync(socketPath, { force: true });
  const server: Server = createServer((s) => serve(s));
  const listening = await new Promise<Error | null>((resolve) => {
    server.once('error', resolve);
    server.listen(socketPath, () => resolve(null));
  });
  if (listening) return err(`cannot listen on ${socketPath}: ${listening.message}`);

  let socat: ChildProcess | null = null;
  if (opts.listen.kind === 'vsock') {
    // Node cannot open AF_VSOCK: socat accepts vsock connections and bridges each to our socket.
    const { port, socat: bin = 'socat' } = opts.listen;
    const run = () => {
      if (stopping) return;
      const child = spawn(bin, [`VSOCK-LISTEN:${port},reuseaddr,fork`, `UNIX-CONNECT:${socketPath}`], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      socat = child;
      child.once('error', (e) => log.error({ err: e.message }, 'runner-guest: cannot start socat for vsock'));
      child.once('exit', () => {
        socat = null;
        if (!stopping) setTimeout(run, 1000);
      });
    };
    run();
    log.info({ vsockPort: port }, 'runner-guest: serving on vsock');
  } else {
    log.info({ socket: socketPath }, 'runner-guest: serving on a unix socket');
  }
  return ok({
    backend,
    stop: async () => {
      stopping = true;
      (socat as ChildProcess | null)?.kill('SIGTERM');
      server.close();
      await backend.stopAll();
      rmSync(socketPath, { force: true });
    },
  });
}
