/**
 * The server's one configuration module: every environment variable the server reads, parsed once
 * at boot with zod. A blank variable counts as unset; a bad one stops the boot with an error naming it.
 */
import { parsePrices, type PriceTable } from './gateway/prices.ts';
import { z } from 'zod';
import { daytonaOptionsFromEnv, type DaytonaOptions } from '../providers/daytona/config.ts';
import { optionsFromEnv as e2bOptionsFromEnv, type E2BOptions } from '../providers/e2b/config.ts';
import { spritesOptionsFromEnv, type SpritesOptions } from '../providers/sprites/config.ts';
import { KNOWN_PROVIDERS, isKnownProvider, type KnownProvider } from '../sandbox/providers.ts';
import { ENGINE_DEFAULTS, engineConfigFromEnv, type EngineConfig } from './conversations/config.ts';
import { API_KEY_PATTERN } from './core/keys-store.ts';
import { ConfigError } from './config-error.ts';
import { DATABASE_ENV_SCHEMA, databaseEnv, type DatabaseEnv } from './database-env.ts';

export type Env = Readonly<Record<string, string | undefined>>;

const TRUE = ['true', '1', 'yes', 'on'];
const FALSE = ['false', '0', 'no', 'off'];

const bool = (fallback: boolean) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const s = v.toLowerCase();
      if (TRUE.includes(s)) return true;
      if (FALSE.includes(s)) return false;
      ctx.addIssue({ code: 'custom', message: `must be one of ${[...TRUE, ...FALSE].join(', ')}` });
      return z.NEVER;
    });

const wholeNumber = (fallback: number, min: number, max: number, unit: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const n = /^[0-9]+$/.test(v) ? Number(v) : NaN;
      if (!Number.isSafeInteger(n) || n < min || n > max) {
        ctx.addIssue({ code: 'custom', message: `must be a whole number of ${unit} from ${min} to ${max}` });
        return z.NEVER;
      }
      return n;
    });

const httpUrl = z
  .string()
  .refine((v) => /^https?:\/\/[^\s/]+/.test(v) && URL.canParse(v), 'must be an http:// or https:// URL')
  .optional();

const text = z.string().optional();

/**
 * Every variable, in the order docs/configuration.md lists them. The engine's and the providers'
 * own mappers re-read some of these below; they see the same cleaned values.
 */
