/**
 * The runtime table: where each agent runtime lives in its sandbox, how its
 * ACP adapter is installed and launched, and which model providers it accepts.
 */
import { credentialsFor } from '../credentials/providers.ts';
import type { CustomRuntime, Runtime } from '../store/conversation-schema.ts';
import { RUNTIME_STORE_ENV, SANDBOX_HOME } from '../../sandbox/home.ts';
import { claudeRelocate, codexRelocate, geminiRelocate } from './relocate.ts';

export { SANDBOX_HOME };

export interface AdapterInstall {
  readonly pkg: string;
  readonly version: string;
  readonly bin: string;
}

export interface RuntimeSpec {
  readonly id: Runtime;
  readonly home: string;
  readonly instructionsFile: string;
  /** The runtime's config directory under HOME; skills go to `<home>/<configDir>/skills`. */
  readonly configDir: string;
  /** How MCP servers reach it: project files (claude), its settings.json (gemini), or ACP session/new. */
  readonly mcpDelivery: 'claude_project' | 'gemini_settings' | 'session';
  /** The ACP cwd in sandbox terms (mapped through the provider's hostPath before session/new). */
  readonly cwd: string;
  /** A workspace that must exist (git-initialised) before launch; null when cwd is HOME. */
  readonly workspace: string | null;
  /**
   * For a runtime that files its sessions by the cwd's real path: the shell script (run in HOME) that makes
   * the sessions filed under `fromCwd` found from `toCwd`, run when a checkpoint is restored where that path
   * differs (another runner's directory), so session/load finds them.
   */
  readonly relocateSessions?: (fromCwd: string, toCwd: string) => string;
  /**
   * How long the agent must be silent after answering session/load before its replay counts as over
   * (default none: an ACP agent replays before its answer). gemini-cli streams the loaded history after
   * its answer, and a loaded machine can stall that stream for seconds.
   */
  readonly replayQuietMs?: number;
  /** The launch argv; for `demo` the engine substitutes its configured argv. */
  readonly launch: readonly string[];
  /** An npm-installed ACP adapter pinned to a version; null when the runtime is native or built in. */
  readonly install: AdapterInstall | null;
  /** A custom runtime's package (npm `name@version` or apt), installed when absent. */
  readonly packages?: CustomRuntime['install'];
  /** A native binary that must already be on the sandbox PATH. */
  readonly requiresBin: string | null;
  /** Process env the adapter needs beyond the sandbox's (never a credential). */
  readonly env: ReadonlyArray<readonly [string, string]>;
  /**
   * Whether the model is also chosen through the adapter's ACP `model` config option. Only where the
   * runtime's own config does not already name it: opencode's picker lists its built-in providers, and
   * choosing from it would move a gateway model back to the vendor's API.
   */
  readonly modelOption: boolean;
  /** Accepted model providers (the part of `model` before the slash). */
  readonly modelProviders: readonly string[];
  readonly models: readonly string[];
}

