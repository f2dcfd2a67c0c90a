/**
 * Daytona adapter configuration: the constructor options object, and reading it from the
 * environment (`DAYTONA_API_KEY`, `DAYTONA_API_URL`, `DAYTONA_SNAPSHOT`; a blank value equals unset).
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Result } from '../../sandbox/index.ts';
import { err, ok } from '../../sandbox/index.ts';

export const DEFAULT_API_URL = 'https://app.daytona.io/api';

export interface DaytonaOptions {
  /** `DAYTONA_API_KEY`: the organisation API key, sent as a bearer token. */
  readonly apiKey: string;
  /** `DAYTONA_API_URL`; default `https://app.daytona.io/api`. */
  readonly apiUrl?: string | undefined;
  /** `DAYTONA_SNAPSHOT`: the snapshot new sandboxes boot from; unset = the organisation default. */
  readonly snapshot?: string | undefined;
  /** How often an attached command's journal is polled; Daytona's own cadence is 1 s. */
  readonly pollIntervalMs?: number;
  /** How often a lifecycle transition (create, stop, start, delete) is polled. */
  readonly statePollMs?: number;
  /** How long a lifecycle transition may take before the call gives up as `unavailable`. */
  readonly lifecycleTimeoutMs?: number;
  /** Budget of one ordinary HTTP request. */
  readonly requestTimeoutMs?: number;
  /** How long spawn waits for the shim's start acknowledgement. */
  readonly spawnAckTimeoutMs?: number;
  /** Consecutive failed journal polls before a stream ends with `error`. */
  readonly maxPollFailures?: number;
  readonly logger?: Logger;
}

const blankToUndefined = (v: string | undefined): string | undefined =>
  v === undefined || v.trim() === '' ? undefined : v.trim();

const EnvSchema = z.object({
  DAYTONA_API_KEY: z.string().optional().transform(blankToUndefined),
  DAYTONA_API_URL: z
    .string()
    .optional()
    .transform(blankToUndefined)
    .refine((v) => v === undefined || /^https?:\/\//.test(v), { message: 'DAYTONA_API_URL must be an http(s) URL' }),
  DAYTONA_SNAPSHOT: z.string().optional().transform(blankToUndefined),
});

export type ConfigError = { readonly code: 'missing_api_key' | 'invalid_config'; readonly message: string };

/** Options from the environment; `missing_api_key` when the provider is simply off. */
export function daytonaOptionsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): Result<DaytonaOptions, ConfigError> {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    return err({ code: 'invalid_config', message: parsed.error.issues.map((i) => i.message).join('; ') });
  }
  const { DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_SNAPSHOT } = parsed.data;
  if (!DAYTONA_API_KEY) return err({ code: 'missing_api_key', message: 'DAYTONA_API_KEY is not set' });
  return ok({ apiKey: DAYTONA_API_KEY, apiUrl: DAYTONA_API_URL, snapshot: DAYTONA_SNAPSHOT });
}

export interface ResolvedConfig {
  readonly apiUrl: string;
  readonly snapshot: string | undefined;
  readonly pollIntervalMs: number;
  readonly statePollMs: number;
  readonly lifecycleTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly spawnAckTimeoutMs: number;
  readonly maxPollFailures: number;
}

const positive = (v: number | undefined, d: number) => (v !== undefined && Number.isFinite(v) && v > 0 ? v : d);

/** Fills defaults; blank strings count as unset here too, so callers may pass env values straight in. */
export function resolveConfig(o: DaytonaOptions): ResolvedConfig {
  return {
    apiUrl: blankToUndefined(o.apiUrl) ?? DEFAULT_API_URL,
    snapshot: blankToUndefined(o.snapshot),
    pollIntervalMs: positive(o.pollIntervalMs, 1000),
    statePollMs: positive(o.statePollMs, 1000),
    lifecycleTimeoutMs: positive(o.lifecycleTimeoutMs, 300_000),
    requestTimeoutMs: positive(o.requestTimeoutMs, 30_000),
    spawnAckTimeoutMs: positive(o.spawnAckTimeoutMs, 30_000),
    maxPollFailures: positive(o.maxPollFailures, 30),
  };
}
