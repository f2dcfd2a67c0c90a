/**
 * CPU time of a process from /proc (user + system), so a benchmark can report CPU per megabyte:
 * a figure far steadier than wall-clock rates on a shared, loaded machine.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times; 100 on every Linux this runs on. */
const CLK_TCK = 100;

/** User + system CPU milliseconds consumed so far by `pid` (its own threads, not its children). */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces and parentheses; fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / CLK_TCK;
}

/** Resident set size of `pid` in bytes. */
export function processRssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB/m.exec(status);
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/** CPU used by two processes between start() and the returned stop(). */
export function cpuMeter(pids: { readonly [label: string]: number }): () => Record<string, number> {
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, processCpuMs(pid)]));
  return () => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, processCpuMs(pid) - before[k]!]));
}