const envSchema = z.object({
  // Server
  ...DATABASE_ENV_SCHEMA,
  FOUNTAIN_BOOTSTRAP_KEY: z
    .string()
    .regex(API_KEY_PATTERN, 'must be ftn_ followed by 64 lowercase hex digits')
    .optional(),
  FOUNTAIN_SESSION_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  PUBLIC_URL: httpUrl,
  FOUNTAIN_SECRET_KEY: z
    .string()
    .regex(/^([0-9a-fA-F]{64}|[A-Za-z0-9+/_-]{43}=?)$/, 'must be 32 bytes as 64 hex digits or base64')
    .optional(),
  FOUNTAIN_SKILLS_GIT_URL: z
    .string()
    .regex(/^https:\/\/\S+$/, 'must be an https:// URL')
    .optional(),
  FOUNTAIN_MODEL_PRICES: text,
  // Sandboxes and conversations
  SANDBOX_PROVIDER: z
    .string()
    .refine(isKnownProvider, `must be one of ${KNOWN_PROVIDERS.join(', ')}`)
    .optional(),
  SANDBOX_RUNNERS_ENABLED: bool(true),
  SANDBOX_IDLE_TIMEOUT_MINUTES: wholeNumber(60, 0, 525_600, 'minutes (0 = off)'),
  SANDBOX_MAX_LIFETIME_HOURS: wholeNumber(0, 0, 87_600, 'hours (0 = off)'),
  FOUNTAIN_IDLE_SWEEP_SECONDS: wholeNumber(60, 1, 86_400, 'seconds'),
  FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS: wholeNumber(300, 1, 86_400, 'seconds'),
  FOUNTAIN_RUNNER_RECOVERY_SECONDS: wholeNumber(120, 1, 86_400, 'seconds'),
  FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS: wholeNumber(ENGINE_DEFAULTS.installTimeoutMs / 1000, 1, 86_400, 'seconds'),
  FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS: wholeNumber(ENGINE_DEFAULTS.acpCallTimeoutMs / 1000, 1, 86_400, 'seconds'),
  FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS: wholeNumber(
    ENGINE_DEFAULTS.turnSilenceTimeoutMs / 1000,
    0,
    86_400,
    'seconds (0 = never)',
  ),
  // Capacity queue
  FOUNTAIN_MAX_RUNNING_TURNS: wholeNumber(ENGINE_DEFAULTS.maxRunningTurns, 1, 10_000, 'turns'),
  FOUNTAIN_MAX_SANDBOXES: wholeNumber(ENGINE_DEFAULTS.maxSandboxes, 1, 10_000, 'sandboxes'),
  FOUNTAIN_QUEUE_EXPIRY_SECONDS: wholeNumber(ENGINE_DEFAULTS.queueExpiryMs / 1000, 1, 86_400, 'seconds'),
  // Runner hub
  FOUNTAIN_RUNNER_HEARTBEAT_MS: wholeNumber(20_000, 1, 3_600_000, 'milliseconds'),
  FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: wholeNumber(30_000, 1, 3_600_000, 'milliseconds'),
  // E2B
  E2B_API_KEY: text,
  E2B_BASE_URL: httpUrl,
  E2B_SANDBOX_URL: httpUrl,
  E2B_TEMPLATE: text,
  E2B_USER: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, 'must be a Linux user name')
    .optional(),
  // Daytona
  DAYTONA_API_KEY: text,
  DAYTONA_API_URL: httpUrl,
  DAYTONA_SNAPSHOT: text,
  // Sprites
  SPRITES_TOKEN: text,
  SPRITES_BASE_URL: httpUrl,
  SPRITES_TIMEOUT_MS: wholeNumber(30_000, 1, 600_000, 'milliseconds'),
  // Credential brokerage
  BROKER_ALLOW_UNENFORCED: bool(false),
  // Team schedules
  FOUNTAIN_SCHEDULE_TICK_MS: wholeNumber(60_000, 1, 86_400_000, 'milliseconds'),
  FOUNTAIN_SCHEDULE_SNOOZE_MS: wholeNumber(30_000, 1, 86_400_000, 'milliseconds'),
  FOUNTAIN_SCHEDULE_PATIENCE_MS: wholeNumber(30 * 60_000, 1, 7 * 86_400_000, 'milliseconds'),
  // Server nodes
  FOUNTAIN_NODE_HEARTBEAT_MS: wholeNumber(ENGINE_DEFAULTS.nodeHeartbeatMs, 10, 3_600_000, 'milliseconds'),
  FOUNTAIN_NODE_EXPIRY_MS: wholeNumber(ENGINE_DEFAULTS.nodeExpiryMs, 20, 86_400_000, 'milliseconds'),
});

export type ServerEnvVar = keyof typeof envSchema.shape;

/** Every variable the server reads; docs/configuration.md, .env.example and .env.compose.example list each. */
export const SERVER_ENV_VARS = Object.keys(envSchema.shape) as ServerEnvVar[];