export const RUNTIME_SPECS: Readonly<Record<Runtime, RuntimeSpec>> = {
  claude: {
    id: 'claude',
    configDir: '.claude',
    mcpDelivery: 'claude_project',
    home: SANDBOX_HOME,
    instructionsFile: `${SANDBOX_HOME}/CLAUDE.md`,
    relocateSessions: claudeRelocate,
    cwd: SANDBOX_HOME,
    workspace: null,
    launch: ['claude-agent-acp'],
    install: { pkg: '@agentclientprotocol/claude-agent-acp', version: '0.66.0', bin: 'claude-agent-acp' },
    requiresBin: null,
    // Claude Code refuses its permission-bypass mode as uid 0 unless told it is in a sandbox.
    env: [
      ['IS_SANDBOX', '1'],
      // A refused key is retried ten times with backoff (minutes of silence); four retries still ride out an overload.
      ['CLAUDE_CODE_MAX_RETRIES', '4'],
      // No telemetry, error reporting or auto-update from a sandbox: the model API is the only peer it needs.
      ['CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC', '1'],
    ],
    modelOption: true,
    modelProviders: ['anthropic'],
    models: ['anthropic/claude-sonnet-4-5', 'anthropic/claude-opus-4-1', 'anthropic/claude-haiku-4-5'],
  },
  codex: {
    id: 'codex',
    configDir: '.codex',
    mcpDelivery: 'session',
    home: SANDBOX_HOME,
    instructionsFile: `${SANDBOX_HOME}/AGENTS.md`,
    relocateSessions: codexRelocate,
    cwd: SANDBOX_HOME,
    workspace: null,
    launch: ['codex-acp'],
    install: { pkg: '@agentclientprotocol/codex-acp', version: '1.1.14', bin: 'codex-acp' },
    requiresBin: null,
    env: [],
    modelOption: false,
    modelProviders: ['openai'],
    models: ['openai/gpt-5', 'openai/gpt-5-codex'],
  },
  gemini: {
    id: 'gemini',
    replayQuietMs: 2_000,
    relocateSessions: geminiRelocate,
    configDir: '.gemini',
    mcpDelivery: 'gemini_settings',
    home: SANDBOX_HOME,
    instructionsFile: `${SANDBOX_HOME}/GEMINI.md`,
    // A workspace of its own below HOME (not HOME itself), inside the sandbox like everything the agent keeps.
    cwd: `${SANDBOX_HOME}/gemini-workspace`,
    workspace: `${SANDBOX_HOME}/gemini-workspace`,
    launch: ['gemini', '--acp'],
    // Installed like the adapters when the sandbox lacks the pinned version (a runner's machine may have none).
    install: { pkg: '@google/gemini-cli', version: '0.61.0', bin: 'gemini' },
    requiresBin: null,
    env: [
      ['GEMINI_TELEMETRY_ENABLED', 'false'],
      // Folder trust is on by default and an undecided folder is untrusted: gemini then starts no MCP
      // server at all (nor loads the workspace's settings). The workspace is Fountain's own, in the sandbox.
      ['GEMINI_CLI_TRUST_WORKSPACE', 'true'],
    ],
    modelOption: false,
    modelProviders: ['google'],
    models: ['google/gemini-2.5-pro', 'google/gemini-2.5-flash'],
  },
  opencode: {
    id: 'opencode',
    configDir: '.config/opencode',
    mcpDelivery: 'session',
    home: SANDBOX_HOME,
    instructionsFile: `${SANDBOX_HOME}/AGENTS.md`,
    // A workspace of its own below HOME (not HOME itself), inside the sandbox like everything the agent keeps.
    cwd: `${SANDBOX_HOME}/opencode-workspace`,
    workspace: `${SANDBOX_HOME}/opencode-workspace`,
    launch: ['opencode', 'acp'],
    install: { pkg: 'opencode-ai', version: '1.18.33', bin: 'opencode' },
    requiresBin: null,
    // Its own update checks, model catalogue fetch, plugin and LSP downloads are not the sandbox's business.
    env: [
      ['OPENCODE_DISABLE_AUTOUPDATE', 'true'],
      ['OPENCODE_DISABLE_MODELS_FETCH', 'true'],
      ['OPENCODE_DISABLE_DEFAULT_PLUGINS', 'true'],
      ['OPENCODE_DISABLE_LSP_DOWNLOAD', 'true'],
      ['OPENCODE_DISABLE_SHARE', 'true'],
    ],
    modelOption: false,
    modelProviders: ['anthropic', 'openai', 'google'],
    models: ['anthropic/claude-sonnet-4-5', 'openai/gpt-5', 'google/gemini-2.5-pro'],
  },
  demo: {
    id: 'demo',
    configDir: '.demo',
    mcpDelivery: 'session',
    home: SANDBOX_HOME,
    instructionsFile: `${SANDBOX_HOME}/AGENTS.md`,
    cwd: SANDBOX_HOME,
    workspace: null,
    launch: [],
    install: null,
    requiresBin: null,
    env: [],
    modelOption: false,
    modelProviders: ['fountain'],
    models: ['fountain/demo'],
  },
  // Launch, install, env and credentials come from the agent's row (specFor): this entry holds the rest.
  custom: {
    id: 'custom',
    configDir: '.agent',
    mcpDelivery: 'session',
    home: SANDBOX_HOME,
    instructionsFile: `${SANDBOX_HOME}/AGENTS.md`,
    cwd: SANDBOX_HOME,
    workspace: null,
    launch: [],
    install: null,
    requiresBin: null,
    env: [],
    modelOption: false,
    modelProviders: [],
    models: ['custom/default'],
  },
};

