/**
 * Runner registration: a short-lived, single-use token minted for "Add runner", exchanged once by the new
 * runner for a runner-scoped API key. The token's plaintext is shown once and only its hash is stored.
 */
import { createHash, randomBytes } from 'node:crypto';
import { and, eq, gt, isNull } from 'drizzle-orm';
import { pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { z } from 'zod';
import type { Db } from '../store/db.ts';
import { createApiKey } from '../core/keys-store.ts';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** Migration 0063. */
export const runnerEnrollments = pgTable('runner_enrollments', {
  id: uuid('id').primaryKey().defaultRandom(),
  accountId: uuid('account_id').notNull(),
  tokenHash: text('token_hash').notNull().unique(),
  expiresAt: ts('expires_at').notNull(),
  usedAt: ts('used_at'),
  runnerName: text('runner_name'),
  /** The runner key this enrollment minted (migration 0074): that key may connect as runnerName only. */
  apiKeyId: uuid('api_key_id'),
  createdAt: ts('created_at').notNull().defaultNow(),
});

/** Long enough to copy a command to another machine and run it; short enough that a leaked one is stale. */
export const REGISTRATION_TTL_MS = 60 * 60 * 1000;

export const REGISTRATION_TOKEN_PATTERN = /^ftr_[0-9a-f]{48}$/;
export const registrationToken = z
  .string()
  .regex(REGISTRATION_TOKEN_PATTERN, 'a registration token is ftr_ followed by 48 hex digits');
export const runnerName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'a runner name is 1-63 of a-z 0-9 . _ - and starts with a letter or digit');

const hash = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

export async function mintRegistration(
  db: Db,
  accountId: string,
  now = new Date(),
): Promise<{ token: string; expiresAt: Date }> {
  const token = `ftr_${randomBytes(24).toString('hex')}`;
  const expiresAt = new Date(now.getTime() + REGISTRATION_TTL_MS);
  await db.insert(runnerEnrollments).values({ accountId, tokenHash: hash(token), expiresAt });
  return { token, expiresAt };
}

export type RedeemResult =
  | { ok: true; apiKey: string; accountId: string }
  | { ok: false; reason: 'unknown' | 'spent_or_expired' };

/** Spends the token (exactly once, even when two runners race) and mints the runner's key. */
export async function redeemRegistration(db: Db, token: string, name: string, now = new Date()): Promise<RedeemResult> {
  const [spent] = await db
    .update(runnerEnrollments)
    .set({ usedAt: now, runnerName: name })
    .where(
      and(
        eq(runnerEnrollments.tokenHash, hash(token)),
        isNull(runnerEnrollments.usedAt),
        gt(runnerEnrollments.expiresAt, now),
      ),
    )
    .returning({ accountId: runnerEnrollments.accountId });
  if (!spent) {
    const [known] = await db
      .select({ id: runnerEnrollments.id })
      .from(runnerEnrollments)
      .where(eq(runnerEnrollments.tokenHash, hash(token)));
    return { ok: false, reason: known ? 'spent_or_expired' : 'unknown' };
  }
  const key = await createApiKey(db, { accountId: spent.accountId, name: `runner ${name}`, scopes: ['runner'] });
  // Should this fail, the key is bound to nothing, and an unbound runner key is refused at the socket.
  await db
    .update(runnerEnrollments)
    .set({ apiKeyId: key.row.id })
    .where(eq(runnerEnrollments.tokenHash, hash(token)));
  return { ok: true, apiKey: key.key, accountId: spent.accountId };
}

/** The runner name a runner key was issued for; undefined when no enrollment minted it. */
export async function runnerNameOfKey(db: Db, apiKeyId: string): Promise<string | undefined> {
  const [row] = await db
    .select({ name: runnerEnrollments.runnerName })
    .from(runnerEnrollments)
    .where(eq(runnerEnrollments.apiKeyId, apiKeyId));
  return row?.name ?? undefined;
}
