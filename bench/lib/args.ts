/**
 * Command-line arguments of `npm run bench`: `--quick`, `--cpu-prof`, and optional benchmark names.
 * Pure, so bench.test.ts covers it; unknown flags and names are refused with a clear message.
 */
import { z } from 'zod';

export interface BenchArgs {
  readonly quick: boolean;
  /** Write V8 CPU profiles of the runner child and the bench process under bench/results/profiles. */
  readonly cpuProf: boolean;
  /** Benchmarks to run, in the order given; empty means all. */
  readonly names: readonly string[];
}

export type ParseOutcome =
  | { readonly ok: true; readonly args: BenchArgs }
  | { readonly ok: false; readonly error: string };

const nameSchema = z.string().regex(/^[a-z][a-z0-9-]*$/, 'benchmark names are lowercase words joined by "-"');

export function parseArgs(argv: readonly string[], known: readonly string[]): ParseOutcome {
  let quick = false;
  let cpuProf = false;
  const names: string[] = [];
  for (const a of argv) {
    if (a === '--') continue;
    if (a === '--quick') quick = true;
    else if (a === '--cpu-prof') cpuProf = true;
    else if (a.startsWith('-')) return { ok: false, error: `unknown flag ${a} (flags: --quick, --cpu-prof)` };
    else {
      const parsed = nameSchema.safeParse(a);
      if (!parsed.success || !known.includes(a))
        return { ok: false, error: `unknown benchmark "${a}" (known: ${known.join(', ')})` };
      if (!names.includes(a)) names.push(a);
    }
  }
  return { ok: true, args: { quick, cpuProf, names } };
}
