/**
 * Normalises every Sprites failure (HTTP status, WebSocket upgrade refusal, transport error,
 * malformed reply) into the sandbox error taxonomy; details are fixed codes, never raw text.
 */
import { z } from 'zod';
import { sandboxError, type SandboxError } from '../../sandbox/index.ts';

const PROVIDER = 'sprites';

const errorBody = z.object({
  error: z.string().optional(),
  code: z.string().optional(),
  retry_after_seconds: z.number().nonnegative().optional(),
});

/** A short machine code from a vendor error body: only `[a-z0-9_]`, so no secret or prose leaks. */
const bodyCode = (body: unknown): string | undefined => {
  const parsed = errorBody.safeParse(body);
  if (!parsed.success) return undefined;
  const raw = parsed.data.code ?? parsed.data.error;
  if (!raw || !/^[a-z0-9_]{1,64}$/.test(raw)) return undefined;
  return raw;
};

const parseRetryAfterHeader = (header: string | null | undefined): number | undefined => {
  if (!header) return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs) && secs >= 0) return Math.round(secs * 1000);
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
};

/**
 * Maps an HTTP status (REST reply or refused WebSocket upgrade) to the taxonomy.
 * 404 is `not_found` only because Sprites answers 404 exactly for an absent sprite or session.
 */
export function fromHttpStatus(status: number, body?: unknown, retryAfterHeader?: string | null): SandboxError {
  const code = bodyCode(body);
  if (status === 404) return sandboxError('not_found');
  if (status === 401 || status === 403) return sandboxError('denied', code ?? `http_${status}`);
  if (status === 429) {
    const parsed = errorBody.safeParse(body);
    const fromBody =
      parsed.success && parsed.data.retry_after_seconds !== undefined
        ? Math.round(parsed.data.retry_after_seconds * 1000)
        : undefined;
    const retryAfterMs = fromBody ?? parseRetryAfterHeader(retryAfterHeader);
    return sandboxError('rate_limited', code ?? 'http_429', retryAfterMs === undefined ? {} : { retryAfterMs });
  }
  if (status === 408 || status >= 500) return sandboxError('unavailable', code ?? `http_${status}`);
  if (status >= 400) return sandboxError('invalid', code ?? `http_${status}`);
  // A 1xx/3xx where a final answer was due: the reply is not one Sprites gives.
  return sandboxError('provider', `unexpected_http_${status}`, { provider: PROVIDER });
}

const TRANSPORT_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection_refused',
  ECONNRESET: 'connection_reset',
  ETIMEDOUT: 'timeout',
  EPIPE: 'connection_reset',
  ENOTFOUND: 'dns_failure',
  EAI_AGAIN: 'dns_failure',
  EHOSTUNREACH: 'host_unreachable',
  ENETUNREACH: 'network_unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'timeout',
  UND_ERR_HEADERS_TIMEOUT: 'timeout',
  UND_ERR_BODY_TIMEOUT: 'timeout',
  UND_ERR_SOCKET: 'connection_reset',
};

const errnoOf = (e: unknown): string | undefined => {
  let cur: unknown = e;
  for (let depth = 0; depth < 4 && typeof cur === 'object' && cur !== null; depth++) {
    const c = (cur as { code?: unknown }).code;
    if (typeof c === 'string') return c;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
};

/**
 * Anything thrown by fetch or ws (refused connection, reset, timeout, abort) is a transport
 * failure: `unavailable`, never `not_found`, so a flaky network never reads as a lost sandbox.
 */
export function fromTransport(e: unknown): SandboxError {
  if (typeof e === 'object' && e !== null) {
    const name = (e as { name?: unknown }).name;
    if (name === 'TimeoutError' || name === 'AbortError') return sandboxError('unavailable', 'timeout');
  }
  const errno = errnoOf(e);
  const detail = (errno && TRANSPORT_CODES[errno]) ?? 'transport_error';
  return sandboxError('unavailable', detail);
}

/** A reply that arrived but does not have the shape Sprites documents. */
export const badReply = (what: string): SandboxError =>
  sandboxError('provider', `bad_reply_${what}`, { provider: PROVIDER });
