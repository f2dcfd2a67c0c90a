/**
 * server memory: the whole server (`startServer` on the embedded PGlite database, in its own process)
 * at idle and holding the connections benchmark's idle runners, against a bare node + ws process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Benchmark, BenchContext } from '../lib/bench.ts';
import { processRssBytes } from '../lib/cpu.ts';
import { seedIdleConversations } from '../lib/seed.ts';
import { embeddedEnv, startFountainServer } from '../lib/server-process.ts';
import { ratio, round } from '../lib/stats.ts';
import { verdict } from '../lib/result.ts';
import { distIsFresh } from '../../bin/dist-stamp.mjs';
import { connectionSteps, series, type Sample } from './connections.ts';

const MIB = 2 ** 20;
/** Heartbeats are not what this measures; the window only checks the connections hold. */
const HEARTBEAT_MS = 20_000;
const WINDOW_MS = 1000;

const mib = (bytes: number): number => round(bytes / MIB);
/** How long a started server is left alone before its RSS is read. */
const SETTLE_MS = 3000;
const IDLE_CONVERSATIONS = 1000;
const TARGET_MIB = 256;

/** RSS of `fountain server` (bin/fountain.js, as shipped) after it settled, on a warm data directory. */
async function shippedRss(dataDir: string, env: NodeJS.ProcessEnv): Promise<number> {
  const { proc } = await startFountainServer(dataDir, env);
  try {
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    return processRssBytes(proc.pid);
  } finally {
    await proc.stop();
  }
}

/** The shipped server's idle RSS: empty, from the TypeScript sources, and with 1,000 idle conversations stored. */
async function shipped(
  ctx: BenchContext,
): Promise<{ emptyMiB: number; fromSourceMiB: number; conversationsMiB: number }> {
  const tmp = mkdtempSync(join(tmpdir(), 'fountain-bench-memory-'));
  try {
    const dataDir = join(tmp, 'server');
    const env = embeddedEnv(join(tmp, 'home'));
    // The first start creates the database (initdb runs in the same process): not what a server usually is.
    await (await startFountainServer(dataDir, env)).proc.stop();
    const emptyMiB = mib(await ctx.measured(() => shippedRss(dataDir, env)));
    const fromSourceMiB = mib(await shippedRss(dataDir, { ...env, FOUNTAIN_FROM_SOURCE: '1' }));
    ctx.progress(
      `memory: fountain server idle ${emptyMiB} MiB (from source ${fromSourceMiB} MiB); storing ${IDLE_CONVERSATIONS} idle conversations`,
    );
    await seedIdleConversations(dataDir, IDLE_CONVERSATIONS);
    const conversationsMiB = mib(await ctx.measured(() => shippedRss(dataDir, env)));
    return { emptyMiB, fromSourceMiB, conversationsMiB };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

export const memoryBenchmark: Benchmark = {
  name: 'memory',
  title: 'server memory (embedded PGlite) at idle and under N idle runner connections, vs a bare node + ws process',
  async run(ctx) {
    const steps = connectionSteps(ctx.quick);
    const compiled = distIsFresh();
    const proc = await shipped(ctx);
    const server = await ctx.measured(() => series(ctx, 'server', steps, HEARTBEAT_MS, WINDOW_MS));
    const bare = await series(ctx, 'bare', [0], HEARTBEAT_MS, WINDOW_MS);
    const idle: Sample = server.samples[0]!;
    const loaded: Sample = server.samples.at(-1)!;
    const floor: Sample = bare.samples[0]!;
    const perConnection = round((loaded.rss - idle.rss) / Math.max(1, loaded.connections - idle.connections));
    const r = ratio(idle.rss, floor.rss);
    const held = loaded.connections;
    const met = proc.emptyMiB <= TARGET_MIB && proc.conversationsMiB <= TARGET_MIB;
    return {
      setup: {
        shipped: `\`fountain server\` (bin/fountain.js ${compiled ? 'running the compiled dist/' : 'through tsx: dist/ missing or stale'}) on a warm embedded database, left alone ${SETTLE_MS} ms; RSS read from /proc`,
        server:
          'startServer (Hono on node http, embedded PGlite in a temporary data dir, runner upgrade route, engine, scheduler) in a child process (node --expose-gc, through tsx); RSS read from /proc after two collections',
        clients: `${held} plain ws clients in a child process, each a runner name with the owner key, idle (answer pings only)`,
      },
      figures: {
        shippedIdleRssMiB: proc.emptyMiB,
        shippedFromSourceIdleRssMiB: proc.fromSourceMiB,
        [`shippedIdleRssMiBWith${IDLE_CONVERSATIONS}Conversations`]: proc.conversationsMiB,
        compiled,
        idleRssMiB: mib(idle.rss),
        idleHeapMiB: mib(idle.heapUsed),
        connections: held,
        rssMiBAtMax: mib(loaded.rss),
        heapMiBAtMax: mib(loaded.heapUsed),
        rssBytesPerConnection: perConnection,
        samples: Object.fromEntries(
          server.samples.map((s) => [
            String(s.connections),
            { rss: s.rss, heapUsed: s.heapUsed, external: s.external },
          ]),
        ),
      },
      baseline: {
        description:
          'a bare node process holding a ws WebSocketServer (no database, no routes), idle, measured the same way',
        figures: { idleRssMiB: mib(floor.rss), idleHeapMiB: mib(floor.heapUsed) },
      },
      ratio: { value: r, meaning: 'server idle RSS (startServer in a tsx child) / bare node + ws idle RSS' },
      target: {
        description: `\`fountain server\` idle on the embedded database at most ${TARGET_MIB} MiB RSS, also with ${IDLE_CONVERSATIONS.toLocaleString('en')} idle conversations stored (DESIGN.md)`,
        met,
      },
      notes: ctx.quick
        ? [`quick mode holds ${held.toLocaleString('en')} connections; the full run goes to 10,000`]
        : [],
      summary: `memory     fountain server idle ${proc.emptyMiB} MiB RSS, ${proc.conversationsMiB} MiB with ${IDLE_CONVERSATIONS} idle conversations (from source: ${proc.fromSourceMiB} MiB; target ≤${TARGET_MIB}: ${verdict(met)}); startServer idle ${mib(idle.rss)} MiB RSS / ${mib(idle.heapUsed)} MiB heap vs bare node ${mib(floor.rss)} MiB → ${r}x; ${held} runners: ${mib(loaded.rss)} MiB (${round(perConnection / 1024)} KiB each)`,
    };
  },
};