/** Where a variable belongs; the docs' sections follow these groups. */
export const SERVER_ENV_GROUPS: Readonly<Record<string, readonly ServerEnvVar[]>> = {
  server: [
    'FOUNTAIN_DATABASE_URL',
    'FOUNTAIN_BOOTSTRAP_KEY',
    'FOUNTAIN_SESSION_SECRET',
    'PUBLIC_URL',
    'FOUNTAIN_SECRET_KEY',
    'FOUNTAIN_SKILLS_GIT_URL',
    'FOUNTAIN_PGLITE_TEMPLATE_DIR',
    'FOUNTAIN_MODEL_PRICES',
  ],
  sandboxes: [
    'SANDBOX_PROVIDER',
    'SANDBOX_RUNNERS_ENABLED',
    'SANDBOX_IDLE_TIMEOUT_MINUTES',
    'SANDBOX_MAX_LIFETIME_HOURS',
    'FOUNTAIN_IDLE_SWEEP_SECONDS',
    'FOUNTAIN_PERMISSION_ASK_TIMEOUT_SECONDS',
    'FOUNTAIN_RUNNER_RECOVERY_SECONDS',
    'FOUNTAIN_ADAPTER_INSTALL_TIMEOUT_SECONDS',
    'FOUNTAIN_ACP_HANDSHAKE_TIMEOUT_SECONDS',
    'FOUNTAIN_TURN_SILENCE_TIMEOUT_SECONDS',
    'FOUNTAIN_MAX_RUNNING_TURNS',
    'FOUNTAIN_MAX_SANDBOXES',
    'FOUNTAIN_QUEUE_EXPIRY_SECONDS',
    'FOUNTAIN_RUNNER_HEARTBEAT_MS',
    'FOUNTAIN_RUNNER_CALL_TIMEOUT_MS',
  ],
  e2b: ['E2B_API_KEY', 'E2B_BASE_URL', 'E2B_SANDBOX_URL', 'E2B_TEMPLATE', 'E2B_USER'],
  daytona: ['DAYTONA_API_KEY', 'DAYTONA_API_URL', 'DAYTONA_SNAPSHOT'],
  sprites: ['SPRITES_TOKEN', 'SPRITES_BASE_URL', 'SPRITES_TIMEOUT_MS'],
  brokerage: ['BROKER_ALLOW_UNENFORCED'],
  schedules: ['FOUNTAIN_SCHEDULE_TICK_MS', 'FOUNTAIN_SCHEDULE_SNOOZE_MS', 'FOUNTAIN_SCHEDULE_PATIENCE_MS'],
  nodes: ['FOUNTAIN_NODE_HEARTBEAT_MS', 'FOUNTAIN_NODE_EXPIRY_MS'],
};

/** The provider options each hosted adapter is built from; null when its credential is unset. */
export interface HostedProviderOptions {
  readonly e2b: E2BOptions | null;
  readonly daytona: DaytonaOptions | null;
  readonly sprites: SpritesOptions | null;
}

export interface ServerConfig extends DatabaseEnv {
  /** SANDBOX_RUNNERS_ENABLED: whether daemons may dial in at all. */
  readonly runnersEnabled: boolean;
  /** FOUNTAIN_BOOTSTRAP_KEY: used as the owner's first key on first start instead of a minted one. */
  readonly bootstrapKey: string | undefined;
  /** FOUNTAIN_RUNNER_HEARTBEAT_MS: interval of the runner heartbeat (stamps last_seen_at, then pings). */
  readonly runnerHeartbeatMs: number;
  /** FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: default deadline of one call to a runner. */
  readonly runnerCallTimeoutMs: number;
  /** FOUNTAIN_SESSION_SECRET: signs web session cookies; unset = a secret kept in the data directory. */
  readonly sessionSecret: string | undefined;
  /** PUBLIC_URL without a trailing slash: the sandbox's FOUNTAIN_BASE_URL. */
  readonly publicUrl: string | null;
  /** SANDBOX_PROVIDER: the default for agents that pin none (`runner` when unset). */
  readonly sandboxProvider: KnownProvider;
  /** Whether SANDBOX_PROVIDER was set: only an explicit default is held to its credential at boot. */
  readonly sandboxProviderExplicit: boolean;
  /** SANDBOX_MAX_LIFETIME_HOURS in ms; 0 = off. */
  readonly maxLifetimeMs: number;
  /** The engine's tunables (idle, sweep, ask timeouts, PUBLIC_URL) as the engine's own mapper reads them. */
  readonly engine: Omit<EngineConfig, 'demoAgentArgv'>;
  readonly providers: HostedProviderOptions;
  /** BROKER_ALLOW_UNENFORCED: lets a brokered launch run on a provider without network_policy (development only). */
  readonly brokerAllowUnenforced: boolean;
  /** FOUNTAIN_SCHEDULE_TICK_MS / _SNOOZE_MS / _PATIENCE_MS: the scheduler's claim interval, busy retry and give-up window. */
  readonly scheduleTickMs: number;
  readonly scheduleSnoozeMs: number;
  readonly schedulePatienceMs: number;
  /** FOUNTAIN_NODE_HEARTBEAT_MS / _EXPIRY_MS: a node's liveness stamp, and how stale it may be before its turns are adopted. */
  readonly nodeHeartbeatMs: number;
  readonly nodeExpiryMs: number;
  /** FOUNTAIN_MODEL_PRICES over the built-in table: what the model gateway costs calls with. */
  readonly modelPrices: PriceTable;
}

