/**
 * The server's environment configuration, parsed once at boot with zod. A blank variable
 * counts as unset; a bad one stops the boot with an error naming it.
 */
import { z } from 'zod';
import { API_KEY_PATTERN } from './store/keys.ts';

export type Env = Readonly<Record<string, string | undefined>>;

const TRUE = ['true', '1', 'yes', 'on'];
const FALSE = ['false', '0', 'no', 'off'];

const bool = (fallback: boolean) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const s = v.trim().toLowerCase();
      if (TRUE.includes(s)) return true;
      if (FALSE.includes(s)) return false;
      ctx.addIssue({ code: 'custom', message: `must be one of ${[...TRUE, ...FALSE].join(', ')}` });
      return z.NEVER;
    });

const positiveMs = (fallback: number) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined) return fallback;
      const n = Number(v.trim());
      if (!Number.isInteger(n) || n <= 0) {
        ctx.addIssue({ code: 'custom', message: 'must be a positive whole number of milliseconds' });
        return z.NEVER;
      }
      return n;
    });

const envSchema = z.object({
  SANDBOX_RUNNERS_ENABLED: bool(true),
  FOUNTAIN_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\/\S+$/, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  FOUNTAIN_BOOTSTRAP_KEY: z.string().regex(API_KEY_PATTERN, 'must be ftn_ followed by 64 lowercase hex digits').optional(),
  FOUNTAIN_RUNNER_HEARTBEAT_MS: positiveMs(20_000),
  FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: positiveMs(30_000),
  FOUNTAIN_SCHEDULE_TICK_MS: positiveMs(60_000),
  FOUNTAIN_SCHEDULE_SNOOZE_MS: positiveMs(30_000),
  FOUNTAIN_SCHEDULE_PATIENCE_MS: positiveMs(30 * 60_000),
});

export interface ServerConfig {
  /** SANDBOX_RUNNERS_ENABLED: whether daemons may dial in at all. */
  readonly runnersEnabled: boolean;
  /** FOUNTAIN_DATABASE_URL: a real PostgreSQL; embedded PGlite when unset. */
  readonly databaseUrl: string | undefined;
  /** FOUNTAIN_BOOTSTRAP_KEY: used as the owner's first key on first start instead of a minted one. */
  readonly bootstrapKey: string | undefined;
  /** FOUNTAIN_RUNNER_HEARTBEAT_MS: interval of the runner heartbeat (stamps last_seen_at, then pings). */
  readonly runnerHeartbeatMs: number;
  /** FOUNTAIN_RUNNER_CALL_TIMEOUT_MS: default deadline of one call to a runner. */
  readonly runnerCallTimeoutMs: number;
  /** FOUNTAIN_SCHEDULE_TICK_MS / _SNOOZE_MS / _PATIENCE_MS: the scheduler's claim interval, busy retry and give-up window. */
  readonly scheduleTickMs: number;
  readonly scheduleSnoozeMs: number;
  readonly schedulePatienceMs: number;
}

/** The variables this file reads; docs/configuration.md documents each. */
export const SERVER_ENV_VARS = Object.keys(envSchema.shape) as Array<keyof typeof envSchema.shape>;

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`${variable}: ${detail}`);
    this.name = 'ConfigError';
  }
}

export function parseServerConfig(env: Env): ServerConfig {
  const picked: Record<string, string | undefined> = {};
  for (const name of SERVER_ENV_VARS) {
    const v = env[name];
    picked[name] = v === undefined || v.trim() === '' ? undefined : v.trim();
  }
  const parsed = envSchema.safeParse(picked);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(String(issue.path[0] ?? 'environment'), issue.message);
  }
  const c = parsed.data;
  return {
    runnersEnabled: c.SANDBOX_RUNNERS_ENABLED,
    databaseUrl: c.FOUNTAIN_DATABASE_URL,
    bootstrapKey: c.FOUNTAIN_BOOTSTRAP_KEY,
    runnerHeartbeatMs: c.FOUNTAIN_RUNNER_HEARTBEAT_MS,
    runnerCallTimeoutMs: c.FOUNTAIN_RUNNER_CALL_TIMEOUT_MS,
    scheduleTickMs: c.FOUNTAIN_SCHEDULE_TICK_MS,
    scheduleSnoozeMs: c.FOUNTAIN_SCHEDULE_SNOOZE_MS,
    schedulePatienceMs: c.FOUNTAIN_SCHEDULE_PATIENCE_MS,
  };
}
