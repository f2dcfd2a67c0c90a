/**
 * The inference_credentials table and its queries. Rows hold only sealed values; opening them is the
 * service's job. A row is one credential of one named set (`default` unless named).
 */
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import type { EngineDb } from '../store/engine-db.ts';
import { agents } from '../store/conversation-schema.ts';
import { accounts } from '../store/schema.ts';
import type { CredentialProvider } from './providers.ts';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** The set every credential stored before sets existed belongs to, and the one an agent uses unless told. */
export const DEFAULT_SET = 'default';

export const inferenceCredentials = pgTable(
  'inference_credentials',
  {
    accountId: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    provider: text('provider').notNull().$type<CredentialProvider>(),
    /** The set's name (migration 0085). */
    name: text('name').notNull().default(DEFAULT_SET),
    sealed: text('sealed').notNull(),
    baseUrl: text('base_url'),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.provider, t.name] })],
);

export type CredentialRow = typeof inferenceCredentials.$inferSelect;

export async function upsertCredential(
  db: EngineDb,
  row: { accountId: string; provider: CredentialProvider; name: string; sealed: string; baseUrl: string | null },
): Promise<CredentialRow> {
  const now = new Date();
  const [r] = await db
    .insert(inferenceCredentials)
    .values({ ...row, createdAt: now, updatedAt: now })
    .onConflictDoUpdate({
      target: [inferenceCredentials.accountId, inferenceCredentials.provider, inferenceCredentials.name],
      set: { sealed: row.sealed, baseUrl: row.baseUrl, updatedAt: now },
    })
    .returning();
  return r!;
}

export function listCredentials(db: EngineDb, accountId: string): Promise<CredentialRow[]> {
  return db
    .select()
    .from(inferenceCredentials)
    .where(eq(inferenceCredentials.accountId, accountId))
    .orderBy(asc(inferenceCredentials.provider), asc(inferenceCredentials.name));
}

/**
 * The rows of `providers` in the set `set`, or, given an agent id, in the set that agent uses now: read
 * in the same statement, so an agent switched to another set uses it from its next model call.
 */
export function credentialsOfSet(
  db: EngineDb,
  accountId: string,
  providers: readonly CredentialProvider[],
  set: string | { readonly agentId: string | null },
): Promise<CredentialRow[]> {
  const name =
    typeof set === 'string'
      ? sql`${set}`
      : set.agentId === null
        ? sql`${DEFAULT_SET}`
        : sql`coalesce((select ${agents.credentialSet} from ${agents} where ${agents.id} = ${set.agentId}), ${DEFAULT_SET})`;
  if (providers.length === 0) return Promise.resolve([]);
  return db
    .select()
    .from(inferenceCredentials)
    .where(
      and(
        eq(inferenceCredentials.accountId, accountId),
        inArray(inferenceCredentials.provider, [...providers]),
        sql`${inferenceCredentials.name} = ${name}`,
      ),
    );
}

export async function deleteCredential(
  db: EngineDb,
  accountId: string,
  provider: CredentialProvider,
  name: string,
): Promise<boolean> {
  const rows = await db
    .delete(inferenceCredentials)
    .where(
      and(
        eq(inferenceCredentials.accountId, accountId),
        eq(inferenceCredentials.provider, provider),
        eq(inferenceCredentials.name, name),
      ),
    )
    .returning({ provider: inferenceCredentials.provider });
  return rows.length > 0;
}

/** The account's agents that use the set `name` (the caller decides which of them need the provider). */
export function agentsOfSet(db: EngineDb, accountId: string, name: string) {
  return db
    .select({
      id: agents.id,
      name: agents.name,
      runtime: agents.runtime,
      model: agents.model,
      customRuntime: agents.customRuntime,
    })
    .from(agents)
    .where(and(eq(agents.accountId, accountId), eq(agents.credentialSet, name)))
    .orderBy(asc(agents.name));
}
