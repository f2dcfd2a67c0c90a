/**
 * The Drizzle tables of agent environments and their sealed secrets, and the
 * shapes of the JSON fields agents and environments carry. Mirrored by migrations/0065_environments.sql.
 */
import { sql } from 'drizzle-orm';
import { jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const NETWORKING_TYPES = ['unrestricted', 'limited'] as const;
export type NetworkingType = (typeof NETWORKING_TYPES)[number];

export interface Packages {
  apt: string[];
  npm: string[];
}

export interface Repository {
  url: string;
  mount_path: string;
  ref?: string | undefined;
  /** The secret (environment or launch-attached) whose value is the clone token. */
  secret_key?: string | undefined;
}

export type Skill =
  | { name: string; content: string }
  | { source: string; ref?: string | undefined; name?: string | undefined };

export type McpServer =
  | { command: string; args?: string[] | undefined; env?: Record<string, string> | undefined }
  | { type: 'http' | 'sse'; url: string; headers?: Record<string, string> | undefined };

export const environments = pgTable(
  'environments',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    accountId: uuid('account_id').notNull(),
    name: text('name').notNull(),
    description: text('description').notNull().default(''),
    packages: jsonb('packages').$type<Packages>().notNull().default(sql`'{"apt": [], "npm": []}'::jsonb`),
    envVars: jsonb('env_vars').$type<Record<string, string>>().notNull().default(sql`'{}'::jsonb`),
    setupScript: text('setup_script').notNull().default(''),
    networkingType: text('networking_type', { enum: NETWORKING_TYPES }).notNull().default('unrestricted'),
    allowedHosts: jsonb('allowed_hosts').$type<string[]>().notNull().default(sql`'[]'::jsonb`),
    repositories: jsonb('repositories').$type<Repository[]>().notNull().default(sql`'[]'::jsonb`),
    checkpointId: text('checkpoint_id'),
    metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    insertedAt: ts('inserted_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('environments_account_name_idx').on(t.accountId, t.name)],
);

export const environmentSecrets = pgTable(
  'environment_secrets',
  {
    environmentId: uuid('environment_id').notNull(),
    key: text('key').notNull(),
    /** AES-256-GCM under the server key, bound to (environment, key); never returned by the API. */
    sealed: text('sealed').notNull(),
    insertedAt: ts('inserted_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.environmentId, t.key] })],
);

export const environmentSchema = { environments, environmentSecrets };

export type Environment = typeof environments.$inferSelect;
export type EnvironmentSecretRow = typeof environmentSecrets.$inferSelect;
