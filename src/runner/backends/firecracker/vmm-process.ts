/**
 * A VMM child process: its own process group, output appended to a log file, reaped, and stopped
 * with SIGTERM then SIGKILL. A VMM never unlinks its sockets, so stale paths are removed first.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';

export interface VmmProcess {
  readonly child: ChildProcess;
  readonly alive: () => boolean;
  readonly exited: Promise<void>;
  stop(graceMs: number): Promise<void>;
}

export async function removeStale(paths: readonly string[]): Promise<void> {
  await Promise.all(paths.map((p) => rm(p, { force: true })));
}

/** The last `lines` lines of a log file (at most its last 64 KiB), or '' when it cannot be read. */
export async function logTail(path: string, lines: number): Promise<string> {
  try {
    const f = await open(path, 'r');
    try {
      const { size } = await f.stat();
      const length = Math.min(size, 64 * 1024);
      const buf = Buffer.alloc(length);
      await f.read(buf, 0, length, size - length);
      return buf.toString('utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } finally {
      await f.close();
    }
  } catch {
    return '';
  }
}

export async function startVmm(bin: string, args: readonly string[], logFile: string): Promise<VmmProcess | Error> {
  let fd: number;
  try {
    fd = openSync(logFile, 'a', 0o600);
  } catch (e) {
    return e instanceof Error ? e : new Error(String(e));
  }
  let child: ChildProcess;
  try {
    child = spawn(bin, args, { detached: true, stdio: ['ignore', fd, fd] });
  } catch (e) {
    closeSync(fd);
    return e instanceof Error ? e : new Error(String(e));
  }
  // The child holds its own copy of the descriptor.
  closeSync(fd);
  const started = await new Promise<Error | null>((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', (e) => resolve(e));
  });
  if (started !== null) return new Error(`cannot start ${bin}: ${started.message}`);
  let alive = true;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      alive = false;
      resolve();
    });
    child.once('error', () => {
      alive = false;
      resolve();
    });
  });
  const signal = (sig: NodeJS.Signals) => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, sig);
    } catch {
      // already gone
    }
  };
  const stop = async (graceMs: number) => {
    if (!alive) return;
    signal('SIGTERM');
    const timer = new Promise<'late'>((r) => setTimeout(() => r('late'), graceMs).unref());
    if ((await Promise.race([exited.then(() => 'done' as const), timer])) === 'late') {
      signal('SIGKILL');
      await exited;
    }
  };
  return { child, alive: () => alive, exited, stop };
}
