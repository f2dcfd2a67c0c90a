/**
 * The inference_credentials table and its queries. Rows hold only sealed values; opening them is the
 * service's job.
 */
import { and, eq } from 'drizzle-orm';
import { pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import type { EngineDb } from '../store/engine-db.ts';
import { accounts } from '../store/schema.ts';
import type { CredentialProvider } from './providers.ts';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const inferenceCredentials = pgTable(
  'inference_credentials',
  {
    accountId: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    provider: text('provider').notNull().$type<CredentialProvider>(),
    sealed: text('sealed').notNull(),
    baseUrl: text('base_url'),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.provider] })],
);

export type CredentialRow = typeof inferenceCredentials.$inferSelect;

export async function upsertCredential(
  db: EngineDb,
  row: { accountId: string; provider: CredentialProvider; sealed: string; baseUrl: string | null },
): Promise<CredentialRow> {
  const now = new Date();
  const [r] = await db
    .insert(inferenceCredentials)
    .values({ ...row, createdAt: now, updatedAt: now })
    .onConflictDoUpdate({
      target: [inferenceCredentials.accountId, inferenceCredentials.provider],
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
    .orderBy(inferenceCredentials.provider);
}

export async function deleteCredential(
  db: EngineDb,
  accountId: string,
  provider: CredentialProvider,
): Promise<boolean> {
  const rows = await db
    .delete(inferenceCredentials)
    .where(and(eq(inferenceCredentials.accountId, accountId), eq(inferenceCredentials.provider, provider)))
    .returning({ provider: inferenceCredentials.provider });
  return rows.length > 0;
}
