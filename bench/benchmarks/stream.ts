/**
 * stream throughput: a session writing N bytes to stdout, received in full by a subscriber on the
 * server side (RunnerAdapter.spawn's owner), against a raw pipe reading the same command's bytes.
 */
import type { Benchmark } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { verdict } from '../lib/result.ts';
import { SETUP_RUNNER, SETUP_SERVER } from '../lib/rig.ts';
import { countingSink, rawPipe } from '../lib/sessions.ts';
import { mbPerSecond, ratio, round } from '../lib/stats.ts';
import { cpuMeter } from '../lib/cpu.ts';

const MiB = 1024 * 1024;

export const streamBenchmark: Benchmark = {
  name: 'stream',
  title: 'stream throughput of a session stdout through the runner to a server-side subscriber vs a raw pipe',
  async run(ctx) {
    const bytes = ctx.quick ? 64 * MiB : 1024 * MiB;
    const args = ['-c', String(bytes), '/dev/zero'];
    // The journal keeps every byte on disk too: that is part of the real path.
    const rig = await ctx.rig();
    {
      const handle = await rig.sandbox();
      ctx.progress(`stream: raw pipe, ${bytes / MiB} MiB`);
      const { bytes: pipeBytes, ms: pipeMs } = await rawPipe('head', args);
      if (pipeBytes !== bytes) throw new Error(`raw pipe read ${pipeBytes} bytes, expected ${bytes}`);

      ctx.progress(`stream: through Fountain, ${bytes / MiB} MiB`);
      const counter = countingSink();
      const meter = cpuMeter({ server: process.pid, runner: rig.runnerPid });
      const t0 = process.hrtime.bigint();
      const got = await ctx.measured(async () => {
        const cmd = await rig.adapter.processes.spawn(handle, 'head', args, { owner: counter.sink });
        if (!cmd.ok) throw new Error(`spawn failed: ${cmd.error.code} ${cmd.error.detail ?? ''}`);
        return counter.done;
      });
      const fMs = msSince(t0);
      const used = meter();
      const serverCpuMsPerMB = round(used.server! / (bytes / 1e6));
      const runnerCpuMsPerMB = round(used.runner! / (bytes / 1e6));
      if (got.bytes !== bytes || got.code !== 0)
        throw new Error(`received ${got.bytes} bytes, exit ${got.code}; expected ${bytes}, 0`);

      const fRate = mbPerSecond(bytes, fMs);
      const pRate = mbPerSecond(bytes, pipeMs);
      const share = ratio(fRate, pRate);
      const met = share >= 0.25;
      return {
        setup: { server: SETUP_SERVER, runner: SETUP_RUNNER, command: `head ${args.join(' ')}` },
        figures: {
          bytes,
          fountainMs: Math.round(fMs),
          fountainMBps: fRate,
          shareOfRawPipe: share,
          serverCpuMsPerMB,
          runnerCpuMsPerMB,
        },
        baseline: {
          description: 'the same command spawned by a node process of its own, stdout read over a raw pipe and counted',
          figures: { pipeMs: Math.round(pipeMs), pipeMBps: pRate },
        },
        ratio: { value: share, meaning: 'fountain MB/s / raw pipe MB/s (higher is better)' },
        target: { description: 'at least 25% of a raw pipe (DESIGN.md)', met },
        notes: [],
        summary: `stream     ${fRate} MB/s vs raw pipe ${pRate} MB/s → ${Math.round(share * 1000) / 10}% (${bytes / MiB} MiB; target ≥25%: ${verdict(met)}); CPU ms/MB server ${serverCpuMsPerMB} runner ${runnerCpuMsPerMB}`,
      };
    }
  },
};
