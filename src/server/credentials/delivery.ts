/**
 * How a runtime is handed its model credential and model: the
 * secret goes only into the agent process's env; endpoint, model and permission settings go into the
 * runtime's own env or config file, which never hold the secret itself.
 */
import type { Private } from '../../sandbox/private.ts';
import type { CustomRuntime, Runtime } from '../store/conversation-schema.ts';
import { opencodePermission } from './opencode-permission.ts';
import type { CredentialProvider } from './providers.ts';

/** A credential opened for one launch. */
export interface OpenedCredential {
  readonly provider: CredentialProvider;
  readonly value: Private<string>;
  readonly baseUrl: string | null;
}

export interface RuntimeFile {
  /** Relative to the runtime's HOME. */
  readonly path: string;
  readonly content: string;
}

export interface Delivery {
  /** The credential, for the agent process's env only (never `.env`, never a command line). */
  readonly secretEnv: ReadonlyArray<readonly [string, Private<string>]>;
  /** Endpoint and model settings for the agent process's env. */
  readonly env: ReadonlyArray<readonly [string, string]>;
  /** Runtime config files, written at every launch so a changed base_url or model takes effect on wake. */
  readonly files: readonly RuntimeFile[];
  /** The model id the runtime is told to use (the part of `provider/model` after the slash). */
  readonly modelId: string;
}

const trimSlash = (s: string) => s.replace(/\/+$/, '');
const tomlString = (s: string) => JSON.stringify(s);

/** The env variable each credential is read from. */
const KEY_ENV: Readonly<Record<CredentialProvider, string>> = {
  anthropic_api_key: 'ANTHROPIC_API_KEY',
  claude_code_oauth_token: 'CLAUDE_CODE_OAUTH_TOKEN',
  openai_api_key: 'OPENAI_API_KEY',
  gemini_api_key: 'GEMINI_API_KEY',
};

/** Codex ignores OPENAI_BASE_URL: a gateway is a model provider of its own in config.toml. */
function codexConfig(modelId: string, baseUrl: string | null): string {
  const lines = [`# Written by Fountain at every launch.`, `model = ${tomlString(modelId)}`];
  if (baseUrl) {
    lines.push(
      `model_provider = "fountain"`,
      ``,
      `[model_providers.fountain]`,
      `name = "Fountain gateway"`,
      `base_url = ${tomlString(trimSlash(baseUrl))}`,
      `wire_api = "responses"`,
      `env_key = "OPENAI_API_KEY"`,
      // The built-in provider first tries a WebSocket; a gateway is plain HTTP.
      `supports_websockets = false`,
    );
  }
  // Shell snapshots write the process env (the key with it) to $CODEX_HOME/shell_snapshots/*.sh: a key on disk.
  lines.push(``, `[features]`, `shell_snapshot = false`);
  return `${lines.join('\n')}\n`;
}

/**
 * opencode's provider by model prefix, its key read from the env by reference (`{env:KEY}`), and
 * `ask` for its tools so every shell, edit and fetch reaches Fountain's permission policy.
 */
