/**
 * `npm run bench [-- --quick] [--cpu-prof] [name...]`: runs the benchmarks against a real server end
 * and a real runner on loopback, prints each result as JSON plus one summary line, writes bench/results.
 */
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { parseArgs } from './lib/args.ts';
import type { Benchmark } from './lib/bench.ts';
import { msSince } from './lib/bench.ts';
import { machineEnd, machineStart, resultSchema, writeResult } from './lib/result.ts';
import { readHistory } from './lib/history.ts';
import { hrtimeUs, profileSelf, topFunctions } from './lib/profile.ts';
import type { Window } from './lib/profile.ts';
import { BENCHMARKS } from './benchmarks/index.ts';
import { startRunnerRig } from './lib/rig.ts';
import type { RunnerRig } from './lib/rig.ts';

const RESULTS = join(import.meta.dirname, 'results');

type Profiles = Record<string, ReturnType<typeof topFunctions>>;

/** Top self-time functions of each profile in `files`, counting only samples inside `windows` (all when none). */
function reduceProfiles(dir: string, files: readonly string[], windows: readonly Window[]): Profiles {
  const out: Profiles = {};
  for (const f of files)
    out[f] = topFunctions(JSON.parse(readFileSync(join(dir, f), 'utf8')), 15, windows.length ? windows : undefined);
  return out;
}

/** Profiles written since `before` whose names match (node's own `CPU.<date>.<time>.<pid>.<thread>.<n>` or ours). */
const newProfiles = (dir: string, before: ReadonlySet<string>, name: RegExp): string[] =>
  readdirSync(dir).filter((f) => !before.has(f) && name.test(f));
/** The runner's main thread (thread 0); the other is tsx's module loader. */
const RUNNER_PROFILE = /^CPU\.\d+\.\d+\.\d+\.0\.\d+\.cpuprofile$/;

/** Adds the runner child's profile, cut to each benchmark's measured stretches, to the result files already written. */
function addRunnerProfiles(
  dir: string,
  files: readonly string[],
  results: ReadonlyArray<{ path: string; windows: Window[] }>,
): void {
  for (const { path, windows } of results) {
    if (!windows.length) continue;
    const result = resultSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    const runner = Object.fromEntries(
      Object.entries(reduceProfiles(dir, files, windows)).map(([f, top]) => [`runner ${f}`, top]),
    );
    writeResult(RESULTS, { ...result, profiles: { ...result.profiles, ...runner } });
    process.stdout.write(
      `profile (runner, ${result.name}): ${Object.values(runner)
        .flat()
        .slice(0, 5)
        .map((h) => `${h.frame} ${h.percent}%`)
        .join('; ')}\n`,
    );
  }
}

async function main(): Promise<number> {
  const parsed = parseArgs(
    process.argv.slice(2),
    BENCHMARKS.map((b) => b.name),
  );
  if (!parsed.ok) {
    process.stderr.write(`bench: ${parsed.error}\n`);
    return 2;
  }
  const { quick, cpuProf, names } = parsed.args;
  const chosen: Benchmark[] = names.length ? names.map((n) => BENCHMARKS.find((b) => b.name === n)!) : [...BENCHMARKS];
  const cpuProfDir = cpuProf ? join(RESULTS, 'profiles') : null;
  if (cpuProfDir) mkdirSync(cpuProfDir, { recursive: true });
  const logger = pino({ level: 'warn' }, pino.destination(2));
  const shared: { rig: Promise<RunnerRig> | null } = { rig: null };
  // Big enough for the full stream benchmark's 1 GiB: the journal is part of the real path.
  const rig = () => (shared.rig ??= startRunnerRig({ logger, cpuProfDir, journalCapMib: 1100 }));
  const summaries: string[] = [];
  // The runner child writes its profile when it exits, after every benchmark: reduced then, per benchmark window.
  const runnerProfileWindows: Array<{ path: string; windows: Window[] }> = [];
  const profilesBefore = new Set(cpuProfDir ? readdirSync(cpuProfDir) : []);
  let failed = 0;
  const t0 = process.hrtime.bigint();
  for (const b of chosen) {
    const machine = machineStart();
    const startedAt = new Date().toISOString();
    const start = process.hrtime.bigint();
    process.stderr.write(`bench: ${b.name}: ${b.title}${quick ? ' (quick)' : ''}\n`);
    const before = new Set(cpuProfDir ? readdirSync(cpuProfDir) : []);
    const stopProfile = cpuProfDir
      ? await profileSelf(join(cpuProfDir, `bench-${b.name}-${Date.now()}.cpuprofile`))
      : null;
    const windows: Window[] = [];
    const measuredStretch = async <T>(fn: () => Promise<T>): Promise<T> => {
      const from = hrtimeUs();
      try {
        return await fn();
      } finally {
        windows.push([from, hrtimeUs()]);
      }
    };
    try {
      const measured = await b
        .run({
          quick,
          cpuProfDir,
          logger,
          rig,
          progress: (m) => process.stderr.write(`  ${m}\n`),
          measured: measuredStretch,
        })
        .finally(() => stopProfile?.());
      const path = join(RESULTS, `${b.name}.json`);
      const result = {
        name: b.name,
        title: b.title,
        quick,
        startedAt,
        durationMs: Math.round(msSince(start)),
        ...measured,
        history: readHistory(path),
        profiles: cpuProfDir
          ? reduceProfiles(cpuProfDir, newProfiles(cpuProfDir, before, /^bench-.*\.cpuprofile$/), windows)
          : undefined,
        machine: machineEnd(machine),
      };
      writeResult(RESULTS, result);
      if (cpuProfDir) runnerProfileWindows.push({ path, windows });
      process.stdout.write(`${JSON.stringify(result)}\n`);
      const load = result.machine.loadAverageEnd[0];
      const line = `${measured.summary}  [load ${load}, ${Math.round(result.durationMs / 100) / 10} s]`;
      summaries.push(line);
      process.stdout.write(`${line}\n`);
    } catch (e) {
      failed++;
      const line = `${b.name.padEnd(10)} FAILED: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`;
      summaries.push(line.split('\n')[0]!);
      process.stderr.write(`${line}\n`);
    }
  }
  if (shared.rig) await (await shared.rig.catch(() => null))?.stop();
  if (cpuProfDir)
    addRunnerProfiles(cpuProfDir, newProfiles(cpuProfDir, profilesBefore, RUNNER_PROFILE), runnerProfileWindows);
  process.stdout.write(
    `\n--- summary (${Math.round(msSince(t0) / 1000)} s, results in bench/results/) ---\n${summaries.join('\n')}\n`,
  );
  return failed > 0 ? 1 : 0;
}

process.exitCode = await main();
