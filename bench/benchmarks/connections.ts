/**
 * connections: N idle runner connections held by the server end (runner hub + acceptRunnerSocket,
 * in its own process): memory per connection and heartbeat CPU, against a bare ws server holding N.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Benchmark, BenchContext } from '../lib/bench.ts';
import { processCpuMs, processRssBytes } from '../lib/cpu.ts';
import { forkWithFileLimit, openFileLimits } from '../lib/limits.ts';
import { verdict } from '../lib/result.ts';
import { exited } from '../lib/rig.ts';
import { ratio, round } from '../lib/stats.ts';

const DEFAULT_HEARTBEAT_MS = 20_000;
/** Descriptors beyond the sockets themselves (node's own, the listener, pipes). */
export const SPARE_FILES = 64;
const QUICK_CONNECTIONS = 1000;

/** The connection counts measured: quick mode fits the hard limit of a stock machine (often 1024) when the shell may not raise it. */
export function connectionSteps(quick: boolean): number[] {
  const quickN = Math.min(QUICK_CONNECTIONS, Math.floor((openFileLimits().hard - SPARE_FILES) / 100) * 100);
  return quick ? [0, quickN] : [0, 1000, 5000, 10_000];
}

export interface Sample {
  readonly connections: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
}

/** A child process spoken to over IPC: each request waits for the next message. */
class Child {
  readonly proc: ChildProcess;
  constructor(proc: ChildProcess) {
    this.proc = proc;
  }
  next(): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`benchmark child exited (${code})`));
      this.proc.once('exit', onExit);
      this.proc.once('message', (m) => {
        this.proc.off('exit', onExit);
        resolve(m as Record<string, unknown>);
      });
    });
  }
  async ask(message: unknown): Promise<Record<string, unknown>> {
    const reply = this.next();
    this.proc.send(message as never);
    const r = await reply;
    if (typeof r.error === 'string') throw new Error(r.error);
    return r;
  }
  async stop(): Promise<void> {
    if (this.proc.connected) this.proc.disconnect();
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await exited(this.proc);
    clearTimeout(t);
  }
}

/** Starts a child with `files` descriptors allowed; refuses clearly when the limit could not be raised that far. */
async function startChild(
  script: string,
  args: readonly string[],
  files: number,
  execArgv: readonly string[] = [],
): Promise<{ child: Child; hello: Record<string, unknown> }> {
  const child = new Child(forkWithFileLimit(join(import.meta.dirname, '../lib', script), args, files, execArgv));
  const hello = await child.next();
  const limit = Number(hello.fileLimit);
  if (!(limit >= files)) {
    await child.stop();
    throw new Error(
      `${script}: the open-file limit is ${limit}, ${files} are needed; raise the hard limit (ulimit -Hn, as root) and run again`,
    );
  }
  return { child, hello };
}

interface ServerProc {
  readonly child: Child;
  readonly pid: number;
  readonly url: string;
  /** The key runners present (the whole server checks it; the hubs take any). */
  readonly key: string | undefined;
  measure(): Promise<Sample>;
}

export type ServerMode = 'fountain' | 'server' | 'bare';

