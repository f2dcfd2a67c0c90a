/**
 * Normalises every Daytona failure (HTTP status, transport error, malformed reply) into the
 * sandbox taxonomy. Only a definitive absence becomes `not_found`; nothing here ever carries the API key.
 */
import type { SandboxError } from '../../sandbox/index.ts';
import { sandboxError } from '../../sandbox/index.ts';

/** What a 404 means for the call that got it: a definitive absence, or just a broken path. */
export type NotFoundMeaning = 'not_found' | 'unavailable';

/** Daytona's message for an organisation tier that may not override egress per sandbox. */
const TIER_RESTRICTED = /network access is restricted/i;

const MAX_DETAIL = 200;

/** Cuts vendor text to one short line and removes any secret the caller names. */
export function scrub(text: string, secrets: readonly string[] = []): string {
  let out = text.replace(/\s+/g, ' ').trim();
  for (const s of secrets) if (s.length > 0) out = out.split(s).join('[redacted]');
  return out.length > MAX_DETAIL ? `${out.slice(0, MAX_DETAIL)}…` : out;
}

/** Pulls Daytona's `message` (a string or a list of strings) out of an error body. */
export function vendorMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object') {
      const m = (parsed as { message?: unknown }).message;
      if (typeof m === 'string') return m;
      if (Array.isArray(m)) return m.filter((x) => typeof x === 'string').join('; ');
      const e = (parsed as { error?: unknown }).error;
      if (typeof e === 'string') return e;
    }
  } catch {
    // Not JSON: the raw text is the message.
  }
  return body;
}

/** Milliseconds from a Retry-After header (seconds or an HTTP date), if it says anything usable. */
export function retryAfterMs(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs) && secs >= 0) return Math.round(secs * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export interface HttpFailure {
  readonly status: number;
  readonly body: string;
  readonly retryAfter: string | null;
  /** Which call failed, for the detail (`get_sandbox`, `session_logs`, ...). */
  readonly op: string;
}

/**
 * Maps a non-2xx reply. `notFound` says whether this call's 404 is a definitive absence:
 * it is for `GET /sandbox/{name}`, it is not for a toolbox proxy that lost its route.
 */
export function fromHttp(f: HttpFailure, notFound: NotFoundMeaning, secrets: readonly string[] = []): SandboxError {
  const msg = scrub(vendorMessage(f.body), secrets);
  const detail = (kind: string) => (msg ? `${f.op}: ${kind}: ${msg}` : `${f.op}: ${kind}`);
  const s = f.status;
  if (s === 404)
    return notFound === 'not_found' ? sandboxError('not_found') : sandboxError('unavailable', detail('http_404'));
  if (s === 401 || s === 403) return sandboxError('denied', detail(`http_${s}`));
  if (s === 429) {
    const after = retryAfterMs(f.retryAfter);
    return sandboxError('rate_limited', detail('http_429'), after === undefined ? {} : { retryAfterMs: after });
  }
  if (s === 408 || s === 504) return sandboxError('unavailable', detail('timeout'));
  if (s >= 500) return sandboxError('unavailable', detail(`http_${s}`));
  // Tier 1/2 organisations refuse per-sandbox egress settings with a plain 400: it is a refusal
  // of permission, not a malformed request, and retrying or reshaping the body cannot help.
  if (s === 400 && TIER_RESTRICTED.test(msg)) return sandboxError('denied', detail('network_restricted_by_tier'));
  if (s === 410) return sandboxError('command_exited');
  if (s >= 400) return sandboxError('invalid', detail(`http_${s}`));
  return sandboxError('provider', detail(`http_${s}`), { provider: 'daytona' });
}

/** A request that never produced a reply: refused, reset, timed out. Always transient. */
export function fromTransport(op: string, cause: unknown, secrets: readonly string[] = []): SandboxError {
  const name = cause instanceof Error ? cause.name : '';
  if (name === 'TimeoutError' || name === 'AbortError') return sandboxError('unavailable', `${op}: timeout`);
  const code = transportCode(cause);
  const text = code ?? (cause instanceof Error ? cause.message : String(cause));
  return sandboxError('unavailable', `${op}: transport: ${scrub(text, secrets)}`);
}

/** undici wraps the socket error (ECONNREFUSED, ECONNRESET, ...) in `cause`. */
function transportCode(cause: unknown): string | undefined {
  let c: unknown = cause;
  for (let i = 0; i < 4 && c && typeof c === 'object'; i++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    c = (c as { cause?: unknown }).cause;
  }
  return undefined;
}

/** A 2xx reply whose body does not have the shape Daytona documents. */
export function malformed(op: string, why: string): SandboxError {
  return sandboxError('provider', `${op}: malformed_reply: ${scrub(why)}`, { provider: 'daytona' });
}
