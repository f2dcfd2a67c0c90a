/**
 * The shape of bench/results/<name>.json: figures, the baseline measured in the same run, the
 * ratio against it, the target verdict and the machine (cpus, memory, node, load average).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, freemem, platform, release } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

const figure = z.union([z.number(), z.string(), z.boolean(), z.null(), z.record(z.string(), z.unknown())]);

export const machineSchema = z.object({
  cpus: z.number().int().positive(),
  cpuModel: z.string(),
  memoryBytes: z.number().positive(),
  freeMemoryBytes: z.number().nonnegative(),
  node: z.string(),
  platform: z.string(),
  /** 1, 5 and 15 minute load averages when the benchmark started and ended. */
  loadAverageStart: z.array(z.number()).length(3),
  loadAverageEnd: z.array(z.number()).length(3),
});
export type Machine = z.infer<typeof machineSchema>;

export const resultSchema = z.object({
  name: z.string().regex(/^[a-z][a-z0-9-]*$/),
  title: z.string().min(1),
  quick: z.boolean(),
  startedAt: z.iso.datetime(),
  durationMs: z.number().nonnegative(),
  /** How the parts were run: which server, which runner, which database. */
  setup: z.record(z.string(), z.string()),
  figures: z.record(z.string(), figure),
  baseline: z.object({ description: z.string().min(1), figures: z.record(z.string(), figure) }),
  /** measured / baseline for the headline figure; null when no baseline applies. */
  ratio: z.object({ value: z.number().nullable(), meaning: z.string().min(1) }),
  target: z.object({ description: z.string().min(1), met: z.boolean().nullable() }),
  /** Earlier runs worth keeping next to this one (e.g. before a fix), as recorded by hand or by the harness. */
  history: z.array(z.record(z.string(), z.unknown())).default([]),
  notes: z.array(z.string()),
  /** With --cpu-prof: the top self-time functions of each profile written during the run, by file name. */
  profiles: z
    .record(z.string(), z.array(z.object({ frame: z.string(), selfMs: z.number(), percent: z.number() })))
    .optional(),
  summary: z.string().min(1),
  machine: machineSchema,
});
export type BenchResult = z.infer<typeof resultSchema>;

const load = (): number[] => loadavg().map((x) => Math.round(x * 100) / 100);

/** A snapshot of the machine at the start; `finish` adds the end load average. */
export function machineStart(): Omit<Machine, 'loadAverageEnd'> {
  const cpuList = cpus();
  return {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    memoryBytes: totalmem(),
    freeMemoryBytes: freemem(),
    node: process.version,
    platform: `${platform()} ${release()}`,
    loadAverageStart: load(),
  };
}

export function machineEnd(start: Omit<Machine, 'loadAverageEnd'>): Machine {
  return { ...start, loadAverageEnd: load() };
}

/** Validates and writes one result; a shape error is a harness bug, so it throws. */
export function writeResult(dir: string, result: BenchResult): string {
  const parsed = resultSchema.parse(result);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${parsed.name}.json`);
  writeFileSync(path, `${JSON.stringify(parsed, null, 2)}\n`);
  return path;
}

/** "yes"/"NO"/"n/a" for the summary line. */
export const verdict = (met: boolean | null): string => (met === null ? 'n/a' : met ? 'met' : 'NOT met');