async function startServer(mode: ServerMode, heartbeatMs: number, files: number): Promise<ServerProc> {
  const { child, hello } = await startChild('hub-child.ts', [mode, String(heartbeatMs)], files, ['--expose-gc']);
  const pid = child.proc.pid!;
  return {
    child,
    pid,
    url: String(hello.url),
    key: typeof hello.key === 'string' ? hello.key : undefined,
    async measure() {
      const m = (await child.ask('measure')) as unknown as Sample;
      // RSS from /proc after the collection, like any outside observer would see it.
      return { ...m, rss: processRssBytes(pid) };
    },
  };
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface Series {
  readonly samples: Sample[];
  /** CPU over the heartbeat window at the largest N. */
  readonly windowCpuMs: number;
}

export async function series(
  ctx: BenchContext,
  mode: ServerMode,
  steps: readonly number[],
  heartbeatMs: number,
  windowMs: number,
): Promise<Series> {
  const files = steps.at(-1)! + SPARE_FILES;
  const server = await startServer(mode, heartbeatMs, files);
  let clients: Child | null = null;
  try {
    clients = (await startChild('idle-clients.ts', [], files)).child;
    const samples: Sample[] = [];
    let open = 0;
    for (const n of steps) {
      await clients.ask({ open: { url: server.url, key: server.key, from: open, to: n } });
      open = n;
      await until(async () => (await server.measure()).connections >= n, `${n} connections`);
      // Let the accept burst's garbage settle before measuring.
      await new Promise((r) => setTimeout(r, 500));
      const s = await server.measure();
      samples.push(s);
      ctx.progress(
        `connections (${mode}): ${s.connections} open, rss ${round(s.rss / 2 ** 20)} MiB, heap ${round(s.heapUsed / 2 ** 20)} MiB`,
      );
    }
    const before = processCpuMs(server.pid);
    await new Promise((r) => setTimeout(r, windowMs));
    const windowCpuMs = processCpuMs(server.pid) - before;
    const after = await server.measure();
    if (after.connections < open)
      throw new Error(`${mode}: ${open - after.connections} idle connections were dropped during the heartbeat window`);
    return { samples, windowCpuMs };
  } finally {
    if (clients) {
      await clients.ask({ close: true }).catch(() => undefined);
      await clients.stop();
    }
    await server.child.stop();
  }
}

const perConnection = (s: readonly Sample[], key: 'rss' | 'heapUsed' | 'external'): number => {
  const first = s[0]!;
  const last = s.at(-1)!;
  return round((last[key] - first[key]) / Math.max(1, last.connections - first.connections));
};

export const connectionsBenchmark: Benchmark = {
  name: 'connections',
  title: 'N idle runner connections on one server: memory per connection and heartbeat CPU, vs a bare ws server',
  async run(ctx) {
    const steps = connectionSteps(ctx.quick);
    const n = steps.at(-1)!;
    // Quick mode beats every second so the window sees several heartbeats; the figure is per beat.
    const heartbeatMs = ctx.quick ? 1000 : DEFAULT_HEARTBEAT_MS;
    const windowMs = ctx.quick ? 3000 : 2 * DEFAULT_HEARTBEAT_MS;
    const fountain = await series(ctx, 'fountain', steps, heartbeatMs, windowMs);
    const bare = await series(ctx, 'bare', steps, heartbeatMs, windowMs);

    const rss = perConnection(fountain.samples, 'rss');
    const heap = perConnection(fountain.samples, 'heapUsed');
    const bareRss = perConnection(bare.samples, 'rss');
    const bareHeap = perConnection(bare.samples, 'heapUsed');
    const beats = windowMs / heartbeatMs;
    const heartbeatCpuMs = Math.max(0, fountain.windowCpuMs - bare.windowCpuMs);
    const usPerConnPerBeat = round((heartbeatCpuMs * 1000) / beats / n);
    const coreShareAtDefault = round(((usPerConnPerBeat * n) / 1000 / DEFAULT_HEARTBEAT_MS) * 100);
    const held = fountain.samples.at(-1)!.connections;
    const met = held >= 10_000;
    const r = ratio(rss, bareRss);
    return {
      setup: {
        server: 'runner hub upgrade route + acceptRunnerSocket + LocalRunnerHost in a child process (node --expose-gc)',
        clients: `${n} plain ws clients in a child process, one per runner name, idle (answer pings only)`,
        heartbeat: `${heartbeatMs} ms${ctx.quick ? ' (quick: shortened so the window holds several beats)' : ' (the default)'}`,
      },
      figures: {
        connections: held,
        rssBytesPerConnection: rss,
        heapBytesPerConnection: heap,
        externalBytesPerConnection: perConnection(fountain.samples, 'external'),
        idleRssBytes: fountain.samples[0]!.rss,
        rssBytesAtMax: fountain.samples.at(-1)!.rss,
        heartbeatWindowMs: windowMs,
        heartbeatCpuMs: round(heartbeatCpuMs),
        heartbeatUsPerConnectionPerBeat: usPerConnPerBeat,
        heartbeatCoreSharePercentAt10kDefault: round(((usPerConnPerBeat * 10_000) / 1000 / DEFAULT_HEARTBEAT_MS) * 100),
        heartbeatCoreSharePercentAtNDefault: coreShareAtDefault,
        samples: Object.fromEntries(
          fountain.samples.map((s) => [
            String(s.connections),
            { rss: s.rss, heapUsed: s.heapUsed, external: s.external },
          ]),
        ),
      },
      baseline: {
        description:
          'the same N clients held by a bare ws WebSocketServer (no runner protocol, no heartbeat) in a child process',
        figures: {
          rssBytesPerConnection: bareRss,
          heapBytesPerConnection: bareHeap,
          windowCpuMs: round(bare.windowCpuMs),
          samples: Object.fromEntries(
            bare.samples.map((s) => [String(s.connections), { rss: s.rss, heapUsed: s.heapUsed }]),
          ),
        },
      },
      ratio: { value: r, meaning: 'fountain RSS per connection / bare ws RSS per connection' },
      target: {
        description: '10,000 idle runner connections on one server node, memory per connection reported (DESIGN.md)',
        met: ctx.quick ? null : met,
      },
      notes: ctx.quick
        ? [`quick mode holds ${n.toLocaleString('en')} connections; the 10,000 target is checked by the full run`]
        : [],
      summary: `connections ${held} held: ${round(rss / 1024)} KiB RSS / ${round(heap / 1024)} KiB heap per connection vs bare ws ${round(bareRss / 1024)} / ${round(bareHeap / 1024)} KiB → ${r}x; heartbeat ${usPerConnPerBeat} µs/conn/beat (${coreShareAtDefault}% of a core at 20 s) (target 10k: ${ctx.quick ? 'n/a in quick' : verdict(met)})`,
    };
  },
};
