/**
 * One-time sign-in tokens for the web UI: minted for an account, stored as a SHA-256 hash,
 * spent atomically by the first presenter (one UPDATE … RETURNING, so two nodes can't both accept it).
 */
import { createHash, randomBytes } from 'node:crypto';
import { and, eq, gt, isNull } from 'drizzle-orm';
import { pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import type { EngineDb } from '../store/engine-db.ts';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const webSigninTokens = pgTable('web_signin_tokens', {
  tokenHash: text('token_hash').primaryKey(),
  accountId: uuid('account_id').notNull(),
  expiresAt: ts('expires_at').notNull(),
  usedAt: ts('used_at'),
  createdAt: ts('created_at').notNull().defaultNow(),
});

export const SIGNIN_TOKEN_PATTERN = /^fst_[0-9a-f]{48}$/;
const hash = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex');

export async function insertSigninToken(
  db: EngineDb,
  accountId: string,
  ttlMs: number,
  now = new Date(),
): Promise<string> {
  const token = `fst_${randomBytes(24).toString('hex')}`;
  await db
    .insert(webSigninTokens)
    .values({ tokenHash: hash(token), accountId, expiresAt: new Date(now.getTime() + ttlMs) });
  return token;
}

/** Spends a token: its account id, or undefined when it is unknown, expired or already used. */
export async function consumeSigninToken(db: EngineDb, token: string, now = new Date()): Promise<string | undefined> {
  if (!SIGNIN_TOKEN_PATTERN.test(token)) return undefined;
  const rows = await db
    .update(webSigninTokens)
    .set({ usedAt: now })
    .where(
      and(
        eq(webSigninTokens.tokenHash, hash(token)),
        isNull(webSigninTokens.usedAt),
        gt(webSigninTokens.expiresAt, now),
      ),
    )
    .returning({ accountId: webSigninTokens.accountId });
  return rows[0]?.accountId;
}

/** Why a token was not accepted, for the words on the page: never minted here, spent, or out of time. */
export async function signinTokenRefusal(
  db: EngineDb,
  token: string,
  now = new Date(),
): Promise<'unknown' | 'used' | 'expired'> {
  if (!SIGNIN_TOKEN_PATTERN.test(token)) return 'unknown';
  const [row] = await db
    .select({ usedAt: webSigninTokens.usedAt, expiresAt: webSigninTokens.expiresAt })
    .from(webSigninTokens)
    .where(eq(webSigninTokens.tokenHash, hash(token)));
  if (!row) return 'unknown';
  // Unused and in time means another request spent it a moment ago.
  return !row.usedAt && row.expiresAt <= now ? 'expired' : 'used';
}
