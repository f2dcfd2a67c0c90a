/**
 * First start: the owner account and its full-scope key (minted, or FOUNTAIN_BOOTSTRAP_KEY),
 * written once to `<data-dir>/bootstrap-key` with mode 0600.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import type { Db } from '../store/db.ts';
import { createAccount, findOwner } from './store.ts';
import { audit } from './audit.ts';
import { API_KEY_PATTERN, createApiKey } from '../core/keys-store.ts';
import type { Account } from '../store/schema.ts';

export const BOOTSTRAP_KEY_FILE = 'bootstrap-key';
// Serialises first starts of several nodes against one PostgreSQL (only one owner is created).
const BOOTSTRAP_LOCK_ID = 7_236_511_005;

export interface BootstrapResult {
  readonly owner: Account;
  /** True when this start created the owner (and its key). */
  readonly created: boolean;
  /** The owner's first key: from this start, or read back from the bootstrap-key file; null if that file is gone. */
  readonly key: string | null;
  readonly keyFile: string;
}

export async function bootstrap(
  db: Db,
  opts: { dataDir: string; presetKey?: string | undefined },
): Promise<BootstrapResult> {
  const keyFile = join(opts.dataDir, BOOTSTRAP_KEY_FILE);
  // Every start after the first finds the owner: one read instead of a transaction and an advisory
  // lock (start-up, docs/benchmarks.md). No owner yet takes the locked path, which looks again under the lock.
  const owner = await findOwner(db);
  if (owner) return { owner, created: false, key: readBootstrapKey(keyFile), keyFile };
  const made = await db.transaction(async (tx) => {
    await tx.execute(sql`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK_ID})`);
    const existing = await findOwner(tx);
    if (existing) return { owner: existing, key: null };
    const owner = await createAccount(tx, { name: 'owner', role: 'owner' });
    const created = await createApiKey(tx, {
      accountId: owner.id,
      name: 'bootstrap',
      scopes: ['full'],
      ...(opts.presetKey ? { key: opts.presetKey } : {}),
    });
    await audit(tx, { accountId: owner.id, actor: 'system', action: 'account.bootstrapped', subjectId: owner.id });
    return { owner, key: created.key };
  });
  if (made.key) {
    writeSecretFile(keyFile, `${made.key}\n`);
    return { owner: made.owner, created: true, key: made.key, keyFile };
  }
  return { owner: made.owner, created: false, key: readBootstrapKey(keyFile), keyFile };
}

/** The key in a bootstrap-key file, or null when the file is missing or does not hold one. */
export function readBootstrapKey(path: string): string | null {
  if (!existsSync(path)) return null;
  const text = readFileSync(path, 'utf8').trim();
  return API_KEY_PATTERN.test(text) ? text : null;
}

/** Replaces the file atomically; it is never readable by others, not even briefly. */
function writeSecretFile(path: string, text: string): void {
  mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}
