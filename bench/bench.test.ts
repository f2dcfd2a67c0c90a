import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from './lib/args.ts';
import { readHistory } from './lib/history.ts';
import { topFunctions } from './lib/profile.ts';
import { machineEnd, machineStart, resultSchema, writeResult } from './lib/result.ts';
import type { BenchResult } from './lib/result.ts';
import { mbPerSecond, median, percentile, ratio, round, summarize } from './lib/stats.ts';
import { BENCHMARKS } from './benchmarks/index.ts';
import { concurrencyBenchmark } from './benchmarks/concurrency.ts';
import { netcutsBenchmark } from './benchmarks/netcuts.ts';
import { startRunnerRig } from './lib/rig.ts';
import type { RunnerRig } from './lib/rig.ts';
import pino from 'pino';

const known = ['exec', 'stream', 'replay'];

test("arguments: --quick, --cpu-prof, names in order without repeats, npm's -- ignored", () => {
  assert.deepEqual(parseArgs([], known), { ok: true, args: { quick: false, cpuProf: false, names: [] } });
  assert.deepEqual(parseArgs(['--', '--quick', 'replay', 'exec', 'replay'], known), {
    ok: true,
    args: { quick: true, cpuProf: false, names: ['replay', 'exec'] },
  });
  assert.deepEqual(parseArgs(['--cpu-prof'], known), { ok: true, args: { quick: false, cpuProf: true, names: [] } });
});

test('arguments: unknown flags and names are refused with the known list', () => {
  const flag = parseArgs(['--fast'], known);
  assert.equal(flag.ok, false);
  if (!flag.ok) assert.match(flag.error, /unknown flag --fast/);
  const name = parseArgs(['exce'], known);
  assert.equal(name.ok, false);
  if (!name.ok) assert.match(name.error, /known: exec, stream, replay/);
});

test('every registered benchmark has a unique name the parser accepts', () => {
  const names = BENCHMARKS.map((b) => b.name);
  assert.equal(new Set(names).size, names.length);
  for (const n of names) assert.equal(parseArgs([n], names).ok, true, n);
});

test('percentiles are nearest-rank', () => {
  const xs = Array.from({ length: 100 }, (_, i) => 100 - i); // 100..1, unsorted on purpose
  assert.equal(percentile(xs, 50), 50);
  assert.equal(percentile(xs, 99), 99);
  assert.equal(percentile(xs, 100), 100);
  assert.equal(percentile(xs, 0), 1);
  assert.equal(percentile([7], 99), 7);
  assert.ok(Number.isNaN(percentile([], 50)));
  assert.throws(() => percentile(xs, 101), RangeError);
  assert.equal(percentile([1, 2, 3, 4], 50), 2);
});

test('summaries, medians, ratios and rates', () => {
  assert.deepEqual(summarize([3, 1, 2]), { n: 3, min: 1, p50: 2, p99: 3, max: 3, mean: 2 });
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median([5, 1, 3]), 3);
  assert.equal(ratio(6, 2), 3);
  assert.equal(ratio(1, 3), 0.333);
  assert.ok(Number.isNaN(ratio(1, 0)));
  assert.equal(mbPerSecond(100e6, 500), 200);
  assert.equal(round(123456, 3), 123000);
  assert.equal(round(0.0012345, 2), 0.0012);
});

function sample(): BenchResult {
  const m = machineStart();
  return {
    name: 'exec',
    title: 'exec round trip',
    quick: true,
    startedAt: new Date().toISOString(),
    durationMs: 12,
    setup: { server: 's', runner: 'r' },
    figures: { p50Ms: 3 },
    baseline: { description: 'spawn', figures: { p50Ms: 1 } },
    ratio: { value: 3, meaning: 'fountain / spawn' },
    target: { description: 'within 3x', met: true },
    history: [],
    notes: [],
    summary: 'exec 3x',
    machine: machineEnd(m),
  };
}

