/**
 * Sprites adapter configuration: the constructor options and how they are read from the
 * environment (`SPRITES_TOKEN`, `SPRITES_BASE_URL`, `SPRITES_TIMEOUT_MS`; blank equals unset).
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { Private } from '../../sandbox/index.ts';

export const DEFAULT_BASE_URL = 'https://api.sprites.dev';
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Fountain names its sprites `fountain-…`; the listing uses this prefix as its namespace. */
export const DEFAULT_NAME_PREFIX = 'fountain-';

export interface SpritesOptions {
  /** The bearer token; kept in a Private box from here on. Blank means unset. */
  readonly token?: string | Private<string>;
  /** Default `https://api.sprites.dev`; `wss:`/`ws:` for exec sockets is derived from it. */
  readonly baseUrl?: string;
  /** Per REST request and per WebSocket handshake; default 30 s. */
  readonly timeoutMs?: number;
  /** The namespace `listAllNames` pages through; default `fountain-`. */
  readonly namePrefix?: string;
  /** How long spawn waits for the `session_info` acknowledgment; default `timeoutMs`. */
  readonly ackTimeoutMs?: number;
  /** Sprites' page size cap is 50. */
  readonly pageSize?: number;
  readonly logger?: Logger;
}

export interface ResolvedSpritesConfig {
  readonly token: Private<string> | null;
  readonly baseUrl: URL;
  readonly timeoutMs: number;
  readonly namePrefix: string;
  readonly ackTimeoutMs: number;
  readonly pageSize: number;
  readonly logger: Logger | undefined;
}

const blankToUndefined = (v: string | undefined): string | undefined =>
  v === undefined || v.trim() === '' ? undefined : v.trim();

const envSchema = z.object({
  SPRITES_TOKEN: z.string().optional().transform(blankToUndefined),
  SPRITES_BASE_URL: z
    .string()
    .optional()
    .transform(blankToUndefined)
    .pipe(z.url({ protocol: /^https?$/ }).optional()),
  SPRITES_TIMEOUT_MS: z
    .string()
    .optional()
    .transform(blankToUndefined)
    .pipe(
      z
        .string()
        .regex(/^[0-9]+$/)
        .transform(Number)
        .pipe(z.number().int().positive().max(600_000))
        .optional(),
    ),
});

export type ConfigError = { readonly code: 'invalid_config'; readonly detail: string };

/** Reads the adapter options from an environment; a malformed value is an error naming the variable. */
export function spritesOptionsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): { ok: true; value: SpritesOptions } | { ok: false; error: ConfigError } {
  const parsed = envSchema.safeParse({
    SPRITES_TOKEN: env.SPRITES_TOKEN,
    SPRITES_BASE_URL: env.SPRITES_BASE_URL,
    SPRITES_TIMEOUT_MS: env.SPRITES_TIMEOUT_MS,
  });
  if (!parsed.success) {
    const names = [...new Set(parsed.error.issues.map((i) => String(i.path[0])))].join(', ');
    return { ok: false, error: { code: 'invalid_config', detail: `invalid ${names}` } };
  }
  const d = parsed.data;
  const value: { -readonly [K in keyof SpritesOptions]: SpritesOptions[K] } = {};
  if (d.SPRITES_TOKEN !== undefined) value.token = new Private(d.SPRITES_TOKEN);
  if (d.SPRITES_BASE_URL !== undefined) value.baseUrl = d.SPRITES_BASE_URL;
  if (d.SPRITES_TIMEOUT_MS !== undefined) value.timeoutMs = d.SPRITES_TIMEOUT_MS;
  return { ok: true, value };
}

/** Applies defaults. A malformed base URL falls back to nothing usable: every call then fails `invalid`. */
export function resolveSpritesConfig(opts: SpritesOptions): ResolvedSpritesConfig {
  const rawToken = opts.token instanceof Private ? opts.token.reveal() : opts.token;
  const token = rawToken === undefined || rawToken.trim() === '' ? null : new Private(rawToken.trim());
  const base = blankToUndefined(opts.baseUrl) ?? DEFAULT_BASE_URL;
  let baseUrl: URL;
  try {
    baseUrl = new URL(base.endsWith('/') ? base : `${base}/`);
  } catch {
    baseUrl = new URL('invalid://sprites-base-url/');
  }
  const timeoutMs = opts.timeoutMs && opts.timeoutMs > 0 ? opts.timeoutMs : DEFAULT_TIMEOUT_MS;
  return {
    token,
    baseUrl,
    timeoutMs,
    namePrefix: opts.namePrefix ?? DEFAULT_NAME_PREFIX,
    ackTimeoutMs: opts.ackTimeoutMs && opts.ackTimeoutMs > 0 ? opts.ackTimeoutMs : timeoutMs,
    pageSize: Math.min(Math.max(opts.pageSize ?? 50, 1), 50),
    logger: opts.logger,
  };
}
