/**
 * The Drizzle schema: one table definition per stored entity, mirrored by the SQL files in migrations/.
 * New entities (agents, conversations, turns, events) add a table here and a numbered migration.
 */
import { sql } from 'drizzle-orm';
import { bigserial, boolean, index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const ACCOUNT_ROLES = ['owner', 'user'] as const;
export type AccountRole = (typeof ACCOUNT_ROLES)[number];

export const accounts = pgTable('accounts', {
  id: uuid('id').primaryKey().defaultRandom(),
  email: text('email').unique(),
  name: text('name').notNull(),
  role: text('role', { enum: ACCOUNT_ROLES }).notNull().default('user'),
  /** Launches need a backend with network_policy. */
  credentialBrokerage: boolean('credential_brokerage').notNull().default(false),
  createdAt: ts('created_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

/** `sprite` is the per-conversation sandbox token's scope; only the engine mints it.
 * `runner` may dial the runner socket and nothing else (a runner added with a registration token). */
export const API_KEY_SCOPES = ['full', 'sandbox', 'sprite', 'runner'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

export const apiKeys = pgTable(
  'api_keys',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    accountId: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    prefix: text('prefix').notNull(),
    /** SHA-256 of the whole key, lowercase hex: the plaintext is never stored. */
    keyHash: text('key_hash').notNull().unique(),
    scopes: text('scopes').array().notNull().$type<ApiKeyScope[]>(),
    createdAt: ts('created_at').notNull().defaultNow(),
    lastUsedAt: ts('last_used_at'),
    expiresAt: ts('expires_at'),
    revokedAt: ts('revoked_at'),
    /** Set on a sandbox token: the conversation it was minted for (the FK lives in migration 0055). */
    conversationId: uuid('conversation_id'),
  },
  (t) => [index('api_keys_account_idx').on(t.accountId)],
);

export const runners = pgTable(
  'runners',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    accountId: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    hostname: text('hostname'),
    os: text('os'),
    arch: text('arch'),
    version: text('version'),
    root: text('root'),
    /** As reported at the last connection (migration 0073); null: not reported. */
    backend: text('backend'),
    capabilities: text('capabilities').array(),
    connectedAt: ts('connected_at'),
    lastSeenAt: ts('last_seen_at'),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('runners_account_name_idx').on(t.accountId, t.name)],
);

export const AUDIT_ACTORS = ['api', 'ui', 'system', 'sandbox'] as const;
export type AuditActor = (typeof AUDIT_ACTORS)[number];

export const auditLog = pgTable(
  'audit_log',
  {
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    accountId: uuid('account_id').references(() => accounts.id, { onDelete: 'cascade' }),
    actor: text('actor', { enum: AUDIT_ACTORS }).notNull(),
    action: text('action').notNull(),
    subjectId: text('subject_id'),
    data: jsonb('data').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [index('audit_log_account_idx').on(t.accountId, t.id)],
);

export const schema = { accounts, apiKeys, runners, auditLog };
export type Schema = typeof schema;

export type Account = typeof accounts.$inferSelect;
export type ApiKey = typeof apiKeys.$inferSelect;
export type Runner = typeof runners.$inferSelect;
export type AuditEntry = typeof auditLog.$inferSelect;
