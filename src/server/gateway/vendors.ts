/**
 * What differs between the three model APIs the gateway speaks: where the caller's key sits, how the
 * real credential is attached, which call a path is, where the model is named, and each vendor's error shape.
 */
import type { CredentialProvider } from '../credentials/providers.ts';

export const GATEWAY_APIS = ['anthropic', 'openai', 'gemini'] as const;
export type GatewayApi = (typeof GATEWAY_APIS)[number];
export const isGatewayApi = (s: string): s is GatewayApi => (GATEWAY_APIS as readonly string[]).includes(s);

/** Where the gateway is mounted: `/api/gateway/<api>` stands for the credential's base URL. */
export const GATEWAY_PREFIX = '/api/gateway/';
export const gatewayBaseUrl = (serverUrl: string, api: GatewayApi): string =>
  `${serverUrl.replace(/\/+$/, '')}${GATEWAY_PREFIX}${api}`;

type Headers = Record<string, string | string[] | undefined>;
const first = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/** The key a runtime presents, wherever its SDK puts it: x-api-key, Bearer, x-goog-api-key or `?key=`. */
export function presentedKey(headers: Headers, query: URLSearchParams): string | null {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(first(headers.authorization) ?? '')?.[1];
  return first(headers['x-api-key']) ?? bearer ?? first(headers['x-goog-api-key']) ?? query.get('key') ?? null;
}

/** Headers never passed on: the caller's key (replaced), hop-by-hop ones, and encodings the usage reader cannot read. */
const DROPPED_REQUEST = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'authorization',
  'x-api-key',
  'x-goog-api-key',
  'accept-encoding',
  'proxy-authorization',
  'te',
  'upgrade',
]);
export const DROPPED_RESPONSE = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

/** The request headers for the vendor: the caller's, less its key, plus the real credential. */
export function upstreamHeaders(
  headers: Headers,
  provider: CredentialProvider,
  secret: string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || DROPPED_REQUEST.has(k)) continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  switch (provider) {
    case 'anthropic_api_key':
      out['x-api-key'] = secret;
      break;
    case 'claude_code_oauth_token': {
      out.authorization = `Bearer ${secret}`;
      // Anthropic takes an OAuth token only with this beta named.
      const beta = (out['anthropic-beta'] ?? '').split(',').map((s) => s.trim());
      if (!beta.includes('oauth-2025-04-20'))
        out['anthropic-beta'] = [...beta.filter(Boolean), 'oauth-2025-04-20'].join(',');
      break;
    }
    case 'openai_api_key':
      out.authorization = `Bearer ${secret}`;
      break;
    case 'gemini_api_key':
      out['x-goog-api-key'] = secret;
      break;
  }
  return out;
}

/** Which call a path under the API's base is (for the audit row); `other` is passed on all the same. */
export function endpointOf(api: GatewayApi, rest: string): string {
  if (api === 'anthropic') {
    if (/\/messages\/count_tokens$/.test(rest)) return 'count_tokens';
    if (/\/messages$/.test(rest)) return 'messages';
    if (/\/models(\/|$)/.test(rest)) return 'models';
  } else if (api === 'openai') {
    if (/\/responses$/.test(rest)) return 'responses';
    if (/\/chat\/completions$/.test(rest)) return 'chat_completions';
    if (/\/models(\/|$)/.test(rest)) return 'models';
  } else {
    const m = /\/models\/[^/:]+:([A-Za-z]+)$/.exec(rest);
    if (m) return m[1]!;
    if (/\/models(\/|$)/.test(rest)) return 'models';
  }
  return 'other';
}

/** The model a call names: in the JSON body, or (Gemini) in the path. */
export function modelOf(api: GatewayApi, rest: string, body: unknown): string | null {
  if (api === 'gemini') {
    const m = /\/models\/([^/:]+):[A-Za-z]+$/.exec(rest);
    return m ? decodeURIComponent(m[1]!) : null;
  }
  if (body && typeof body === 'object' && typeof (body as { model?: unknown }).model === 'string')
    return (body as { model: string }).model;
  return null;
}

/** The output cap a generating call declares (max_tokens and kin), or 0 where it names none. */
export function outputCapOf(api: GatewayApi, body: unknown): number {
  if (!body || typeof body !== 'object') return 0;
  const b = body as Record<string, unknown>;
  const cfg = b.generationConfig as Record<string, unknown> | undefined;
  const v =
    api === 'gemini'
      ? cfg && typeof cfg === 'object'
        ? cfg.maxOutputTokens
        : undefined
      : (b.max_output_tokens ?? b.max_completion_tokens ?? b.max_tokens);
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.min(Math.floor(v), 10_000_000) : 0;
}

export type ErrorKind = 'auth' | 'forbidden' | 'rate' | 'too_large' | 'unavailable' | 'not_found';

const ANTHROPIC_TYPES: Record<ErrorKind, string> = {
  auth: 'authentication_error',
  forbidden: 'permission_error',
  rate: 'rate_limit_error',
  too_large: 'request_too_large',
  unavailable: 'api_error',
  not_found: 'not_found_error',
};
const GOOGLE_STATUS: Record<ErrorKind, string> = {
  auth: 'UNAUTHENTICATED',
  forbidden: 'PERMISSION_DENIED',
  rate: 'RESOURCE_EXHAUSTED',
  too_large: 'INVALID_ARGUMENT',
  unavailable: 'UNAVAILABLE',
  not_found: 'NOT_FOUND',
};
const HTTP: Record<ErrorKind, number> = {
  auth: 401,
  forbidden: 403,
  rate: 429,
  too_large: 413,
  unavailable: 502,
  not_found: 404,
};

/** An error the gateway answers itself, in the shape the runtime's SDK parses for that vendor. */
export function vendorError(api: GatewayApi, kind: ErrorKind, message: string): { status: number; body: string } {
  const status = HTTP[kind];
  const body =
    api === 'anthropic'
      ? { type: 'error', error: { type: ANTHROPIC_TYPES[kind], message } }
      : api === 'openai'
        ? {
            error: {
              message,
              type:
                kind === 'rate'
                  ? 'rate_limit_exceeded'
                  : kind === 'auth'
                    ? 'invalid_request_error'
                    : 'fountain_gateway',
              param: null,
              code: kind === 'auth' ? 'invalid_api_key' : kind === 'forbidden' ? 'fountain_limit' : kind,
            },
          }
        : { error: { code: status, message, status: GOOGLE_STATUS[kind] } };
  return { status, body: JSON.stringify(body) };
}
