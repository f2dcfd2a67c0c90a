/**
 * The arithmetic of results: nearest-rank percentiles, summaries of samples, ratios and rates.
 * Pure functions, covered by bench.test.ts; timings themselves are never asserted anywhere.
 */

/** Nearest-rank percentile (p in 0..100) of samples; NaN for no samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  if (p < 0 || p > 100) throw new RangeError(`percentile must be in 0..100, got ${p}`);
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

export interface Summary {
  readonly n: number;
  readonly min: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export function summarize(samples: readonly number[]): Summary {
  const n = samples.length;
  const mean = n === 0 ? Number.NaN : samples.reduce((a, b) => a + b, 0) / n;
  return {
    n,
    min: n === 0 ? Number.NaN : Math.min(...samples),
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    max: n === 0 ? Number.NaN : Math.max(...samples),
    mean,
  };
}

/** measured / baseline, rounded to 3 significant digits; NaN when the baseline is not positive. */
export function ratio(measured: number, baseline: number): number {
  if (!(baseline > 0) || !Number.isFinite(measured)) return Number.NaN;
  return round(measured / baseline, 3);
}

/** Megabytes (10^6 bytes) per second. */
export function mbPerSecond(bytes: number, ms: number): number {
  return ms > 0 ? round(bytes / 1e6 / (ms / 1000), 3) : Number.NaN;
}

/** Rounds to `digits` significant digits (keeps results readable in JSON). */
export function round(x: number, digits = 3): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const magnitude = Math.floor(Math.log10(Math.abs(x)));
  const factor = 10 ** (digits - 1 - magnitude);
  return Math.round(x * factor) / factor;
}

export function roundSummary(s: Summary, digits = 3): Summary {
  return {
    n: s.n,
    min: round(s.min, digits),
    p50: round(s.p50, digits),
    p99: round(s.p99, digits),
    max: round(s.max, digits),
    mean: round(s.mean, digits),
  };
}

/** The median (mean of the middle two for an even count); NaN for no samples. */
export function median(samples: readonly number[]): number {
  if (samples.length === 0) return Number.NaN;
  const s = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
