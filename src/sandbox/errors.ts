/**
 * The closed sandbox error taxonomy and its constructors.
 * Retry is decided from `code` alone (see retry.ts); `not_found` means definitively absent.
 */
import type { Result } from './result.ts';
import { err } from './result.ts';

export const SANDBOX_ERROR_CODES = [
  'not_found',
  'truncated',
  'not_supported',
  'already_exists',
  'command_exited',
  'rate_limited',
  'unavailable',
  'denied',
  'invalid',
  'write_failed',
  'closed_before_exit',
  'provider',
] as const;
export type SandboxErrorCode = (typeof SANDBOX_ERROR_CODES)[number];

export interface SandboxError {
  readonly code: SandboxErrorCode;
  /** Machine-readable reason, e.g. `runner_offline`, `termination_request`. Never holds a secret. */
  readonly detail?: string;
  /** Only for `rate_limited`: how long the provider asked us to wait, if it said. */
  readonly retryAfterMs?: number;
  /** Only for `provider`: which provider produced an error outside the taxonomy. */
  readonly provider?: string;
}

export type SandboxResult<T> = Result<T, SandboxError>;

export const sandboxError = (
  code: SandboxErrorCode,
  detail?: string,
  extra: { retryAfterMs?: number; provider?: string } = {},
): SandboxError => {
  const e: { -readonly [K in keyof SandboxError]: SandboxError[K] } = { code };
  if (detail !== undefined) e.detail = detail;
  if (extra.retryAfterMs !== undefined) e.retryAfterMs = extra.retryAfterMs;
  if (extra.provider !== undefined) e.provider = extra.provider;
  return e;
};

/** Shorthand for `err(sandboxError(...))`, the usual way an adapter fails. */
export const fail = (
  code: SandboxErrorCode,
  detail?: string,
  extra?: { retryAfterMs?: number; provider?: string },
): Result<never, SandboxError> => err(sandboxError(code, detail, extra));

export const isSandboxErrorCode = (v: unknown): v is SandboxErrorCode =>
  typeof v === 'string' && (SANDBOX_ERROR_CODES as readonly string[]).includes(v);

/** A one-line description for logs and user-facing messages. */
export const describeError = (e: SandboxError): string => (e.detail ? `${e.code}: ${e.detail}` : e.code);
