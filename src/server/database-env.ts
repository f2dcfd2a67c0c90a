/**
 * The two settings that say where the server's database is, readable without the rest of the
 * configuration: `fountain server` and `up` begin the database's open before the server's modules load.
 */
import { z } from 'zod';
import { ConfigError } from './config-error.ts';

/** Part of the server's environment schema (config.ts spreads it in): one definition of each. */
export const DATABASE_ENV_SCHEMA = {
  FOUNTAIN_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\/\S+$/, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  FOUNTAIN_PGLITE_TEMPLATE_DIR: z
    .string()
    .refine((v) => v === 'off' || v.startsWith('/'), 'must be an absolute directory or off')
    .optional(),
};

export interface DatabaseEnv {
  /** FOUNTAIN_DATABASE_URL: a real PostgreSQL; embedded PGlite when unset. */
  readonly databaseUrl: string | undefined;
  /** FOUNTAIN_PGLITE_TEMPLATE_DIR: where new embedded databases are copied from; null = off, undefined = the user's cache. */
  readonly pgliteTemplateDir: string | null | undefined;
}

const schema = z.object(DATABASE_ENV_SCHEMA);

/** Read as the whole configuration reads them (trimmed, a blank one unset); a bad one throws ConfigError. */
export function databaseEnv(env: Readonly<Record<string, string | undefined>>): DatabaseEnv {
  const pick = (name: keyof typeof DATABASE_ENV_SCHEMA) => env[name]?.trim() || undefined;
  const parsed = schema.safeParse({
    FOUNTAIN_DATABASE_URL: pick('FOUNTAIN_DATABASE_URL'),
    FOUNTAIN_PGLITE_TEMPLATE_DIR: pick('FOUNTAIN_PGLITE_TEMPLATE_DIR'),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(String(issue.path[0] ?? 'environment'), issue.message);
  }
  const c = parsed.data;
  return {
    databaseUrl: c.FOUNTAIN_DATABASE_URL,
    pgliteTemplateDir: c.FOUNTAIN_PGLITE_TEMPLATE_DIR === 'off' ? null : c.FOUNTAIN_PGLITE_TEMPLATE_DIR,
  };
}
