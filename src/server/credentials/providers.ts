/**
 * The inference-credential providers an account can set, the API each one
 * belongs to, and which credential a runtime launch needs for its model.
 */
import type { Runtime } from '../store/conversation-schema.ts';

export const CREDENTIAL_PROVIDERS = [
  'anthropic_api_key',
  'claude_code_oauth_token',
  'openai_api_key',
  'gemini_api_key',
] as const;
export type CredentialProvider = (typeof CREDENTIAL_PROVIDERS)[number];

export const isCredentialProvider = (s: string): s is CredentialProvider =>
  (CREDENTIAL_PROVIDERS as readonly string[]).includes(s);

/** The vendor API a credential talks to, and its public default base URL (the form each SDK takes). */
export const CREDENTIAL_API: Readonly<
  Record<
    CredentialProvider,
    { readonly api: 'anthropic' | 'openai' | 'gemini'; readonly defaultBaseUrl: string; readonly label: string }
  >
> = {
  anthropic_api_key: { api: 'anthropic', defaultBaseUrl: 'https://api.anthropic.com', label: 'Anthropic API key' },
  claude_code_oauth_token: {
    api: 'anthropic',
    defaultBaseUrl: 'https://api.anthropic.com',
    label: 'Claude Code OAuth token (claude setup-token)',
  },
  openai_api_key: { api: 'openai', defaultBaseUrl: 'https://api.openai.com/v1', label: 'OpenAI API key' },
  gemini_api_key: {
    api: 'gemini',
    defaultBaseUrl: 'https://generativelanguage.googleapis.com',
    label: 'Gemini API key',
  },
};

/**
 * The credentials a runtime may use for a model, most preferred first; the launch takes the first one
 * the account has. Empty for runtimes that need none (demo).
 */
export function credentialsFor(runtime: Runtime, model: string): readonly CredentialProvider[] {
  const vendor = model.slice(0, model.indexOf('/'));
  switch (runtime) {
    case 'claude':
      // the OAuth token is preferred, and never both are given.
      return ['claude_code_oauth_token', 'anthropic_api_key'];
    case 'codex':
      return ['openai_api_key'];
    case 'gemini':
      return ['gemini_api_key'];
    case 'opencode':
      return vendor === 'anthropic'
        ? ['anthropic_api_key']
        : vendor === 'openai'
          ? ['openai_api_key']
          : vendor === 'google'
            ? ['gemini_api_key']
            : [];
    case 'demo':
      return [];
  }
}

/** The words of a launch refused for want of a credential: what to set, on which page, with which command. */
export function missingCredentialMessage(
  runtime: Runtime,
  model: string,
  needed: readonly CredentialProvider[],
): string {
  const which = needed.join(' or ');
  const first = needed[needed.length - 1] ?? 'anthropic_api_key';
  return (
    `the ${runtime} agent (model ${model}) needs a model credential: set ${which} on the Model credentials page (/account/credentials) ` +
    `or with \`fountain credentials set ${first}\``
  );
}
