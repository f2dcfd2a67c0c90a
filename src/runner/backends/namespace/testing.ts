/**
 * Test hosts for the namespace backend: an "internet" made of a network namespace on this machine,
 * joined by a veth pair and serving HTTP, so egress tests never leave the machine. Tests only.
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

/** A tiny HTTP server: answers `hello <Host>` to any request. */
const SERVER = `
const http = require('node:http');
http.createServer((req, res) => res.end('hello ' + (req.headers.host || '') + '\\n')).listen(80, '0.0.0.0', () => console.log('ready'));
`;

export interface TestInternet {
  /** The one address every test name resolves to, inside the test namespace. */
  readonly address: string;
  close(): void;
}

/** Starts the namespace, its link and its server; `octet` keeps parallel runs apart (10.63.<octet>.0/30). */
export async function startTestInternet(octet: number): Promise<TestInternet> {
  const ns = `fountain-test-inet-${octet}`;
  const hostIf = `fti${octet}h`;
  const host = `10.63.${octet}.1`;
  const address = `10.63.${octet}.2`;
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
  const quiet = (...args: string[]) => {
    try {
      ip(...args);
    } catch {
      // not there
    }
  };
  quiet('netns', 'del', ns);
  quiet('link', 'del', hostIf);
  ip('netns', 'add', ns);
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns);
  ip('addr', 'add', `${host}/30`, 'dev', hostIf);
  ip('link', 'set', hostIf, 'up');
  ip('-n', ns, 'addr', 'add', `${address}/30`, 'dev', 'eth0');
  ip('-n', ns, 'link', 'set', 'eth0', 'up');
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  const server: ChildProcess = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', SERVER], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('test internet server did not start')), 10_000);
    server.stdout!.on('data', (b: Buffer) => {
      if (b.toString().includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    server.once('exit', (code) => reject(new Error(`test internet server exited with ${code}`)));
  });
  return {
    address,
    close() {
      server.kill('SIGKILL');
      quiet('netns', 'del', ns);
      quiet('link', 'del', hostIf);
    },
  };
}
