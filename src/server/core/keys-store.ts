/**
 * API keys: `ftn_` + 64 lowercase hex, stored only as a SHA-256 hash and a display prefix.
 * Lookup is by hash, so the plaintext never reaches the database.
 */
import { createHash, randomBytes } from 'node:crypto';
import { and, desc, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import type { Db } from '../store/db.ts';
import { accounts, apiKeys, type Account, type ApiKey, type ApiKeyScope } from '../store/schema.ts';
import { keysChanged } from './key-cache-store.ts';

export const API_KEY_PATTERN = /^ftn_[0-9a-f]{64}$/;
export const apiKeyString = z.string().regex(API_KEY_PATTERN, 'must be ftn_ followed by 64 lowercase hex digits');

/** Enough of the key to recognise it in a list; reveals 32 of its 256 bits. */
const PREFIX_LENGTH = 12;

export const mintApiKey = (): string => `ftn_${randomBytes(32).toString('hex')}`;
export const hashApiKey = (key: string): string => createHash('sha256').update(key, 'utf8').digest('hex');
export const keyPrefix = (key: string): string => key.slice(0, PREFIX_LENGTH);

export interface CreatedKey {
  readonly row: ApiKey;
  /** The plaintext, to show exactly once. */
  readonly key: string;
}

/** Stores a key for an account; `key` may be supplied (the bootstrap key), else one is minted. */
export async function createApiKey(
  db: Db,
  input: { accountId: string; name: string; scopes: ApiKeyScope[]; expiresAt?: Date | null; key?: string },
): Promise<CreatedKey> {
  const key = input.key ?? mintApiKey();
  if (!API_KEY_PATTERN.test(key)) throw new Error('createApiKey: key must be ftn_ followed by 64 lowercase hex digits');
  const [row] = await db
    .insert(apiKeys)
    .values({
      accountId: input.accountId,
      name: input.name,
      prefix: keyPrefix(key),
      keyHash: hashApiKey(key),
      scopes: input.scopes,
      expiresAt: input.expiresAt ?? null,
    })
    .returning();
  return { row: row!, key };
}

/** The key row and its account for a presented key, whatever its state; the caller judges it. */
export async function findKeyByPlaintext(db: Db, key: string): Promise<{ key: ApiKey; account: Account } | undefined> {
  return findKeyByHash(db, hashApiKey(key));
}

export async function findKeyByHash(db: Db, keyHash: string): Promise<{ key: ApiKey; account: Account } | undefined> {
  const [row] = await db
    .select({ key: apiKeys, account: accounts })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(eq(apiKeys.keyHash, keyHash));
  return row;
}

export async function touchApiKey(db: Db, id: string, at = new Date()): Promise<void> {
  await db.update(apiKeys).set({ lastUsedAt: at }).where(eq(apiKeys.id, id));
}

/** Live (unrevoked) keys of one account, newest first. */
export async function listApiKeys(db: Db, accountId: string): Promise<ApiKey[]> {
  return db
    .select()
    .from(apiKeys)
    .where(and(eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
    .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id));
}

/** Revokes one of the account's live keys; false when there is none with that id (or it is another account's). */
export async function revokeApiKey(db: Db, accountId: string, id: string, at = new Date()): Promise<boolean> {
  try {
    const rows = await db
      .update(apiKeys)
      .set({ revokedAt: at })
      .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)))
      .returning({ id: apiKeys.id });
    return rows.length > 0;
  } finally {
    await keysChanged();
  }
}

/** An account's unrevoked key by id, with the account: what a web session rests on. */
export async function findLiveKey(
  db: Db,
  accountId: string,
  id: string,
): Promise<{ key: ApiKey; account: Account } | undefined> {
  const [row] = await db
    .select({ key: apiKeys, account: accounts })
    .from(apiKeys)
    .innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
    .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId), isNull(apiKeys.revokedAt)));
  return row;
}
