/**
 * How the runner provider turns wire error replies and transport failures into contract errors.
 * Transport failures are always `unavailable`, never `not_found`.
 */
import type { SandboxError } from '../../sandbox/index.ts';
import { sandboxError } from '../../sandbox/index.ts';

export const RUNNER_OFFLINE = 'runner_offline';
export const RUNNER_DISCONNECTED = 'runner_disconnected';
export const RUNNER_TIMEOUT = 'runner_timeout';

/** Longest piece of a foreign value quoted in an error detail, so a huge reply cannot bloat logs. */
const QUOTE_LIMIT = 200;

export function quote(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > QUOTE_LIMIT ? `${text.slice(0, QUOTE_LIMIT)}…` : text;
}

/** An error outside the taxonomy, tagged with the runner provider. */
export const providerError = (detail: string): SandboxError => sandboxError('provider', detail, { provider: 'runner' });

/** A reply or result whose shape the server cannot use: `provider(runner, {malformed_<what>, value})`. */
export const malformed = (what: string, value: unknown): SandboxError =>
  providerError(`malformed_${what}: ${quote(value)}`);

/** The daemon's error code (and detail) to the contract error. */
export function wireError(code: string, detail: string | undefined): SandboxError {
  switch (code) {
    case 'not_found':
    case 'command_exited':
    case 'not_supported':
      return sandboxError(code);
    case 'invalid':
    case 'unavailable':
    case 'write_failed':
      return sandboxError(code, detail);
    default:
      return providerError(detail === undefined ? code : `${code}: ${detail}`);
  }
}