/** The spec of a launch: the table's entry, or for `custom` the table's entry with the agent row's launch. */
export function specFor(runtime: Runtime, custom: CustomRuntime | null | undefined): RuntimeSpec {
  const base = RUNTIME_SPECS[runtime];
  if (runtime !== 'custom') return base;
  return {
    ...base,
    launch: custom?.command ?? [],
    packages: custom?.install ?? null,
    env: Object.entries(custom?.env ?? {}),
  };
}

export const MODEL_PATTERN = /^[a-z0-9_-]+\/[a-z0-9._-]+$/;

/** Null when the model fits the runtime (only the provider part is checked), else why not. */
export function modelProblem(runtime: Runtime, model: string): string | null {
  if (!MODEL_PATTERN.test(model)) return 'must look like provider/model_id (lowercase letters, digits, . _ -)';
  const provider = model.slice(0, model.indexOf('/'));
  // A custom agent names its model however it likes; Fountain only passes it on.
  if (runtime === 'custom') return null;
  const allowed = RUNTIME_SPECS[runtime].modelProviders;
  return allowed.includes(provider) ? null : `provider must be ${allowed.join(' or ')} for runtime ${runtime}`;
}

/** `/home/sprite/.env`: KEY='value' lines with `'\''` escaping. */
export function dotenv(pairs: ReadonlyArray<readonly [string, string]>): string {
  return pairs.map(([k, v]) => `${k}='${v.replace(/'/g, `'\\''`)}'\n`).join('');
}

/**
 * The idempotent install script: reinstall only when `<bin> --version` differs from the pin.
 *
 * From the npm cache alone first (`--offline`), then through the registry. Even with prefer-offline
 * npm asks the registry for every package whose metadata the cache lacks, optional ones included:
 * opencode-ai names twelve platform packages, and a cache warmed on one platform (or through a mirror
 * without the others) lacks several. A sandbox that cannot reach the registry then waits out npm's
 * retries with backoff on each, twice over (measured: twelve minutes for opencode-ai); offline, npm
 * skips an optional package it cannot find. A cache without the package fails the offline attempt at
 * its first request, in about a second.
 *
 * Where the runner names a runtime store (`$FOUNTAIN_RUNTIME_STORE`), each version is installed there
 * once and every later sandbox links it: an install is 7–10 s of CPU and hundreds of MB per sandbox.
 * The entry is a symlink made after the install finished (`ln -sn` fails when it exists), so a sandbox
 * never links half an install and two installing at once keep one.
 */
export function installScript(i: AdapterInstall): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const npmInstall = `npm install -g --no-progress --silent ${q(`${i.pkg}@${i.version}`)}`;
  const entry = `"$store"/${q(`${i.pkg.replace(/\//g, '+')}@${i.version}`)}`;
  return [
    'set -e',
    `mkdir -p "$HOME/.local/bin"`,
    `current="$(${q(i.bin)} --version 2>/dev/null || true)"`,
    `case "$current" in *${i.version}*) exit 0 ;; esac`,
    `store="\${${RUNTIME_STORE_ENV}:-}"`,
    `if [ -n "$store" ] && mkdir -p "$store" 2>/dev/null && [ -w "$store" ]; then`,
    `  if [ ! -f ${entry}/.complete ]; then`,
    `    tmp="$(mktemp -d "$store/.install-XXXXXX")"`,
    `    trap 'rm -rf "$tmp"' EXIT`,
    `    ${npmInstall} --prefix "$tmp" --offline >/dev/null 2>&1 || ${npmInstall} --prefix "$tmp"`,
    `    touch "$tmp/.complete"`,
    // An entry whose target went away is replaced; one another sandbox made meanwhile is kept.
    `    [ -f ${entry}/.complete ] || rm -f ${entry}`,
    `    if ln -sn "$(basename "$tmp")" ${entry} 2>/dev/null; then trap - EXIT; fi`,
    '  fi',
    `  ln -sf ${entry}/bin/${q(i.bin)} "$HOME/.local/bin/${i.bin}"`,
    '  exit 0',
    'fi',
    // The offline attempt's complaints are dropped: a failure is told by the attempt through the registry.
    `${npmInstall} --offline >/dev/null 2>&1 || ${npmInstall}`,
    `ln -sf "$(npm prefix -g)/bin/${i.bin}" "$HOME/.local/bin/${i.bin}"`,
  ].join('\n');
}

/**
 * How the runtimes word a model API's refusal of their key when they fail the prompt with a generic
 * error instead of auth_required: Claude Code ("Invalid API key"), Gemini CLI (Google's 400
 * API_KEY_INVALID), OpenAI and Anthropic 401 bodies.
 */
const MODEL_AUTH_REFUSAL =
  /invalid api key|api key not valid|API_KEY_INVALID|invalid_api_key|authentication_error|incorrect api key|\b401\b.*unauthori[sz]ed/i;

/**
 * The sentence the model gateway refuses a call over a limit with (gateway/limits.ts), as it appears
 * in whatever a runtime made of the error body (ended by the body's closing quote, if any).
 */
const GATEWAY_LIMIT = /Fountain gateway: [^"\\\n]*?(?:budget \w+ =|requests_per_minute|model allow-list)[^"\\\n]*/;

/** The gateway's sentence naming the limit that stopped a call, found in a runtime's error text; else null. */
export function gatewayLimitSentence(text: string): string | null {
  return GATEWAY_LIMIT.exec(text)?.[0].trim() ?? null;
}

/** ACP's `auth_required` JSON-RPC error code. */
export const ACP_AUTH_REQUIRED = -32000;

/**
 * Why a prompt failed, in words a user can act on: an auth refusal names the credential the runtime
 * reads for `model` (opencode's is its model's vendor's) and the command that sets it.
 */
export function promptFailureReason(
  runtime: Runtime,
  e: { readonly message: string; readonly rpc?: { readonly code: number } | undefined },
  model: string = RUNTIME_SPECS[runtime].models[0] ?? '',
): string {
  // A limit of the model gateway (budget, rate, allow-list) ends the turn with its own sentence, whatever
  // the runtime wrapped it in; it is not a credential problem.
  const limit = gatewayLimitSentence(e.message);
  if (limit) return limit;
  if (e.rpc?.code !== ACP_AUTH_REQUIRED && !MODEL_AUTH_REFUSAL.test(e.message)) return e.message;
  const names = credentialsFor(runtime, model);
  const which = names.length > 0 ? names.join(' or ') : "the model provider's API key";
  const commands =
    names.length > 0
      ? names.map((n) => `\`fountain credentials set ${n}\``).join(' or ')
      : '`fountain credentials set`';
  return (
    `${e.message} — the ${runtime} agent's model credential (${which}) is missing or was refused by the model API: ` +
    `set it again on the Model credentials page (/account/credentials) or with ${commands}`
  );
}
