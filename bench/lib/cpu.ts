/**
 * CPU time of a process from /proc (user + system), so a benchmark can report CPU per megabyte:
 * a figure far steadier than wall-clock rates on a shared, loaded machine.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times; 100 on every Linux this runs on. */
const CLK_TCK = 100;

/**
 * User and system CPU milliseconds consumed so far by `pid` (its own threads, not its children), or by
 * one thread of it: `thread` = pid is the main thread, the one running the event loop.
 */
export function processCpuSplitMs(pid: number, thread?: number): { user: number; system: number } {
  const stat = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8');
  // The command name may hold spaces and parentheses; fields are counted after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: (Number(fields[11]) * 1000) / CLK_TCK, system: (Number(fields[12]) * 1000) / CLK_TCK };
}

/** User + system CPU milliseconds consumed so far by `pid`. */
export function processCpuMs(pid: number): number {
  const { user, system } = processCpuSplitMs(pid);
  return user + system;
}

/** Every process below `pid` (children, their children, …), read from /proc at the time of the call. */
export function descendantPids(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return; // gone meanwhile
    }
    for (const t of tasks) {
      let kids = '';
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const k of kids.trim().split(/\s+/).filter(Boolean).map(Number)) {
        out.push(k);
        walk(k);
      }
    }
  };
  walk(pid);
  return out;
}

/**
 * CPU used by a fixed set of processes between the call and the returned stop(); a process that has
 * exited meanwhile counts what it had used when last read (its exit is not seen, so keep them alive).
 */
export function groupCpuMeter(pids: readonly number[]): () => number {
  const read = (p: number): number => {
    try {
      return processCpuMs(p);
    } catch {
      return Number.NaN;
    }
  };
  const before = pids.map(read);
  return () =>
    pids.reduce((sum, p, i) => {
      const d = read(p) - before[i]!;
      return Number.isNaN(d) ? sum : sum + d;
    }, 0);
}

/** Resident set size of `pid` in bytes. */
export function processRssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB/m.exec(status);
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/** CPU used by processes between start() and the returned stop(): user + system, and the system part as `<label>System`. */
export function cpuMeter(pids: {
  readonly [label: string]: number | { pid: number; thread: number };
}): () => Record<string, number> {
  const read = (p: number | { pid: number; thread: number }) =>
    typeof p === 'number' ? processCpuSplitMs(p) : processCpuSplitMs(p.pid, p.thread);
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, read(pid)]));
  return () =>
    Object.fromEntries(
      Object.entries(pids).flatMap(([k, pid]) => {
        const now = read(pid);
        const user = now.user - before[k]!.user;
        const system = now.system - before[k]!.system;
        return [
          [k, user + system],
          [`${k}System`, system],
        ];
      }),
    );
}
