/**
 * start-up: `fountain server` and `fountain up` (embedded database, warm data directory) from spawn to
 * /health/ready answering 200, against a bare `node -e` http server spawned and asked the same way.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Benchmark } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { distIsFresh } from '../../scripts/dist-stamp.mjs';
import { FOUNTAIN_BIN, REPO } from '../lib/rig.ts';
import { ratio, roundSummary, summarize } from '../lib/stats.ts';
import { verdict } from '../lib/result.ts';

const TARGET_MS = 1000;
const BARE =
  "require('http').createServer((q,r)=>r.end('ok')).listen(0,'127.0.0.1',function(){console.log('listening on http://127.0.0.1:'+this.address().port)})";

interface Variant {
  readonly argv: readonly string[];
  /** The line the process prints once it serves HTTP, with its URL in group 1. */
  readonly ready: RegExp;
  /** The path that answers 200 only when the process is ready. */
  readonly probe: string;
  readonly env?: Record<string, string>;
}

/** Spawns the variant, waits for its ready line and a 200 from its probe, stops it; ms from spawn to the 200. */
async function startOnce(v: Variant, env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, v.argv, { cwd: REPO, env: { ...env, ...v.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout });
      lines.on('line', (l) => {
        const m = v.ready.exec(l);
        if (m) resolve(m[1]!);
      });
      void exited.then((code) => reject(new Error(`${v.argv.slice(1, 3).join(' ')} exited ${code} before it was ready: ${stderr}`)));
    });
    for (;;) {
      const res = await fetch(`${url}${v.probe}`);
      await res.arrayBuffer();
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    return msSince(t0);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

export const startupBenchmark: Benchmark = {
  name: 'startup',
  title: 'fountain server / fountain up (embedded database, warm disk): spawn to /health/ready 200, vs a bare node http server',
  async run(ctx) {
    const compiled = distIsFresh();
    if (!compiled) ctx.progress('startup: dist/ is missing or older than src/ (run `npm run build`): measuring the tsx fallback');
    const rounds = ctx.quick ? 3 : 10;
    const tmp = mkdtempSync(join(tmpdir(), 'fountain-bench-startup-'));
    try {
      const env: NodeJS.ProcessEnv = { ...process.env, FOUNTAIN_HOME: join(tmp, 'home') };
      delete env.FOUNTAIN_DATABASE_URL;
      const server = (extra: Record<string, string> = {}): Variant => ({
        argv: [FOUNTAIN_BIN, 'server', '--port', '0', '--data-dir', join(tmp, 'server'), '--log-level', 'warn'],
        ready: /listening on (http:\/\/\S+)/,
        probe: '/health/ready',
        env: extra,
      });
      const up: Variant = {
        argv: [FOUNTAIN_BIN, 'up', '--port', '0', '--data-dir', join(tmp, 'up'), '--runner-root', join(tmp, 'sandboxes'), '--log-level', 'warn'],
        ready: /Fountain is up at (http:\/\/\S+)/,
        probe: '/health/ready',
      };
      const bare: Variant = { argv: ['-e', BARE], ready: /listening on (http:\/\/\S+)/, probe: '/' };
      const fromSource = server({ FOUNTAIN_FROM_SOURCE: '1' });
      // The first start of each data directory creates the database and runs every migration: not "warm".
      ctx.progress('startup: first starts (database created, migrated)');
      await startOnce(server(), env);
      await startOnce(up, env);
      const series = { bare: [] as number[], server: [] as number[], up: [] as number[], serverFromSource: [] as number[] };
      ctx.progress(`startup: ${rounds} rounds, interleaved`);
      for (let i = 0; i < rounds; i++) {
        series.bare.push(await startOnce(bare, env));
        series.server.push(await ctx.measured(() => startOnce(server(), env)));
        series.up.push(await ctx.measured(() => startOnce(up, env)));
        series.serverFromSource.push(await startOnce(fromSource, env));
      }
      const s = roundSummary(summarize(series.server));
      const u = roundSummary(summarize(series.up));
      const b = roundSummary(summarize(series.bare));
      const src = roundSummary(summarize(series.serverFromSource));
      const r = ratio(s.p50, b.p50);
      const met = s.p50 <= TARGET_MS && u.p50 <= TARGET_MS;
      return {
        setup: {
          fountain: `bin/fountain.js ${compiled ? 'running the compiled dist/' : 'running src/ through tsx (dist/ missing or stale)'}, a child process per start, --port 0, data directory created by an earlier start`,
          ready: 'the process printed its URL and GET /health/ready answered 200 (database open, every migration applied)',
        },
        figures: {
          rounds,
          compiled,
          serverMs: { ...s },
          upMs: { ...u },
          serverFromSourceMs: { ...src },
          serverP50Ms: s.p50,
          upP50Ms: u.p50,
        },
        baseline: {
          description: "`node -e` http server, spawned the same way, until GET / answers 200; interleaved with the Fountain starts",
          figures: { p50Ms: b.p50, ms: { ...b } },
        },
        ratio: { value: r, meaning: '`fountain server` p50 / bare node http server p50' },
        target: { description: `\`fountain server\` and \`fountain up\` ready within ${TARGET_MS} ms (p50, issue 21)`, met },
        notes: compiled ? [] : ['dist/ was missing or stale: these are the tsx figures; `npm run build` first'],
        summary: `startup    server ${s.p50} ms / up ${u.p50} ms to ready (from source through tsx: ${src.p50} ms) vs bare node ${b.p50} ms → ${r}x (target ≤${TARGET_MS} ms: ${verdict(met)})`,
      };
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};
