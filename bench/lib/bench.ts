/**
 * What one benchmark is and what it hands back to the harness: the measured figures, the baseline
 * from the same run, the ratio and the target verdict. The harness adds timing and the machine.
 */
import type { Logger } from 'pino';
import type { BenchResult } from './result.ts';
import type { RunnerRig } from './rig.ts';
import type { Window } from './profile.ts';

export interface BenchContext {
  readonly quick: boolean;
  /** Directory for V8 CPU profiles, or null when not profiling. */
  readonly cpuProfDir: string | null;
  readonly logger: Logger;
  /** The shared server + runner, started on first use and stopped when every benchmark is done. */
  rig(): Promise<RunnerRig>;
  /** Progress for the operator, on stderr. */
  progress(message: string): void;
  /** Runs `fn` as a measured stretch: with --cpu-prof, profiles count only samples taken inside one. */
  measured<T>(fn: () => Promise<T>): Promise<T>;
}

export type Measured = Omit<
  BenchResult,
  'name' | 'title' | 'quick' | 'startedAt' | 'durationMs' | 'machine' | 'history'
>;

export interface Benchmark {
  readonly name: string;
  readonly title: string;
  run(ctx: BenchContext): Promise<Measured>;
}

/** Milliseconds since `start` (a process.hrtime.bigint() reading), as a float. */
export const msSince = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;
