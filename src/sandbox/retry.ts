/**
 * Retry classification and bounded exponential backoff for idempotent sandbox calls.
 * Classification looks only at the error code; unknown shapes are treated as transient.
 */
import type { Result } from './result.ts';
import type { SandboxError } from './errors.ts';

const PERMANENT = new Set<string>([
  'not_found',
  'truncated',
  'not_supported',
  'already_exists',
  'denied',
  'invalid',
  'restore_failed',
]);

export const isTransient = (e: SandboxError | { code?: unknown } | unknown): boolean => {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return !(typeof code === 'string' && PERMANENT.has(code));
};

export interface BackoffOptions<E> {
  attempts?: number;
  baseMs?: number;
  maxMs?: number;
  label?: string;
  retriable?: (e: E) => boolean;
  /** Injected for tests; defaults to setTimeout. */
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  onRetry?: (info: { attempt: number; delayMs: number; label?: string; error: unknown }) => void;
}

/** Delay before retry n (n ≥ 1): between half the ceiling and the ceiling. */
export const backoffDelay = (n: number, baseMs: number, maxMs: number, random: () => number = Math.random): number => {
  const ceiling = Math.min(baseMs * 2 ** (n - 1), maxMs);
  const uniform = 1 + Math.floor(random() * ceiling);
  return Math.max(uniform, Math.floor(ceiling / 2));
};

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Calls `fn` up to `attempts` times. An error result is retried only when `retriable` says so;
 * a thrown exception is retried and rethrown after the last attempt.
 */
export async function withBackoff<T, E = SandboxError>(
  fn: () => Promise<Result<T, E>>,
  opts: BackoffOptions<E> = {},
): Promise<Result<T, E>> {
  const attempts = opts.attempts ?? 3;
  const baseMs = opts.baseMs ?? 250;
  const maxMs = opts.maxMs ?? 2000;
  const retriable = opts.retriable ?? ((e: E) => isTransient(e));
  const sleep = opts.sleep ?? defaultSleep;
  for (let attempt = 1; ; attempt++) {
    let outcome: Result<T, E>;
    try {
      outcome = await fn();
    } catch (thrown) {
      if (attempt >= attempts) throw thrown;
      const delayMs = backoffDelay(attempt, baseMs, maxMs, opts.random);
      opts.onRetry?.({ attempt, delayMs, label: opts.label, error: thrown });
      await sleep(delayMs);
      continue;
    }
    if (outcome.ok || attempt >= attempts || !retriable(outcome.error)) return outcome;
    const delayMs = backoffDelay(attempt, baseMs, maxMs, opts.random);
    opts.onRetry?.({ attempt, delayMs, label: opts.label, error: outcome.error });
    await sleep(delayMs);
  }
}
