/**
 * server memory: the whole server (`startServer` on the embedded PGlite database, in its own process)
 * at idle and holding the connections benchmark's idle runners, against a bare node + ws process.
 */
import type { Benchmark } from '../lib/bench.ts';
import { ratio, round } from '../lib/stats.ts';
import { connectionSteps, series, type Sample } from './connections.ts';

const MIB = 2 ** 20;
/** Heartbeats are not what this measures; the window only checks the connections hold. */
const HEARTBEAT_MS = 20_000;
const WINDOW_MS = 1000;

const mib = (bytes: number): number => round(bytes / MIB);

export const memoryBenchmark: Benchmark = {
  name: 'memory',
  title: 'server memory (embedded PGlite) at idle and under N idle runner connections, vs a bare node + ws process',
  async run(ctx) {
    const steps = connectionSteps(ctx.quick);
    const server = await ctx.measured(() => series(ctx, 'server', steps, HEARTBEAT_MS, WINDOW_MS));
    const bare = await series(ctx, 'bare', [0], HEARTBEAT_MS, WINDOW_MS);
    const idle: Sample = server.samples[0]!;
    const loaded: Sample = server.samples.at(-1)!;
    const floor: Sample = bare.samples[0]!;
    const perConnection = round((loaded.rss - idle.rss) / Math.max(1, loaded.connections - idle.connections));
    const r = ratio(idle.rss, floor.rss);
    const held = loaded.connections;
    return {
      setup: {
        server: 'startServer (Hono on node http, embedded PGlite in a temporary data dir, runner upgrade route, engine, scheduler) in a child process (node --expose-gc); RSS read from /proc after two collections',
        clients: `${held} plain ws clients in a child process, each a runner name with the owner key, idle (answer pings only)`,
      },
      figures: {
        idleRssMiB: mib(idle.rss),
        idleHeapMiB: mib(idle.heapUsed),
        connections: held,
        rssMiBAtMax: mib(loaded.rss),
        heapMiBAtMax: mib(loaded.heapUsed),
        rssBytesPerConnection: perConnection,
        samples: Object.fromEntries(server.samples.map((s) => [String(s.connections), { rss: s.rss, heapUsed: s.heapUsed, external: s.external }])),
      },
      baseline: {
        description: 'a bare node process holding a ws WebSocketServer (no database, no routes), idle, measured the same way',
        figures: { idleRssMiB: mib(floor.rss), idleHeapMiB: mib(floor.heapUsed) },
      },
      ratio: { value: r, meaning: 'server idle RSS / bare node + ws idle RSS' },
      target: { description: 'no numeric target in DESIGN.md: reported (idle and under the connections benchmark, on the embedded database)', met: null },
      notes: ctx.quick ? [`quick mode holds ${held.toLocaleString('en')} connections; the full run goes to 10,000`] : [],
      summary: `memory     server idle ${mib(idle.rss)} MiB RSS / ${mib(idle.heapUsed)} MiB heap vs bare node ${mib(floor.rss)} MiB → ${r}x; ${held} runners: ${mib(loaded.rss)} MiB (${round(perConnection / 1024)} KiB each) (no target: reported)`,
    };
  },
};
