/**
 * start-up: `fountain server` and `fountain up` (embedded database, warm data directory) from spawn to
 * /health/ready answering 200, and a first `fountain up` on a new machine (a fresh HOME: no data, no
 * cache) to its sign-in link, against a bare `node -e` http server spawned and asked the same way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Benchmark } from '../lib/bench.ts';
import { distIsFresh } from '../../bin/dist-stamp.mjs';
import { FOUNTAIN_BIN } from '../lib/rig.ts';
import { embeddedEnv, startFountainServer, startProcess } from '../lib/server-process.ts';
import { ratio, roundSummary, summarize } from '../lib/stats.ts';
import { verdict } from '../lib/result.ts';

const TARGET_MS = 1000;
/** A first `fountain up` on a new machine, to the sign-in link. */
const FIRST_UP_TARGET_MS = 1500;
const BARE =
  "require('http').createServer((q,r)=>r.end('ok')).listen(0,'127.0.0.1',function(){console.log('listening on http://127.0.0.1:'+this.address().port)})";

interface Start {
  readonly ms: number;
  readonly cpuMs: number;
}

/** Starts, waits until ready, stops; the milliseconds to ready and the CPU spent by then. */
async function once(
  start: () => Promise<{ proc: { stop(): Promise<void> }; readyMs: number; cpuMs: number }>,
): Promise<Start> {
  const { proc, readyMs, cpuMs } = await start();
  await proc.stop();
  return { ms: readyMs, cpuMs };
}

const wall = (xs: readonly Start[]) => roundSummary(summarize(xs.map((x) => x.ms)));
const cpu = (xs: readonly Start[]) => roundSummary(summarize(xs.map((x) => x.cpuMs)));

export const startupBenchmark: Benchmark = {
  name: 'startup',
  title:
    'fountain server / fountain up (embedded database, warm disk): spawn to /health/ready 200, vs a bare node http server',
  async run(ctx) {
    const compiled = distIsFresh();
    if (!compiled)
      ctx.progress('startup: dist/ is missing or older than src/ (run `npm run build`): measuring the tsx fallback');
    const rounds = ctx.quick ? 3 : 10;
    const tmp = mkdtempSync(join(tmpdir(), 'fountain-bench-startup-'));
    try {
      const env = embeddedEnv(join(tmp, 'home'));
      const server = () => startFountainServer(join(tmp, 'server'), env);
      const fromSource = () => startFountainServer(join(tmp, 'server'), { ...env, FOUNTAIN_FROM_SOURCE: '1' });
      const upArgv = [
        FOUNTAIN_BIN,
        'up',
        '--port',
        '0',
        '--data-dir',
        join(tmp, 'up'),
        '--runner-root',
        join(tmp, 'sandboxes'),
        '--log-level',
        'warn',
      ];
      const up = () => startProcess(upArgv, /Fountain is up at (http:\/\/\S+)/, '/health/ready', env);
      const bare = () => startProcess(['-e', BARE], /listening on (http:\/\/\S+)/, '/', env);
      // A new machine: a HOME of its own with no data directory and no cache, so nothing but what
      // `npm install` left in the package (the compiled dist/, the database template) is warm.
      let fresh = 0;
      const firstUp = () => {
        const home = join(tmp, `new-machine-${fresh++}`);
        const freshEnv = embeddedEnv(join(home, '.fountain'), { HOME: home });
        delete freshEnv.XDG_CACHE_HOME;
        delete freshEnv.FOUNTAIN_PGLITE_TEMPLATE_DIR;
        return startProcess(
          [FOUNTAIN_BIN, 'up', '--port', '0', '--log-level', 'warn'],
          /(http:\/\/[^\s/]+)\/signin\/link/,
          '/health/ready',
          freshEnv,
        );
      };
      // The first start of each data directory creates the database and runs every migration: not "warm".
      ctx.progress('startup: first starts (database created, migrated)');
      await once(server);
      await once(up);
      const series = {
        bare: [] as Start[],
        server: [] as Start[],
        up: [] as Start[],
        serverFromSource: [] as Start[],
        firstUp: [] as Start[],
      };
      ctx.progress(`startup: ${rounds} rounds, interleaved`);
      for (let i = 0; i < rounds; i++) {
        series.bare.push(await once(bare));
        series.server.push(await ctx.measured(() => once(server)));
        series.up.push(await ctx.measured(() => once(up)));
        series.serverFromSource.push(await once(fromSource));
        series.firstUp.push(await ctx.measured(() => once(firstUp)));
      }
      const f = wall(series.firstUp);
      const firstMet = f.p50 <= FIRST_UP_TARGET_MS;
      const s = wall(series.server);
      const u = wall(series.up);
      const b = wall(series.bare);
      const src = wall(series.serverFromSource);
      const sCpu = cpu(series.server);
      const srcCpu = cpu(series.serverFromSource);
      const r = ratio(s.p50, b.p50);
      const met = s.p50 <= TARGET_MS && u.p50 <= TARGET_MS && firstMet;
      return {
        setup: {
          fountain: `bin/fountain.js ${compiled ? 'running the compiled dist/' : 'running src/ through tsx (dist/ missing or stale)'}, a child process per start, --port 0, data directory created by an earlier start`,
          ready:
            '`server`: it printed its URL and GET /health/ready answered 200 (database open, every migration applied); `up`: it printed "Fountain is up" (runner started, demo agent checked, sign-in link minted) and /health/ready answered 200',
        },
        figures: {
          rounds,
          compiled,
          serverMs: { ...s },
          upMs: { ...u },
          serverFromSourceMs: { ...src },
          serverP50Ms: s.p50,
          upP50Ms: u.p50,
          serverCpuMs: { ...sCpu },
          upCpuMs: { ...cpu(series.up) },
          serverFromSourceCpuMs: { ...srcCpu },
          firstUpOnNewMachineMs: { ...f },
          firstUpOnNewMachineP50Ms: f.p50,
          firstUpOnNewMachineCpuMs: { ...cpu(series.firstUp) },
        },
        baseline: {
          description:
            '`node -e` http server, spawned the same way, until GET / answers 200; interleaved with the Fountain starts',
          figures: { p50Ms: b.p50, ms: { ...b }, cpuMs: { ...cpu(series.bare) } },
        },
        ratio: { value: r, meaning: '`fountain server` p50 / bare node http server p50' },
        target: {
          description: `\`fountain server\` and \`fountain up\` ready within ${TARGET_MS} ms (p50, warm data directory); a first \`fountain up\` in a fresh HOME to its sign-in link within ${FIRST_UP_TARGET_MS} ms (p50)`,
          met,
        },
        notes: compiled ? [] : ['dist/ was missing or stale: these are the tsx figures; `npm run build` first'],
        summary: `startup    server ${s.p50} ms / up ${u.p50} ms to ready, first up on a new machine ${f.p50} ms to the sign-in link (target ≤${FIRST_UP_TARGET_MS} ms: ${verdict(firstMet)}) (from source through tsx: ${src.p50} ms); CPU to ready ${sCpu.p50} ms (from source ${srcCpu.p50} ms) vs bare node ${b.p50} ms → ${r}x (target ≤${TARGET_MS} ms: ${verdict(met)})`,
      };
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};
