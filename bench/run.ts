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
import { machineEnd, machineStart, writeResult } from './lib/result.ts';
import { readHistory } from './lib/history.ts';
import { profileSelf, topFunctions } from './lib/profile.ts';
import { BENCHMARKS } from './benchmarks/index.ts';
import { startRunnerRig } from './lib/rig.ts';
import type { RunnerRig } from './lib/rig.ts';

const RESULTS = join(import.meta.dirname, 'results');

/** Top self-time functions of every profile written during one benchmark (this process and the runner). */
async function collectProfiles(dir: string | null, before: Set<string>, stop: (() => Promise<unknown>) | null) {
  if (!dir || !stop) return undefined;
  await stop();
  const out: Record<string, ReturnType<typeof topFunctions>> = {};
  for (const f of readdirSync(dir)) {
    if (before.has(f) || !f.endsWith('.cpuprofile')) continue;
    out[f] = topFunctions(JSON.parse(readFileSync(join(dir, f), 'utf8')), 15);
  }
  return out;
}

async function main(): Promise<number> {
  const parsed = parseArgs(process.argv.slice(2), BENCHMARKS.map((b) => b.name));
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
  let failed = 0;
  const t0 = process.hrtime.bigint();
  for (const b of chosen) {
    const machine = machineStart();
    const startedAt = new Date().toISOString();
    const start = process.hrtime.bigint();
    process.stderr.write(`bench: ${b.name}: ${b.title}${quick ? ' (quick)' : ''}\n`);
    const before = new Set(cpuProfDir ? readdirSync(cpuProfDir) : []);
    const stopProfile = cpuProfDir ? await profileSelf(join(cpuProfDir, `bench-${b.name}-${Date.now()}.cpuprofile`)) : null;
    try {
      const measured = await b.run({ quick, cpuProfDir, logger, rig, progress: (m) => process.stderr.write(`  ${m}\n`) });
      const path = join(RESULTS, `${b.name}.json`);
      const result = {
        name: b.name,
        title: b.title,
        quick,
        startedAt,
        durationMs: Math.round(msSince(start)),
        ...measured,
        history: readHistory(path),
        profiles: await collectProfiles(cpuProfDir, before, stopProfile),
        machine: machineEnd(machine),
      };
      writeResult(RESULTS, result);
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
  process.stdout.write(`\n--- summary (${Math.round(msSince(t0) / 1000)} s, results in bench/results/) ---\n${summaries.join('\n')}\n`);
  return failed > 0 ? 1 : 0;
}

process.exitCode = await main();
