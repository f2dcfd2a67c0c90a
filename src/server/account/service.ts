/**
 * Accounts and their keys as a service: what routes and web pages call (they never query the store
 * themselves). Adding an account with its first key, settings, the key list, sign-in tokens and sessions.
 */
import type { Db } from '../store/db.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { isUniqueViolation } from '../store/engine-db.ts';
import type { Account, ApiKey, ApiKeyScope } from '../store/schema.ts';
import {
  createApiKey,
  findKeyByPlaintext,
  findLiveKey,
  listApiKeys,
  revokeApiKey,
  type CreatedKey,
} from '../core/keys-store.ts';
import { consumeSigninToken, insertSigninToken, signinTokenRefusal } from './signin-store.ts';
import { createAccount, findAccountByEmail, setCredentialBrokerage } from './store.ts';

export { API_KEY_SCOPES } from '../store/schema.ts';
export { API_KEY_PATTERN } from '../core/keys-store.ts';
export type { CreatedKey } from '../core/keys-store.ts';

const asDb = (db: Db | EngineDb): Db => db as unknown as Db;

/** A new (non-owner) account and its first full-scope key, in one transaction; refused when the email is taken. */
export async function addAccount(
  db: Db,
  input: { name: string; email: string | null },
): Promise<{ ok: true; account: Account; created: CreatedKey } | { ok: false; reason: 'email_taken' }> {
  if (input.email && (await findAccountByEmail(db, input.email))) return { ok: false, reason: 'email_taken' };
  try {
    return await db.transaction(async (tx) => {
      const account = await createAccount(tx, { name: input.name, email: input.email, role: 'user' });
      const created = await createApiKey(tx, { accountId: account.id, name: 'first key', scopes: ['full'] });
      return { ok: true as const, account, created };
    });
  } catch (e) {
    if (isUniqueViolation(e)) return { ok: false, reason: 'email_taken' };
    throw e;
  }
}

/** Turns the account's credential brokerage on or off; undefined when the account is gone. */
export const setBrokerage = (db: Db, accountId: string, on: boolean): Promise<Account | undefined> =>
  setCredentialBrokerage(db, accountId, on);

/** The account's live keys, newest first. */
export const listKeys = (db: Db | EngineDb, accountId: string): Promise<ApiKey[]> => listApiKeys(asDb(db), accountId);

/** A new key; its plaintext is in the answer only. */
export const createKey = (
  db: Db | EngineDb,
  input: { accountId: string; name: string; scopes: ApiKeyScope[]; expiresAt?: Date | null },
): Promise<CreatedKey> => createApiKey(asDb(db), input);

/** Revokes one of the account's live keys; false when it has none with that id. */
export const revokeKey = (db: Db | EngineDb, accountId: string, id: string): Promise<boolean> =>
  revokeApiKey(asDb(db), accountId, id);

/** The key a presented plaintext names, with its account, whatever its state (the caller judges it). */
export const keyByPlaintext = (
  db: Db | EngineDb,
  key: string,
): Promise<{ key: ApiKey; account: Account } | undefined> => findKeyByPlaintext(asDb(db), key);

/** The unrevoked key a web session rests on, with its account. */
export const sessionKey = (
  db: Db | EngineDb,
  accountId: string,
  keyId: string,
): Promise<{ key: ApiKey; account: Account } | undefined> => findLiveKey(asDb(db), accountId, keyId);

/** A one-time sign-in token for an account, valid ttlMs. */
export const mintSigninToken = (db: EngineDb, accountId: string, ttlMs: number): Promise<string> =>
  insertSigninToken(db, accountId, ttlMs);

/** Spends a sign-in token: the account it was for, or undefined when unknown, used or expired. */
export const spendSigninToken = (db: EngineDb, token: string): Promise<string | undefined> =>
  consumeSigninToken(db, token);

/** Why a sign-in token was not accepted. */
export const signinRefusal = (db: EngineDb, token: string): Promise<'unknown' | 'used' | 'expired'> =>
  signinTokenRefusal(db, token);
