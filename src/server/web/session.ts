/**
 * Web sessions: an HMAC-signed, HttpOnly, SameSite=Lax cookie naming an account and the API key the
 * session rests on (revoking that key ends the session), plus the one-time sign-in link for `fountain up`.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { EngineDb } from '../store/engine-db.ts';
import type { Account, ApiKey } from '../store/schema.ts';
import {
  API_KEY_PATTERN,
  createKey,
  keyByPlaintext,
  mintSigninToken,
  sessionKey,
  signinRefusal,
  spendSigninToken,
} from '../account/service.ts';

export const SESSION_COOKIE = 'fountain_session';
/** A session lasts this long from sign-in; the key behind it may end it sooner. */
export const SESSION_TTL_S = 30 * 24 * 3600;
/** How long a printed sign-in link stays valid. */
export const SIGNIN_LINK_TTL_MS = 15 * 60_000;
export const SIGNIN_PATH = '/signin/link';

const payloadSchema = z.object({ a: z.string().uuid(), k: z.string().uuid(), e: z.number().int() });
export type SessionPayload = z.infer<typeof payloadSchema>;

const mac = (secret: string, body: string): Buffer => createHmac('sha256', secret).update(body).digest();

export function sealSession(secret: string, payload: SessionPayload): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${body}.${mac(secret, body).toString('base64url')}`;
}

/** The payload of a cookie value this secret signed and that has not expired; null otherwise. */
export function openSession(
  secret: string,
  value: string | undefined,
  nowS = Math.floor(Date.now() / 1000),
): SessionPayload | null {
  if (!value) return null;
  const dot = value.indexOf('.');
  if (dot <= 0) return null;
  const body = value.slice(0, dot);
  const given = Buffer.from(value.slice(dot + 1), 'base64url');
  const want = mac(secret, body);
  if (given.length !== want.length || !timingSafeEqual(given, want)) return null;
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  const p = payloadSchema.safeParse(json);
  if (!p.success || p.data.e <= nowS) return null;
  return p.data;
}

export interface SessionUser {
  readonly account: Account;
  readonly key: ApiKey;
  readonly expires: number;
}

/** Resolves a cookie to its account and key, refusing revoked, expired or non-full keys. */
export async function resolveSession(
  db: EngineDb,
  secret: string,
  value: string | undefined,
): Promise<SessionUser | null> {
  const p = openSession(secret, value);
  if (!p) return null;
  const row = await sessionKey(db, p.a, p.k);
  if (!row) return null;
  if (row.key.expiresAt && row.key.expiresAt <= new Date()) return null;
  if (!row.key.scopes.includes('full')) return null;
  return { account: row.account, key: row.key, expires: p.e };
}

/**
 * Mints a one-time sign-in link for an account: `<baseUrl>/signin/link?token=…`, valid 15 minutes,
 * spent by its first use. `fountain up` prints it so a newcomer lands in a signed-in session.
 */
export async function mintSignInLink(db: EngineDb, accountId: string, baseUrl: string): Promise<string> {
  const token = await mintSigninToken(db, accountId, SIGNIN_LINK_TTL_MS);
  return `${baseUrl.replace(/\/+$/, '')}${SIGNIN_PATH}?token=${token}`;
}

/** Spends a sign-in link's token: the account it was for, or undefined when unknown, used or expired. */
export const consumeSigninToken = spendSigninToken;

const AGAIN =
  'To sign in, paste the owner API key that `fountain up` printed (the CLI also keeps it in ~/.fountain/credentials), or restart `fountain up` for a new link.';

/** The sentence for a sign-in link that was not accepted, saying why and what to do instead. */
export async function refusedLinkMessage(db: EngineDb, token: string): Promise<string> {
  switch (await signinRefusal(db, token)) {
    case 'used':
      return `This sign-in link has already been used; each link works once. ${AGAIN}`;
    case 'expired':
      return `This sign-in link has expired; a link works for ${SIGNIN_LINK_TTL_MS / 60_000} minutes. ${AGAIN}`;
    case 'unknown':
      return `This sign-in link is not one this server made; check that the whole link was copied. ${AGAIN}`;
  }
}

/**
 * The cookie-signing secret: FOUNTAIN_SESSION_SECRET when set (every node of a cluster must share it),
 * else a random one kept in `<dataDir>/session-secret` (mode 0600) so sessions survive restarts.
 */
export function sessionSecretFrom(env: Readonly<Record<string, string | undefined>>, dataDir: string): string {
  const fromEnv = env.FOUNTAIN_SESSION_SECRET?.trim();
  if (fromEnv) {
    if (fromEnv.length < 32) throw new Error('FOUNTAIN_SESSION_SECRET must be at least 32 characters');
    return fromEnv;
  }
  const file = join(dataDir, 'session-secret');
  if (existsSync(file)) {
    const s = readFileSync(file, 'utf8').trim();
    if (s.length >= 32) return s;
  }
  const s = randomBytes(32).toString('hex');
  writeFileSync(file, `${s}\n`, { mode: 0o600 });
  return s;
}

export type KeySignIn = { ok: true; account: Account; key: ApiKey } | { ok: false; message: string };

/** Checks a pasted API key for the sign-in form; the refusal is a sentence for the page. */
export async function checkKeyForSignIn(db: EngineDb, presented: string): Promise<KeySignIn> {
  const key = presented.trim();
  if (!API_KEY_PATTERN.test(key))
    return {
      ok: false,
      message: 'An API key is ftn_ followed by 64 lowercase hex digits. Check that you pasted all of it.',
    };
  const row = await keyByPlaintext(db, key);
  if (!row) return { ok: false, message: 'That API key is not known to this server.' };
  if (row.key.revokedAt)
    return {
      ok: false,
      message: 'That API key has been revoked. Create a new one under Account → API keys, or ask the owner.',
    };
  if (row.key.expiresAt && row.key.expiresAt <= new Date()) return { ok: false, message: 'That API key has expired.' };
  if (!row.key.scopes.includes('full'))
    return {
      ok: false,
      message: 'That key belongs to a runner or a running agent; signing in needs a full-scope API key.',
    };
  return { ok: true, account: row.account, key: row.key };
}

/** A key minted for a session opened by a sign-in link; its plaintext is never shown or kept. */
export async function mintSessionKey(db: EngineDb, accountId: string): Promise<ApiKey> {
  const created = await createKey(db, {
    accountId,
    name: `Web session — ${new Date().toISOString().slice(0, 10)}`,
    scopes: ['full'],
  });
  return created.row;
}
