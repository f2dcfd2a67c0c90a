/**
 * Bearer-key authentication and scope checks, shared by the HTTP routes and the runner
 * WebSocket upgrade (which runs outside Hono but must refuse with the same answers).
 */
import type { MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import { ApiError } from './errors.ts';
import { checkSandboxToken } from './sandbox-authority.ts';
import type { Db } from '../store/db.ts';
import { API_KEY_PATTERN, findKeyByHash, hashApiKey, touchApiKey } from '../core/keys-store.ts';
import { keyGeneration, recall, remember, stamped } from '../core/key-cache-store.ts';
import type { Account, ApiKey, ApiKeyScope } from '../store/schema.ts';

export interface Principal {
  readonly account: Account;
  readonly key: ApiKey;
}

export interface AppEnv {
  Variables: { principal: Principal };
}

export const hasScope = (p: Principal, scope: ApiKeyScope): boolean =>
  p.key.scopes.includes('full') || p.key.scopes.includes(scope);

/** A key from "Add runner": it may dial the runner socket and do nothing else. */
export const isRunnerOnly = (p: Principal): boolean =>
  !p.key.scopes.includes('full') && p.key.scopes.includes('runner');

/** How stale last_used_at may get: it tells a key in use from an abandoned one, not request times. */
const LAST_USED_RESOLUTION_MS = 60_000;

/** Resolves an Authorization header to its account and key, or throws the 401 to answer. */
export async function authenticate(db: Db, header: string | undefined, logger: Logger): Promise<Principal> {
  const m = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw ApiError.unauthorized('api_key_missing', 'missing "Authorization: Bearer <api key>" header');
  const presented = m[1]!;
  if (!API_KEY_PATTERN.test(presented)) throw ApiError.unauthorized('api_key_invalid', 'API key is invalid');
  const hash = hashApiKey(presented);
  let found = recall(db, hash);
  if (!found) {
    // Taken before the read: a key change stored while the read runs keeps its row out of the memory.
    const readAt = keyGeneration();
    found = await findKeyByHash(db, hash);
    if (found) remember(db, hash, found, readAt);
  }
  if (!found) throw ApiError.unauthorized('api_key_invalid', 'API key is invalid');
  const now = new Date();
  if (found.key.revokedAt) throw ApiError.unauthorized('api_key_revoked', 'API key has been revoked');
  if (found.key.expiresAt && found.key.expiresAt <= now)
    throw ApiError.unauthorized('api_key_expired', 'API key has expired');
  // Bookkeeping only: a failed stamp must not refuse an otherwise valid request. At most one
  // stamp a minute per key: a write per request would sit in front of the request's own queries.
  const last = found.key.lastUsedAt;
  if (!last || now.getTime() - last.getTime() >= LAST_USED_RESOLUTION_MS) {
    stamped(db, hash, now);
    touchApiKey(db, found.key.id, now).catch((err: unknown) =>
      logger.warn({ err }, 'could not stamp api key last_used_at'),
    );
  }
  return found;
}

/** Route middleware: authenticates, then insists on a scope (`full` for everything account-level). */
export function requireKey(db: Db, logger: Logger, scope: ApiKeyScope | 'any' = 'full'): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const principal = await authenticate(db, c.req.header('authorization'), logger);
    if (scope === 'any' ? isRunnerOnly(principal) : !hasScope(principal, scope))
      throw ApiError.insufficientScope('full');
    // A sandbox token acts for its conversation only: the rule table decides every route it reaches.
    if (!hasScope(principal, 'full')) await checkSandboxToken(db, principal, c.req.method, c.req.path);
    c.set('principal', principal);
    await next();
  };
}
