/**
 * The inference-credential providers an account can set, the API each one
 * belongs to, and which credential a runtime launch needs for its model.
 */
import type { CustomRuntime, Runtime } from '../store/conversation-schema.ts';

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
 * the account has. Empty for runtimes that need none (demo). A custom runtime names its own, and gets
 * every one it names.
 */
export function credentialsFor(
  runtime: Runtime,
  model: string,
  custom?: CustomRuntime | null,
): readonly CredentialProvider[] {
  const vendor = model.slice(0, model.indexOf('/'));
  switch (runtime) {
    case 'custom':
      return (custom?.credentials ?? []).map((c) => c.provider).filter(isCredentialProvider);
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

/** A credential set's name: lowercase letters, digits, `_` and `-`, as a CLI flag and a URL take it. */
export const SET_NAME = /^[a-z0-9][a-z0-9_-]{0,39}$/;
export const SET_NAME_RULE =
  'a credential set name is 1-40 lowercase letters, digits, _ or -, starting with a letter or digit';
