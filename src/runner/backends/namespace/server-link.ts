/**
 * The Fountain server inside a sandbox's network namespace: when the runner's server listens on the
 * host's loopback, the same address and port answer inside the namespace and lead to it, nothing else.
 */
import { spawn } from 'node:child_process';
import { connect, isIP } from 'node:net';
import type { Server, Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Result } from '../../../sandbox/result.ts';
import { err, ok } from '../../../sandbox/result.ts';
import { nsPath } from './netns.ts';

/** The server's loopback host and port, or null when the URL is not on loopback (the egress policy applies then). */
export function loopbackServer(url: string | undefined): { host: string; port: number } | null {
  if (!url) return null;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
  if (!loopback) return null;
  const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  return { host: host === 'localhost' ? '127.0.0.1' : host, port };
}

/**
 * Runs inside the namespace (nsenter): listens on the address, hands the listening socket to the
 * daemon over the IPC channel, and exits. The daemon then accepts on it: no process stays in the sandbox.
 */
const LISTENER = `
const net = require('node:net');
const [host, port] = process.argv.slice(1);
const s = net.createServer({ pauseOnConnect: true });
s.once('error', (e) => { process.send({ error: e.message }, () => process.exit(1)); });
s.listen({ host, port: Number(port), exclusive: true }, () => process.send({ listening: true }, s, () => process.exit(0)));
`;

export interface ServerLink {
  close(): Promise<void>;
}

/** Opens `target` (a loopback host:port of this machine) at the same address inside the namespace `ns`. */
export function openServerLink(
  nsenter: string,
  ns: string,
  target: { host: string; port: number },
  logger: Logger,
): Promise<Result<ServerLink, string>> {
  return new Promise((resolve) => {
    const child = spawn(
      nsenter,
      [`--net=${nsPath(ns)}`, '--', process.execPath, '-e', LISTENER, target.host, String(target.port)],
      { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } },
    );
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => {
      stderr += b.toString('utf8').slice(0, 2000);
    });
    let settled = false;
    const settle = (r: Result<ServerLink, string>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settle(err('the server link inside the sandbox network did not start'));
    }, 15_000);
    child.on('message', (m: { listening?: boolean; error?: string }, handle: unknown) => {
      if (m?.error || !handle) return settle(err(`server link: ${m?.error ?? 'no listening socket'}`));
      settle(ok(serve(handle as Server, target, logger)));
    });
    child.once('exit', (code) =>
      settle(err(`server link: the listener exited ${code}${stderr ? `: ${stderr.trim()}` : ''}`)),
    );
    child.once('error', (e) => settle(err(`server link: ${e.message}`)));
  });
}

/** Splices every connection on the namespace's listener to the server. */
function serve(server: Server, target: { host: string; port: number }, logger: Logger): ServerLink {
  const live = new Set<Socket>();
  server.on('connection', (client: Socket) => {
    const upstream = connect({ host: target.host, port: target.port });
    live.add(client);
    live.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      live.delete(client);
      live.delete(upstream);
    };
    client.on('error', end);
    upstream.on('error', end);
    client.once('close', end);
    upstream.once('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
  });
  server.on('error', (e) => logger.warn({ err: e.message }, 'runner: server link listener error'));
  return {
    close: () =>
      new Promise<void>((r) => {
        for (const s of live) s.destroy();
        live.clear();
        server.close(() => r());
      }),
  };
}