function opencodeConfig(vendor: string, modelId: string, cred: OpenedCredential): string {
  const keyRef = `{env:${KEY_ENV[cred.provider]}}`;
  const base = cred.baseUrl ? trimSlash(cred.baseUrl) : null;
  let providerId = vendor;
  let provider: Record<string, unknown>;
  if (vendor === 'openai' && base) {
    // A gateway speaks Chat Completions far more often than the Responses API; opencode drives its
    // built-in `openai` provider through the Responses API whatever npm package it is given, so the
    // gateway is a provider of its own.
    providerId = 'openai-gateway';
    provider = {
      [providerId]: {
        npm: '@ai-sdk/openai-compatible',
        name: 'OpenAI (gateway)',
        options: { baseURL: base, apiKey: keyRef },
        // A model opencode does not know takes text only: it would put "cannot read" words where the
        // prompt's image was. The runtime advertises images, so they go on and the model API answers for them.
        models: { [modelId]: { name: modelId, modalities: { input: ['text', 'image'], output: ['text'] } } },
      },
    };
  } else if (vendor === 'anthropic') {
    provider = { anthropic: { options: { apiKey: keyRef, ...(base ? { baseURL: `${base}/v1` } : {}) } } };
  } else if (vendor === 'google') {
    provider = { google: { options: { apiKey: keyRef, ...(base ? { baseURL: `${base}/v1beta` } : {}) } } };
  } else {
    provider = { [vendor]: { options: { apiKey: keyRef } } };
  }
  return `${JSON.stringify(
    {
      $schema: 'https://opencode.ai/config.json',
      model: `${providerId}/${modelId}`,
      // Titles and summaries use the same model: a gateway may serve only the one the agent names.
      small_model: `${providerId}/${modelId}`,
      provider,
      permission: opencodePermission(),
      autoupdate: false,
      share: 'disabled',
    },
    null,
    2,
  )}\n`;
}

const GEMINI_SETTINGS = `${JSON.stringify({ privacy: { usageStatisticsEnabled: false }, telemetry: { enabled: false } }, null, 2)}\n`;

/** The delivery for a runtime, model and the credential chosen for it; demo gets nothing. */
export function deliveryFor(runtime: Runtime, model: string, cred: OpenedCredential | null): Delivery {
  const slash = model.indexOf('/');
  const vendor = model.slice(0, slash);
  const modelId = model.slice(slash + 1);
  if (!cred) return { secretEnv: [], env: [], files: [], modelId };
  const secretEnv: Array<readonly [string, Private<string>]> = [[KEY_ENV[cred.provider], cred.value]];
  const env: Array<readonly [string, string]> = [];
  const files: RuntimeFile[] = [];
  switch (runtime) {
    case 'claude':
      if (cred.baseUrl) env.push(['ANTHROPIC_BASE_URL', trimSlash(cred.baseUrl)]);
      env.push(['ANTHROPIC_MODEL', modelId]);
      break;
    case 'codex':
      files.push({ path: '.codex/config.toml', content: codexConfig(modelId, cred.baseUrl) });
      // codex-acp authenticates with the key from its env only when asked to.
      env.push(['DEFAULT_AUTH_REQUEST', JSON.stringify({ methodId: 'api-key' })]);
      break;
    case 'gemini':
      if (cred.baseUrl) env.push(['GOOGLE_GEMINI_BASE_URL', trimSlash(cred.baseUrl)]);
      env.push(['GEMINI_MODEL', modelId]);
      files.push({ path: '.gemini/settings.json', content: GEMINI_SETTINGS });
      break;
    case 'opencode':
      files.push({ path: '.config/opencode/opencode.json', content: opencodeConfig(vendor, modelId, cred) });
      break;
    case 'demo':
    case 'custom':
      break;
  }
  return { secretEnv, env, files, modelId };
}

/**
 * A custom runtime's delivery: each credential it names as the env variable it names, its base URL (the
 * gateway's under gateway delivery) as the other, and the model as FOUNTAIN_MODEL.
 */
export function customDeliveryFor(custom: CustomRuntime, model: string, creds: readonly OpenedCredential[]): Delivery {
  const modelId = model.slice(model.indexOf('/') + 1);
  const secretEnv: Array<readonly [string, Private<string>]> = [];
  const env: Array<readonly [string, string]> = [['FOUNTAIN_MODEL', model]];
  for (const c of custom.credentials) {
    const cred = creds.find((o) => o.provider === c.provider);
    if (!cred) continue;
    secretEnv.push([c.env, cred.value]);
    if (c.base_url_env && cred.baseUrl) env.push([c.base_url_env, trimSlash(cred.baseUrl)]);
  }
  return { secretEnv, env, files: [], modelId };
}