test('result files: validated shape with machine info, and history carried from the previous run', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-test-'));
  try {
    const first = sample();
    assert.equal(first.machine.loadAverageStart.length, 3);
    assert.ok(first.machine.cpus > 0 && first.machine.memoryBytes > 0 && first.machine.node.startsWith('v'));
    const path = writeResult(dir, first);
    assert.equal(path, join(dir, 'exec.json'));
    const back = resultSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    assert.deepEqual(back, first);

    const history = readHistory(path);
    assert.equal(history.length, 1);
    assert.equal(history[0]!.summary, 'exec 3x');
    assert.equal(history[0]!.ratio, 3);
    writeResult(dir, { ...sample(), summary: 'exec 2x', history });
    assert.deepEqual(
      readHistory(path).map((h) => h.summary),
      ['exec 3x', 'exec 2x'],
    );

    assert.throws(() => writeResult(dir, { ...sample(), name: 'Bad Name' }));
    writeFileSync(join(dir, 'junk.json'), 'not json');
    assert.deepEqual(readHistory(join(dir, 'junk.json')), []);
    assert.deepEqual(readHistory(join(dir, 'missing.json')), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('profiles reduce to self time per function, highest first', () => {
  const profile = {
    nodes: [
      { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1 } },
      { id: 2, callFrame: { functionName: 'hot', url: 'file:///x/a.js', lineNumber: 9 } },
      { id: 3, callFrame: { functionName: '', url: '', lineNumber: -1 } },
    ],
    samples: [2, 2, 3, 2],
    timeDeltas: [1000, 1000, 1000, 1000],
  };
  const top = topFunctions(profile);
  assert.equal(top[0]!.selfMs, 3);
  assert.equal(top[0]!.percent, 75);
  assert.match(top[0]!.frame, /^hot \(.*a\.js:10\)$/);
  assert.equal(top[1]!.frame, '(anonymous)');
  // Samples are stamped startTime + running deltas (2000, 3000, 4000, 5000 µs); the window keeps the middle two.
  const windowed = topFunctions({ ...profile, startTime: 1000 }, 12, [[3000, 4000]]);
  assert.deepEqual(
    windowed.map((h) => [h.frame.split(' ')[0], h.selfMs, h.percent]),
    [
      ['hot', 1, 50],
      ['(anonymous)', 1, 50],
    ],
  );
});

test('concurrency, quick: every conversation streams its whole stamped answer to its SSE client, latencies counted', {
  timeout: 600_000,
}, async () => {
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const shared: { rig: Promise<RunnerRig> | null } = { rig: null };
  try {
    const r = await concurrencyBenchmark.run({
      quick: true,
      cpuProfDir: null,
      logger,
      rig: () => (shared.rig ??= startRunnerRig({ logger })),
      progress: () => {},
      measured: (fn) => fn(),
    });
    const f = r.figures as Record<string, unknown>;
    assert.equal(f.conversations, 20);
    assert.equal(f.delivered, f.expected, 'every chunk of every conversation reached its SSE client');
    assert.equal((f.latencyMs as { n: number }).n, 20 * 40);
    assert.equal((r.baseline.figures.latencyMs as { n: number }).n, 20 * 40, 'and every chunk read directly');
    assert.ok(Number.isFinite(f.p99Ms) && Number.isFinite(r.baseline.figures.p99Ms));
    assert.ok(
      (f.agentsCpuMs as number) > 0 && (r.baseline.figures.agentsCpuMs as number) > 0,
      "the agents' own CPU is counted on both sides",
    );
    assert.match(r.summary, /^concurrency 20 conversations: p99 /);
  } finally {
    if (shared.rig) await (await shared.rig).stop();
  }
});

test('netcuts, quick: the runner comes back after every cut and every demo turn completes exactly once', {
  timeout: 300_000,
}, async () => {
  const r = await netcutsBenchmark.run({
    quick: true,
    cpuProfDir: null,
    logger: pino({ level: 'warn' }, pino.destination(2)),
    rig: () => Promise.reject(new Error('netcuts starts its own server and runner behind the proxy')),
    progress: () => {},
    measured: (fn) => fn(),
  });
  const f = r.figures as Record<string, unknown>;
  assert.equal(f.cuts, 8);
  assert.equal(f.problems, null, 'no turn failed, went missing, or was told twice');
  assert.equal(f.turnsCompletedOnce, true);
  assert.ok((f.turnsAccepted as number) >= 2, 'turns ran while the network was being cut');
  const back = f.reconnectMs as { n: number; max: number };
  assert.equal(back.n, 8, 'a reconnect was seen after every restore');
  assert.ok(Number.isFinite(back.max), 'the runner came back every time');
  assert.match(r.summary, /^netcuts {3}8 cuts: runner back after restore p50 /);
});
