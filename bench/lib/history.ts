/**
 * Keeps earlier runs of a benchmark in its result file, so a fix shows its before and after:
 * each run appends the previous run's headline (summary, ratio, target, load) to `history`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';

const MAX_HISTORY = 20;

const previousSchema = z.object({
  startedAt: z.string(),
  quick: z.boolean(),
  summary: z.string(),
  ratio: z.object({ value: z.number().nullable() }).loose(),
  target: z.object({ met: z.boolean().nullable() }).loose(),
  figures: z.record(z.string(), z.unknown()),
  machine: z.object({ loadAverageEnd: z.array(z.number()) }).loose(),
  history: z.array(z.record(z.string(), z.unknown())).default([]),
  label: z.string().optional(),
});

/** The history for a new run: the old file's history plus its own headline. Unreadable files start afresh. */
export function readHistory(path: string): Array<Record<string, unknown>> {
  if (!existsSync(path)) return [];
  let parsed;
  try {
    parsed = previousSchema.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  } catch {
    return [];
  }
  if (!parsed.success) return [];
  const p = parsed.data;
  const headline = {
    startedAt: p.startedAt,
    quick: p.quick,
    summary: p.summary,
    ratio: p.ratio.value,
    targetMet: p.target.met,
    load: p.machine.loadAverageEnd[0] ?? null,
    ...(p.label ? { label: p.label } : {}),
  };
  return [...p.history, headline].slice(-MAX_HISTORY);
}
