/**
 * Account queries: the owner created at bootstrap and the accounts the owner adds.
 */
import { eq } from 'drizzle-orm';
import type { Db } from '../store/db.ts';
import { accounts, type Account, type AccountRole } from '../store/schema.ts';
import { keysChanged } from '../core/key-cache-store.ts';

export async function createAccount(
  db: Db,
  input: { name: string; email?: string | null; role: AccountRole },
): Promise<Account> {
  const [row] = await db
    .insert(accounts)
    .values({ name: input.name, email: input.email ?? null, role: input.role })
    .returning();
  return row!;
}

export async function findAccount(db: Db, id: string): Promise<Account | undefined> {
  const [row] = await db.select().from(accounts).where(eq(accounts.id, id));
  return row;
}

export async function findAccountByEmail(db: Db, email: string): Promise<Account | undefined> {
  const [row] = await db.select().from(accounts).where(eq(accounts.email, email));
  return row;
}

export async function findOwner(db: Db): Promise<Account | undefined> {
  const [row] = await db.select().from(accounts).where(eq(accounts.role, 'owner')).limit(1);
  return row;
}

/** Turns the account's credential brokerage on or off; returns the updated row. */
export async function setCredentialBrokerage(db: Db, id: string, on: boolean): Promise<Account | undefined> {
  try {
    const [row] = await db
      .update(accounts)
      .set({ credentialBrokerage: on, updatedAt: new Date() })
      .where(eq(accounts.id, id))
      .returning();
    return row;
  } finally {
    // Authenticated principals carry the account row (key-cache-store.ts).
    await keysChanged();
  }
}
