/**
 * connections: N idle runner connections held by the server end (runner hub + acceptRunnerSocket,
 * in its own process): memory per connection and heartbeat CPU, against a bare ws server holding N.
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import WebSocket from 'ws';
import type { Benchmark, BenchContext } from '../lib/bench.ts';
import { processCpuMs, processRssBytes } from '../lib/cpu.ts';
import { verdict } from '../lib/result.ts';
import { exited } from '../lib/rig.ts';
import { ratio, round } from '../lib/stats.ts';

const DEFAULT_HEARTBEAT_MS = 20_000;

interface Sample {
  readonly connections: number;
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
}

interface ServerProc {
  readonly child: ChildProcess;
  readonly url: string;
  measure(): Promise<Sample>;
  stop(): Promise<void>;
}

async function startServer(mode: 'fountain' | 'bare', heartbeatMs: number): Promise<ServerProc> {
  const child = fork(join(import.meta.dirname, '../lib/hub-child.ts'), [mode, String(heartbeatMs)], {
    execArgv: ['--import', 'tsx', '--expose-gc'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const next = () =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      child.once('message', (m) => resolve(m as Record<string, unknown>));
      child.once('exit', (code) => reject(new Error(`server child exited (${code})`)));
    });
  const { url } = (await next()) as { url: string };
  return {
    child,
    url,
    async measure() {
      const reply = next();
      child.send('measure');
      const m = (await reply) as unknown as Sample;
      // RSS from /proc after the collection, like any outside observer would see it.
      return { ...m, rss: processRssBytes(child.pid!) };
    },
    async stop() {
      child.send('exit');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited(child);
      clearTimeout(t);
    },
  };
}

/** Opens connections in batches; each is a plain ws client that answers pings and says nothing. */
async function openClients(url: string, from: number, to: number, sockets: WebSocket[]): Promise<void> {
  const BATCH = 200;
  for (let i = from; i < to; i += BATCH) {
    const batch: Promise<void>[] = [];
    for (let j = i; j < Math.min(to, i + BATCH); j++) {
      batch.push(
        new Promise((resolve, reject) => {
          const ws = new WebSocket(`${url}?name=idle-${j}`, { perMessageDeflate: false, headers: { authorization: 'Bearer bench' } });
          ws.once('open', () => resolve());
          ws.once('error', reject);
          ws.on('message', () => {});
          sockets.push(ws);
        }),
      );
    }
    await Promise.all(batch);
  }
}

async function closeClients(sockets: WebSocket[]): Promise<void> {
  for (const ws of sockets) ws.terminate();
  sockets.length = 0;
  await new Promise((r) => setTimeout(r, 200));
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Series {
  readonly samples: Sample[];
  /** CPU over the heartbeat window at the largest N. */
  readonly windowCpuMs: number;
}

async function series(ctx: BenchContext, mode: 'fountain' | 'bare', steps: readonly number[], heartbeatMs: number, windowMs: number): Promise<Series> {
  const server = await startServer(mode, heartbeatMs);
  const sockets: WebSocket[] = [];
  try {
    const samples: Sample[] = [];
    let open = 0;
    for (const n of steps) {
      await openClients(server.url, open, n, sockets);
      open = n;
      await until(async () => (await server.measure()).connections >= n, `${n} connections`);
      // Let the accept burst's garbage settle before measuring.
      await new Promise((r) => setTimeout(r, 500));
      const s = await server.measure();
      samples.push(s);
      ctx.progress(`connections (${mode}): ${s.connections} open, rss ${round(s.rss / 2 ** 20)} MiB, heap ${round(s.heapUsed / 2 ** 20)} MiB`);
    }
    const before = processCpuMs(server.child.pid!);
    await new Promise((r) => setTimeout(r, windowMs));
    const windowCpuMs = processCpuMs(server.child.pid!) - before;
    const after = await server.measure();
    if (after.connections < open) throw new Error(`${mode}: ${open - after.connections} idle connections were dropped during the heartbeat window`);
    return { samples, windowCpuMs };
  } finally {
    await closeClients(sockets);
    await server.stop();
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
    const steps = ctx.quick ? [0, 1000] : [0, 1000, 5000, 10_000];
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
    const coreShareAtDefault = round((usPerConnPerBeat * n) / 1000 / DEFAULT_HEARTBEAT_MS * 100);
    const held = fountain.samples.at(-1)!.connections;
    const met = held >= 10_000;
    const r = ratio(rss, bareRss);
    return {
      setup: {
        server: 'runner hub upgrade route + acceptRunnerSocket + LocalRunnerHost in a child process (node --expose-gc)',
        clients: `${n} plain ws clients in the bench process, one per runner name, idle (answer pings only)`,
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
        heartbeatCoreSharePercentAt10kDefault: round((usPerConnPerBeat * 10_000) / 1000 / DEFAULT_HEARTBEAT_MS * 100),
        heartbeatCoreSharePercentAtNDefault: coreShareAtDefault,
        samples: Object.fromEntries(fountain.samples.map((s) => [String(s.connections), { rss: s.rss, heapUsed: s.heapUsed, external: s.external }])),
      },
      baseline: {
        description: 'the same N clients held by a bare ws WebSocketServer (no runner protocol, no heartbeat) in a child process',
        figures: {
          rssBytesPerConnection: bareRss,
          heapBytesPerConnection: bareHeap,
          windowCpuMs: round(bare.windowCpuMs),
          samples: Object.fromEntries(bare.samples.map((s) => [String(s.connections), { rss: s.rss, heapUsed: s.heapUsed }])),
        },
      },
      ratio: { value: r, meaning: 'fountain RSS per connection / bare ws RSS per connection' },
      target: { description: '10,000 idle runner connections on one server node, memory per connection reported (DESIGN.md)', met: ctx.quick ? null : met },
      notes: ctx.quick ? ['quick mode holds 1,000 connections; the 10,000 target is checked by the full run'] : [],
      summary: `connections ${held} held: ${round(rss / 1024)} KiB RSS / ${round(heap / 1024)} KiB heap per connection vs bare ws ${round(bareRss / 1024)} / ${round(bareHeap / 1024)} KiB → ${r}x; heartbeat ${usPerConnPerBeat} µs/conn/beat (${coreShareAtDefault}% of a core at 20 s) (target 10k: ${ctx.quick ? 'n/a in quick' : verdict(met)})`,
    };
  },
};
