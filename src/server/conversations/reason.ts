/**
 * Failure reasons as stored and shown: a runner's or provider's error text can be any length, so
 * what reaches `failure_reason`, stage events and turn reasons is capped; the log keeps it whole.
 */

/** Enough for any honest error message; the rest of a longer one is in the server log. */
export const MAX_REASON_CHARS = 1000;

export function capReason(text: string, max = MAX_REASON_CHARS): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length - max} more characters in the server log)`;
}
