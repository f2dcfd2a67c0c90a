/**
 * lifecycle: create, suspend, resume and destroy of a process-backend sandbox through the runner
 * adapter, against the filesystem work that backend does for each, done directly in this process.
 */
import { mkdir, mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Benchmark } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { verdict } from '../lib/result.ts';
import { SETUP_RUNNER, SETUP_SERVER } from '../lib/rig.ts';
import { ratio, roundSummary, summarize, type Summary } from '../lib/stats.ts';
import { mintRunnerName } from '../../src/sandbox/index.ts';
import type { Handle } from '../../src/sandbox/index.ts';
import { SUSPENDED_MARKER } from '../../src/runner/backends/process/index.ts';

const OPS = ['create', 'suspend', 'resume', 'destroy'] as const;
type Op = (typeof OPS)[number];

async function timed(fn: () => Promise<void>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return msSince(t0);
}

const must = <T>(
  r: { ok: true; value: T } | { ok: false; error: { code: string; detail?: string } },
  what: string,
): T => {
  if (!r.ok) throw new Error(`${what} failed: ${r.error.code} ${r.error.detail ?? ''}`);
  return r.value;
};

export const lifecycleBenchmark: Benchmark = {
  name: 'lifecycle',
  title: 'sandbox create, suspend, resume, destroy on the process backend vs the same filesystem work done directly',
  async run(ctx) {
    const rounds = ctx.quick ? 20 : 200;
    const rig = await ctx.rig();
    const floorDir = await mkdtemp(join(tmpdir(), 'fountain-bench-lifecycle-'));
    const fountain: Record<Op, number[]> = { create: [], suspend: [], resume: [], destroy: [] };
    const direct: Record<Op, number[]> = { create: [], suspend: [], resume: [], destroy: [] };
    try {
      ctx.progress(
        `lifecycle: ${rounds} rounds of create, suspend, resume, destroy, interleaved with the direct floor`,
      );
      for (let i = 0; i < rounds; i++) {
        const minted = mintRunnerName(rig.runnerId);
        if (!minted.ok) throw new Error(`minting a name: ${String(minted.error)}`);
        const name = minted.value;
        let handle: Handle | null = null;
        await ctx.measured(async () => {
          fountain.create.push(
            await timed(async () => void (handle = must(await rig.adapter.lifecycle.create(name), 'create'))),
          );
          const h = handle!;
          fountain.suspend.push(await timed(async () => void must(await rig.adapter.lifecycle.suspend(h), 'suspend')));
          fountain.resume.push(
            await timed(async () => void (handle = must(await rig.adapter.lifecycle.resume(h), 'resume'))),
          );
          fountain.destroy.push(
            await timed(async () => void must(await rig.adapter.lifecycle.destroy(handle!), 'destroy')),
          );
        });
        // What the process backend does for each: a 0700 directory, a marker file in and out, the tree gone.
        const dir = join(floorDir, `s${i}`);
        const marker = join(dir, SUSPENDED_MARKER);
        direct.create.push(await timed(() => mkdir(dir, { mode: 0o700 }).then(() => undefined)));
        direct.suspend.push(await timed(() => writeFile(marker, '', { mode: 0o600 })));
        direct.resume.push(await timed(() => unlink(marker)));
        direct.destroy.push(await timed(() => rm(dir, { recursive: true, force: true })));
      }
    } finally {
      await rm(floorDir, { recursive: true, force: true });
    }
    const f = Object.fromEntries(OPS.map((op) => [op, roundSummary(summarize(fountain[op]))])) as Record<Op, Summary>;
    const d = Object.fromEntries(OPS.map((op) => [op, roundSummary(summarize(direct[op]))])) as Record<Op, Summary>;
    const ratios = Object.fromEntries(OPS.map((op) => [op, ratio(f[op].p50, d[op].p50)])) as Record<Op, number>;
    const total = (s: Record<Op, Summary>) => OPS.reduce((a, op) => a + s[op].p50, 0);
    const r = ratio(total(f), total(d));
    return {
      setup: { server: SETUP_SERVER, runner: SETUP_RUNNER, rounds: `${rounds} of each step` },
      figures: {
        p50Ms: Object.fromEntries(OPS.map((op) => [op, f[op].p50])),
        p99Ms: Object.fromEntries(OPS.map((op) => [op, f[op].p99])),
        ratioP50: ratios,
        fountainMs: f,
      },
      baseline: {
        description:
          "the process backend's filesystem work for each step (mkdir 0700; write, then unlink, the suspended marker; rm -r) done with fs/promises in the bench process, interleaved",
        figures: { p50Ms: Object.fromEntries(OPS.map((op) => [op, d[op].p50])), directMs: d },
      },
      ratio: { value: r, meaning: 'sum of the four p50s through Fountain / sum of the direct p50s (lower is better)' },
      target: {
        description: 'no numeric target in DESIGN.md (cold start to first answer is in the turn benchmark)',
        met: null,
      },
      notes: [],
      summary: `lifecycle  p50 create ${f.create.p50} / suspend ${f.suspend.p50} / resume ${f.resume.p50} / destroy ${f.destroy.p50} ms vs direct ${d.create.p50} / ${d.suspend.p50} / ${d.resume.p50} / ${d.destroy.p50} ms → ${r}x overall (no target: ${verdict(null)})`,
    };
  },
};
