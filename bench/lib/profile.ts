/**
 * V8 CPU profiles: record this process's own profile through node:inspector, and reduce any
 * .cpuprofile to its top functions by self time, so a result can name its bottleneck.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { relative } from 'node:path';
import { z } from 'zod';
import { REPO } from './rig.ts';

const profileSchema = z.object({
  nodes: z.array(
    z
      .object({
        id: z.number(),
        callFrame: z.object({ functionName: z.string(), url: z.string(), lineNumber: z.number() }).loose(),
      })
      .loose(),
  ),
  /** Microseconds on the monotonic clock, the one process.hrtime reads. */
  startTime: z.number().default(0),
  samples: z.array(z.number()).default([]),
  timeDeltas: z.array(z.number()).default([]),
});

/** A measured stretch of a benchmark, in microseconds of process.hrtime (start, end). */
export type Window = readonly [number, number];

/** The current process.hrtime reading in microseconds: the clock V8 stamps profile samples with. */
export const hrtimeUs = (): number => Number(process.hrtime.bigint() / 1000n);

export interface HotFunction {
  /** `name (file:line)`, paths relative to the repository. */
  readonly frame: string;
  readonly selfMs: number;
  readonly percent: number;
}

/**
 * Self time per function (same name, file and line merged), highest first. With `windows`, only
 * samples taken inside them count, so start-up (module loading, database migrations) stays out.
 */
export function topFunctions(profile: unknown, n = 12, windows?: readonly Window[]): HotFunction[] {
  const p = profileSchema.parse(profile);
  const label = new Map<number, string>();
  for (const node of p.nodes) {
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.startsWith('file://') ? relative(REPO, new URL(url).pathname) : url;
    label.set(node.id, `${functionName || '(anonymous)'}${file ? ` (${file}:${lineNumber + 1})` : ''}`);
  }
  const self = new Map<string, number>();
  let total = 0;
  let at = p.startTime;
  p.samples.forEach((id, i) => {
    at += p.timeDeltas[i] ?? 0;
    if (windows && !windows.some(([from, to]) => at >= from && at <= to)) return;
    const dt = (p.timeDeltas[i] ?? 0) / 1000;
    total += dt;
    const key = label.get(id) ?? '(unknown)';
    self.set(key, (self.get(key) ?? 0) + dt);
  });
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([frame, ms]) => ({
      frame,
      selfMs: Math.round(ms),
      percent: total > 0 ? Math.round((ms / total) * 1000) / 10 : 0,
    }));
}

/** Profiles this process from now until the returned stop() writes the profile to `path`. */
export async function profileSelf(path: string): Promise<() => Promise<unknown>> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 500 });
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(path, JSON.stringify(profile));
    session.disconnect();
    return profile;
  };
}
