/**
 * Normalises every E2B failure (control-plane HTTP, envd Connect codes, transport) into the taxonomy.
 * Only a definitive absence becomes `not_found`; details never carry a secret or a vendor body verbatim.
 */
import { z } from 'zod';
import type { SandboxError } from '../../sandbox/index.ts';
import { sandboxError } from '../../sandbox/index.ts';

/** The control plane's error body: `{code: <http status>, message}`; some 503/504s add `error_code`. */
const controlErrorBody = z.object({
  code: z.union([z.number(), z.string()]).optional(),
  message: z.string().optional(),
  error_code: z.string().optional(),
});

/** A Connect error, as a unary error body or inside a stream's end-stream message. */
export const connectErrorSchema = z.object({
  code: z.string(),
  message: z.string().optional(),
});
export type ConnectError = z.infer<typeof connectErrorSchema>;

const MAX_DETAIL = 160;

/** Removes every known secret from a string that came from outside, and bounds its length. */
export function redact(text: string, secrets: readonly (string | null | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join('[redacted]');
  out = out.replace(/[\r\n\t]+/g, ' ');
  return out.length > MAX_DETAIL ? `${out.slice(0, MAX_DETAIL)}...` : out;
}

const parseJson = (body: Buffer | string): unknown => {
  try {
    return JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch {
    return undefined;
  }
};

/** `Retry-After` as seconds or an HTTP date, in milliseconds; absent when the header says nothing usable. */
export function retryAfterMs(header: string | string[] | undefined, now: number = Date.now()): number | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(v.trim())) return Math.round(Number(v.trim()) * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export interface HttpFailure {
  readonly status: number;
  readonly body: Buffer | string;
  readonly headers?: Readonly<Record<string, string | string[] | undefined>>;
}

/**
 * A non-success HTTP reply. `context` names the call (`get_sandbox`, `envd_start`, ...).
 * 404 is `not_found` here; callers that cannot treat a 404 as definitive remap it themselves.
 */
export function fromHttp(
  r: HttpFailure,
  context: string,
  secrets: readonly (string | null | undefined)[] = [],
): SandboxError {
  const json = parseJson(r.body);
  const control = controlErrorBody.safeParse(json);
  const connect = connectErrorSchema.safeParse(json);
  const vendorCode = control.success ? control.data.error_code : undefined;
  const message = control.success ? control.data.message : undefined;
  const what = [vendorCode, connect.success ? connect.data.code : undefined, message].filter((x) => x).join(' ');
  const detail = redact(`${context}: http ${r.status}${what ? ` ${what}` : ''}`, secrets);
  if (r.status === 404) return sandboxError('not_found', detail);
  if (r.status === 401 || r.status === 403) return sandboxError('denied', detail);
  if (r.status === 429) {
    const after = retryAfterMs(r.headers?.['retry-after']);
    return sandboxError('rate_limited', detail, after === undefined ? {} : { retryAfterMs: after });
  }
  // A full disk is not something a retry fixes.
  if (r.status === 507) return sandboxError('invalid', detail);
  if (r.status >= 500 || r.status === 408) return sandboxError('unavailable', detail);
  return sandboxError('invalid', detail);
}

/** A Connect error code (unary body or end-stream), mapped by what a retry could change. */
export function fromConnect(
  e: ConnectError,
  context: string,
  secrets: readonly (string | null | undefined)[] = [],
): SandboxError {
  const detail = redact(`${context}: ${e.code}${e.message ? ` ${e.message}` : ''}`, secrets);
  switch (e.code) {
    case 'not_found':
      return sandboxError('not_found', detail);
    case 'unauthenticated':
    case 'permission_denied':
      return sandboxError('denied', detail);
    case 'resource_exhausted':
      return sandboxError('rate_limited', detail);
    case 'invalid_argument':
    case 'failed_precondition':
    case 'out_of_range':
    case 'already_exists':
    case 'unimplemented':
      return sandboxError('invalid', detail);
    default:
      // unavailable, deadline_exceeded, aborted, internal, unknown, canceled, data_loss and anything new.
      return sandboxError('unavailable', detail);
  }
}

/** A failure below HTTP: refused, reset, DNS, timeout. Always transient, never `not_found`. */
export function fromTransport(
  e: unknown,
  context: string,
  secrets: readonly (string | null | undefined)[] = [],
): SandboxError {
  const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : undefined;
  const msg = e instanceof Error ? e.message : String(e);
  return sandboxError('unavailable', redact(`${context}: transport ${code ?? msg}`, secrets));
}

/** A reply that does not match the vendor's schema: treated as a transient fault of the vendor. */
export function badReply(context: string, issue: string): SandboxError {
  return sandboxError('unavailable', redact(`${context}: unexpected reply (${issue})`, []));
}

/** A bug in this adapter surfaced as a value, so the contract's "never throws" holds. */
export function internal(
  context: string,
  e: unknown,
  secrets: readonly (string | null | undefined)[] = [],
): SandboxError {
  const msg = e instanceof Error ? e.message : String(e);
  return sandboxError('provider', redact(`${context}: ${msg}`, secrets), { provider: 'e2b' });
}
