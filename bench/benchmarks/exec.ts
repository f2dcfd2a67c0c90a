/**
 * exec round trip: `exec true` through RunnerAdapter → runner socket → process backend → back,
 * interleaved with child_process.spawn of the same command in this process. Target: p50 within 3x.
 */
import { spawn } from 'node:child_process';
import type { Benchmark } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { SETUP_RUNNER, SETUP_SERVER } from '../lib/rig.ts';
import { ratio, round, roundSummary, summarize } from '../lib/stats.ts';
import { verdict } from '../lib/result.ts';

const CMD = 'true';

/** The floor: what the process backend itself does for an exec, minus the wire. */
function spawnOnce(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(CMD, [], { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
    child.stdout.resume();
    child.once('error', reject);
    child.once('close', () => resolve());
  });
}

export const execBenchmark: Benchmark = {
  name: 'exec',
  title: 'exec round trip (server → runner socket → process backend → back) vs child_process.spawn',
  async run(ctx) {
    const runs = ctx.quick ? 30 : 500;
    // A floor taken before this process holds the server (its size slows its own forks), when it goes first.
    const early: number[] = [];
    for (let i = 0; i < runs / 2; i++) {
      const t0 = process.hrtime.bigint();
      await spawnOnce();
      early.push(msSince(t0));
    }
    const rig = await ctx.rig();
    {
      const handle = await rig.sandbox();
      const fountain: number[] = [];
      const direct: number[] = [];
      const once = async () => {
        const t0 = process.hrtime.bigint();
        const r = await rig.adapter.processes.exec(handle, CMD, []);
        const ms = msSince(t0);
        if (!r.ok) throw new Error(`exec failed: ${r.error.code} ${r.error.detail ?? ''}`);
        if (r.value.exitCode !== 0) throw new Error(`exec exited ${r.value.exitCode}`);
        return ms;
      };
      const direct1 = async () => {
        const t0 = process.hrtime.bigint();
        await spawnOnce();
        return msSince(t0);
      };
      for (let i = 0; i < (ctx.quick ? 3 : 10); i++) {
        await once();
        await direct1();
      }
      ctx.progress(`exec: ${runs} runs each, interleaved`);
      // Interleaved, so the machine's load drifts over both series alike.
      for (let i = 0; i < runs; i++) {
        fountain.push(await ctx.measured(once));
        direct.push(await direct1());
      }
      const f = roundSummary(summarize(fountain));
      const inter = roundSummary(summarize(direct));
      const pre = roundSummary(summarize(early));
      // The stricter floor of the two is the headline.
      const d = pre.p50 < inter.p50 ? pre : inter;
      const r50 = ratio(f.p50, d.p50);
      const r99 = ratio(f.p99, d.p99);
      const met = r50 <= 3;
      return {
        setup: { server: SETUP_SERVER, runner: SETUP_RUNNER, command: `${CMD} (no args)` },
        figures: {
          runs,
          fountainMs: { ...f },
          p50Ms: f.p50,
          p99Ms: f.p99,
          ratioP50: r50,
          ratioP99: r99,
          overheadP50Ms: round(f.p50 - d.p50),
        },
        baseline: {
          description: `child_process.spawn('${CMD}') with piped stdout in the bench process: interleaved with the Fountain runs, and before the server started; the lower p50 of the two is the floor`,
          figures: { p50Ms: d.p50, p99Ms: d.p99, interleavedMs: { ...inter }, beforeServerMs: { ...pre } },
        },
        ratio: { value: r50, meaning: 'fountain p50 / spawn p50 (lower is better)' },
        target: { description: 'p50 within 3x of child_process.spawn (DESIGN.md)', met },
        notes: [],
        summary: `exec       p50 ${f.p50} ms / p99 ${f.p99} ms vs spawn ${d.p50} / ${d.p99} ms → ${r50}x / ${r99}x (target ≤3x: ${verdict(met)})`,
      };
    }
  },
};
