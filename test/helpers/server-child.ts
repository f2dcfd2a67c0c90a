/**
 * `fountain server` as a child process on a data directory (and the database its env names), resolved
 * once it prints its listening line: for tests that stop a server and start another on the same data.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { FOUNTAIN_BIN } from '../../src/server/conversations/testing.ts';

export interface ServerChild {
  readonly child: ChildProcess;
  readonly url: string;
  /** SIGTERM (SIGKILL after 30 s); resolves once it exited. */
  stop(): Promise<void>;
  output(): string;
}

export function startServerChild(env: Record<string, string>, dataDir: string): Promise<ServerChild> {
  const child = spawn(process.execPath, [FOUNTAIN_BIN, 'server', '--port', '0', '--data-dir', dataDir], {
    env: { ...process.env, FOUNTAIN_PROFILE: '', ...env, FOUNTAIN_LOG_FORMAT: 'json' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(t);
  };
  return new Promise((resolve, reject) => {
    const onData = () => {
      const m = /fountain server listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        child.stdout!.off('data', onData);
        resolve({ child, url: m[1]!, stop, output: () => out });
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`fountain server exited with ${code}: ${out.slice(-2000)}`)));
  });
}
