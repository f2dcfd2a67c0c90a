/**
 * Checks a credential against its provider before it is stored: one authenticated read (the model
 * list) at the base URL. Refused (401/403), unreachable and timed out are told apart.
 */
import type { Private } from '../../sandbox/private.ts';
import { CREDENTIAL_API, type CredentialProvider } from './providers.ts';

export type Validation =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly kind: 'refused' | 'network' | 'timeout' | 'provider_error';
      readonly message: string;
    };

const trimSlash = (s: string) => s.replace(/\/+$/, '');

/** The request that proves a credential: URL and headers (the value goes only into a header). */
function probe(
  provider: CredentialProvider,
  value: string,
  baseUrl: string,
): { url: string; headers: Record<string, string> } {
  const base = trimSlash(baseUrl);
  switch (provider) {
    case 'anthropic_api_key':
      return { url: `${base}/v1/models`, headers: { 'x-api-key': value, 'anthropic-version': '2023-06-01' } };
    case 'claude_code_oauth_token':
      return {
        url: `${base}/v1/models`,
        headers: {
          authorization: `Bearer ${value}`,
          'anthropic-version': '2023-06-01',
          'anthropic-beta': 'oauth-2025-04-20',
        },
      };
    case 'openai_api_key':
      return { url: `${base}/models`, headers: { authorization: `Bearer ${value}` } };
    case 'gemini_api_key':
      return { url: `${base}/v1beta/models`, headers: { 'x-goog-api-key': value } };
  }
}

export async function validateCredential(
  provider: CredentialProvider,
  value: Private<string>,
  baseUrl: string | null,
  timeoutMs = 10_000,
): Promise<Validation> {
  const base = baseUrl ?? CREDENTIAL_API[provider].defaultBaseUrl;
  const { url, headers } = probe(provider, value.reveal(), base);
  let res: Response;
  try {
    res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
  } catch (e) {
    const name = e instanceof Error ? e.name : '';
    if (name === 'TimeoutError' || name === 'AbortError')
      return { ok: false, kind: 'timeout', message: `${base} did not answer within ${timeoutMs} ms` };
    // The cause names the network failure (refused, DNS); the value is never part of it.
    const cause = e instanceof Error && e.cause instanceof Error ? e.cause.message : 'network error';
    return { ok: false, kind: 'network', message: `${base} could not be reached: ${cause}` };
  }
  // Google answers a wrong key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID, not 401.
  const body = res.status === 400 && provider === 'gemini_api_key' ? await res.text().catch(() => '') : '';
  await res.body?.cancel().catch(() => undefined);
  if (res.ok) return { ok: true };
  if (res.status === 401 || res.status === 403 || body.includes('API_KEY_INVALID')) {
    return {
      ok: false,
      kind: 'refused',
      message: `${base} refused the ${CREDENTIAL_API[provider].label} (HTTP ${res.status})`,
    };
  }
  return { ok: false, kind: 'provider_error', message: `${base} answered HTTP ${res.status} to the credential check` };
}
