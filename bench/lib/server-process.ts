/**
 * `fountain server` as a user starts it (bin/fountain.js, a child process of its own), for the
 * benchmarks that measure the shipped process from outside: start-up time and resident memory.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { processCpuMs } from './cpu.ts';
import { FOUNTAIN_BIN, REPO } from './rig.ts';

export interface ServerProcess {
  readonly pid: number;
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Spawns `node <argv>`, waits for the line matching `ready` (its URL in group 1) and a 200 from
 * `probe`; resolves with the process, the milliseconds that took and the CPU the process spent by
 * then (all its threads, from /proc: steadier than the wall clock on a loaded machine).
 */
export async function startProcess(
  argv: readonly string[],
  ready: RegExp,
  probe: string,
  env: NodeJS.ProcessEnv,
): Promise<{ proc: ServerProcess; readyMs: number; cpuMs: number }> {
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, argv, { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = async () => {
    child.kill('SIGTERM');
    await exited;
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout });
      lines.on('line', (l) => {
        const m = ready.exec(l);
        if (m) resolve(m[1]!);
      });
      void exited.then((code) =>
        reject(new Error(`${argv.slice(0, 3).join(' ')} exited ${code} before it was ready: ${stderr}`)),
      );
    });
    for (;;) {
      const res = await fetch(`${url}${probe}`);
      await res.arrayBuffer();
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    const readyMs = Number(process.hrtime.bigint() - t0) / 1e6;
    return { proc: { pid: child.pid!, url, stop }, readyMs, cpuMs: processCpuMs(child.pid!) };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** `fountain server` on the embedded database in `dataDir`, port chosen by the system. */
export const startFountainServer = (dataDir: string, env: NodeJS.ProcessEnv) =>
  startProcess(
    [FOUNTAIN_BIN, 'server', '--port', '0', '--data-dir', dataDir, '--log-level', 'warn'],
    /listening on (http:\/\/\S+)/,
    '/health/ready',
    env,
  );

/** The environment for a server process on the embedded database, with its home under `home`. */
export function embeddedEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, FOUNTAIN_HOME: home, ...extra };
  delete env.FOUNTAIN_DATABASE_URL;
  return env;
}
