/**
 * Garbage collection of checkpoint blobs: a blob no checkpoint row names is removed once it is older than
 * a grace period, so a blob stored a moment before its checkpoint row is written is never taken.
 */
import type { BlobStore } from './blobs.ts';

export interface CollectResult {
  readonly removed: string[];
  readonly kept: number;
  readonly errors: string[];
}

export async function collectBlobs(
  store: BlobStore,
  referenced: ReadonlySet<string>,
  opts: { graceMs: number; now?: Date },
): Promise<CollectResult> {
  const now = (opts.now ?? new Date()).getTime();
  const removed: string[] = [];
  const errors: string[] = [];
  let kept = 0;
  for (const { digest, storedAt } of await store.list()) {
    if (referenced.has(digest) || now - storedAt.getTime() < opts.graceMs) {
      kept++;
      continue;
    }
    const r = await store.delete(digest);
    if (r.ok) removed.push(digest);
    else errors.push(r.error.message);
  }
  return { removed, kept, errors };
}