export { ConfigError };

/** The environment with only our variables, trimmed, blanks removed: what every mapper below sees. */
export function cleanEnv(env: Env): Record<ServerEnvVar, string | undefined> {
  const picked = {} as Record<ServerEnvVar, string | undefined>;
  for (const name of SERVER_ENV_VARS) {
    const v = env[name];
    picked[name] = v === undefined || v.trim() === '' ? undefined : v.trim();
  }
  return picked;
}

/** Names the first variable a mapper's message mentions, so its refusal still points somewhere. */
function blame(message: string, candidates: readonly string[]): ConfigError {
  const variable = candidates.find((v) => message.includes(v)) ?? candidates[0]!;
  const detail = message.startsWith(variable) ? message.slice(variable.length).replace(/^[:\s]+/, '') : message;
  return new ConfigError(variable, detail);
}

export function parseServerConfig(env: Env): ServerConfig {
  const picked = cleanEnv(env);
  const parsed = envSchema.safeParse(picked);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(String(issue.path[0] ?? 'environment'), issue.message);
  }
  const c = parsed.data;
  // A node must be able to miss a beat (a busy event loop, a slow database) without losing its turns.
  if (c.FOUNTAIN_NODE_EXPIRY_MS < 2 * c.FOUNTAIN_NODE_HEARTBEAT_MS) {
    throw new ConfigError(
      'FOUNTAIN_NODE_EXPIRY_MS',
      `must be at least twice FOUNTAIN_NODE_HEARTBEAT_MS (${c.FOUNTAIN_NODE_HEARTBEAT_MS})`,
    );
  }

  const prices = parsePrices(c.FOUNTAIN_MODEL_PRICES);
  if (!prices.ok) throw blame(prices.message, ['FOUNTAIN_MODEL_PRICES']);

  const engine = engineConfigFromEnv(picked);
  if (!engine.ok) throw blame(engine.message, SERVER_ENV_GROUPS.sandboxes!);

  const daytona = daytonaOptionsFromEnv(picked);
  if (!daytona.ok && daytona.error.code !== 'missing_api_key')
    throw blame(daytona.error.message, SERVER_ENV_GROUPS.daytona!);
  const sprites = spritesOptionsFromEnv(picked);
  if (!sprites.ok) throw blame(sprites.error.detail, SERVER_ENV_GROUPS.sprites!);

  return {
    runnersEnabled: c.SANDBOX_RUNNERS_ENABLED,
    ...databaseEnv(picked),
    bootstrapKey: c.FOUNTAIN_BOOTSTRAP_KEY,
    runnerHeartbeatMs: c.FOUNTAIN_RUNNER_HEARTBEAT_MS,
    runnerCallTimeoutMs: c.FOUNTAIN_RUNNER_CALL_TIMEOUT_MS,
    sessionSecret: c.FOUNTAIN_SESSION_SECRET,
    publicUrl: engine.value.publicUrl,
    sandboxProvider: (c.SANDBOX_PROVIDER as KnownProvider | undefined) ?? 'runner',
    sandboxProviderExplicit: c.SANDBOX_PROVIDER !== undefined,
    maxLifetimeMs: c.SANDBOX_MAX_LIFETIME_HOURS * 3_600_000,
    engine: engine.value,
    providers: {
      e2b: e2bOptionsFromEnv(picked),
      daytona: daytona.ok ? daytona.value : null,
      sprites: sprites.value.token === undefined ? null : sprites.value,
    },
    brokerAllowUnenforced: c.BROKER_ALLOW_UNENFORCED,
    scheduleTickMs: c.FOUNTAIN_SCHEDULE_TICK_MS,
    scheduleSnoozeMs: c.FOUNTAIN_SCHEDULE_SNOOZE_MS,
    schedulePatienceMs: c.FOUNTAIN_SCHEDULE_PATIENCE_MS,
    nodeHeartbeatMs: c.FOUNTAIN_NODE_HEARTBEAT_MS,
    nodeExpiryMs: c.FOUNTAIN_NODE_EXPIRY_MS,
    modelPrices: prices.value,
  };
}
