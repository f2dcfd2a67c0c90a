/**
 * Node processes for the connections benchmark with a raised open-file limit: node cannot raise
 * its own, so a shell raises it (as far as it may) and execs node, keeping the IPC channel.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * Forks `script` (TypeScript, run through tsx) with RLIMIT_NOFILE raised to `files`: the hard limit
 * too when the shell may (root), else the soft limit up to the hard one. The child reports its
 * limit back as `{ fileLimit }` first, so a shortfall is stated rather than hit as EMFILE.
 */
export function forkWithFileLimit(
  script: string,
  args: readonly string[],
  files: number,
  execArgv: readonly string[] = [],
): ChildProcess {
  const raise = `ulimit -Hn ${files} 2>/dev/null; ulimit -Sn ${files} 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"; exec "$@"`;
  return spawn('/bin/sh', ['-c', raise, 'sh', process.execPath, '--import', 'tsx', ...execArgv, script, ...args], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
}

/** This process's open-file limits, from /proc (Linux, like the rest of the benchmark's measuring). */
export function openFileLimits(): { soft: number; hard: number } {
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  const num = (v: string | undefined) =>
    v === undefined ? 0 : v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v);
  return { soft: num(m?.[1]), hard: num(m?.[2]) };
}

export const openFileLimit = (): number => openFileLimits().soft;
