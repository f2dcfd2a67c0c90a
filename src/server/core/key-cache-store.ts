/**
 * A short-lived, in-process memory of authenticated keys, so a client's requests do not each read
 * `api_keys ⋈ accounts` (the read was one of the three statements in front of a prompt's "queued"
 * answer, and a fifth of that path's CPU on PGlite).
 *
 * Revocation still takes effect:
 * - On this node at once: every write that can turn a key or its account away, or change what a
 *   principal carries (a key revoked, a sandbox token rotated or revoked, the account's brokerage
 *   switched), calls `keysChanged()` once it is stored, which forgets every entry. An authentication
 *   that read the row before such a write finished took the generation before its read, so its late
 *   entry is never served.
 * - On the other nodes of a cluster: `keysChanged()` also tells its listeners, and the cluster bus
 *   carries the change to every node, which forgets its entries too (`forgetKeys`). The writer waits
 *   until the notice is sent, so a revocation answered to its client is already on its way to the
 *   others. `KEY_CACHE_TTL_MS` still bounds an entry's life should a notice be lost (a node's
 *   notification connection down): short enough for a revoked key to stop working within seconds,
 *   long enough to serve a client's burst of requests (a turn's POST and its reads).
 * Expiry is judged on every request from the stored `expires_at`, cached or not. Only keys that were
 * found are kept, and the memory is bounded, so unknown keys cannot grow it.
 */
import type { Account, ApiKey } from '../store/schema.ts';

export const KEY_CACHE_TTL_MS = 2_000;
const MAX_ENTRIES = 1_000;

interface Entry {
  readonly found: { key: ApiKey; account: Account };
  readonly at: number;
  readonly generation: number;
}

let generation = 0;
/** Per database handle, so servers sharing a process (tests) never see each other's rows. */
const caches = new WeakMap<object, Map<string, Entry>>();

/** Told of every key or account change stored on this node; resolves once others were told. */
export type KeysChangedListener = () => Promise<void> | void;
const listeners = new Set<KeysChangedListener>();

/** Returns the unsubscribe function. */
export function onKeysChanged(listener: KeysChangedListener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/**
 * Forgets every remembered key, in every store of this process, and tells the listeners (the other
 * nodes); call once a key or account write is stored. Never rejects.
 */
export async function keysChanged(): Promise<void> {
  generation++;
  await Promise.all(
    [...listeners].map((l) =>
      Promise.resolve()
        .then(l)
        .catch(() => undefined),
    ),
  );
}

/** A change stored by another node: forgets here without telling anyone again. */
export function forgetKeys(): void {
  generation++;
}

/** The generation to pass to `remember` with a row read after this call. */
export const keyGeneration = (): number => generation;

export function recall(db: object, hash: string, now = Date.now()): { key: ApiKey; account: Account } | undefined {
  const m = caches.get(db);
  const e = m?.get(hash);
  if (!e) return undefined;
  if (e.generation !== generation || now - e.at >= KEY_CACHE_TTL_MS) {
    m!.delete(hash);
    return undefined;
  }
  return e.found;
}

/** Keeps a row read when the generation was `readAt`; a row read before the latest change is not kept. */
export function remember(
  db: object,
  hash: string,
  found: { key: ApiKey; account: Account },
  readAt: number,
  now = Date.now(),
): void {
  if (readAt !== generation) return;
  let m = caches.get(db);
  if (!m) caches.set(db, (m = new Map()));
  if (m.size >= MAX_ENTRIES && !m.has(hash)) m.clear();
  m.set(hash, { found, at: now, generation: readAt });
}

/** Updates a remembered key's `last_used_at` after a stamp, so the next requests do not stamp again. */
export function stamped(db: object, hash: string, lastUsedAt: Date): void {
  const e = caches.get(db)?.get(hash);
  if (e) caches.get(db)!.set(hash, { ...e, found: { ...e.found, key: { ...e.found.key, lastUsedAt } } });
}
