/**
 * Prompt images in the blob store the checkpoints use (content-addressed, sealed, one copy per digest):
 * stored before their turn names them, read back as ACP image blocks, removed when no turn names them.
 */
import { sql } from 'drizzle-orm';
import type { ContentBlock } from '@agentclientprotocol/sdk';
import { DIGEST, type BlobStore } from '../checkpoints/blobs.ts';
import type { TurnImage } from '../store/conversation-schema.ts';
import { rowsOf, type EngineDb } from '../store/engine-db.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import type { DecodedImage } from './prompt-images.ts';

export async function storeImages(
  blobs: BlobStore | undefined,
  images: readonly DecodedImage[],
): Promise<EngineResult<TurnImage[]>> {
  if (images.length === 0) return accept([]);
  if (!blobs) return refuse('images_unavailable', 'this server keeps no images');
  const refs: TurnImage[] = [];
  for (const img of images) {
    const r = await blobs.put(img.bytes);
    if (!r.ok) return refuse('images_unavailable', `the image could not be stored: ${r.error.message}`);
    refs.push({ digest: r.value.digest, media_type: img.mediaType, size: r.value.size });
  }
  return accept(refs);
}

/** The turn's images as ACP content blocks, in order; an error names the first that cannot be read. */
export async function imageBlocks(
  blobs: BlobStore | undefined,
  images: readonly TurnImage[],
): Promise<{ ok: true; value: ContentBlock[] } | { ok: false; message: string }> {
  const out: ContentBlock[] = [];
  for (const [i, ref] of images.entries()) {
    const r = blobs ? await blobs.get(ref.digest) : null;
    if (!r?.ok)
      return {
        ok: false,
        message: `image ${i + 1} of the message cannot be read: ${r ? r.error.message : 'no image store'}`,
      };
    out.push({ type: 'image', mimeType: ref.media_type, data: r.value.toString('base64') });
  }
  return { ok: true, value: out };
}

/** Every digest a turn names (the blob collection keeps them). */
export async function imageDigestsInUse(db: EngineDb): Promise<string[]> {
  return rowsOf<{ digest: string }>(
    await db.execute(sql`SELECT DISTINCT e->>'digest' AS digest FROM turns, jsonb_array_elements(images) e
      WHERE jsonb_array_length(images) > 0`),
  ).map((r) => r.digest);
}

/** The digests the conversation's turns name. */
export async function conversationImageDigests(db: EngineDb, conversationId: string): Promise<string[]> {
  return rowsOf<{ digest: string }>(
    await db.execute(sql`SELECT DISTINCT e->>'digest' AS digest FROM turns, jsonb_array_elements(images) e
      WHERE conversation_id = ${conversationId} AND jsonb_array_length(images) > 0`),
  ).map((r) => r.digest);
}

/**
 * After a conversation's turns are gone: removes those of `digests` no other turn or checkpoint names
 * (the same image sent in another conversation stays).
 */
export async function forgetImages(
  db: EngineDb,
  blobs: BlobStore | undefined,
  digests: readonly string[],
): Promise<void> {
  if (!blobs || digests.length === 0) return;
  const inUse = new Set(await imageDigestsInUse(db));
  const checkpointed = new Set(
    rowsOf<{ digest: string }>(await db.execute(sql`SELECT DISTINCT digest FROM checkpoints`)).map((r) => r.digest),
  );
  for (const d of new Set(digests)) if (!inUse.has(d) && !checkpointed.has(d)) await blobs.delete(d);
}

/** What the agent's initialize said of image prompts, for the next prompt's check. */
export async function setAcceptsImages(db: EngineDb, conversationId: string, accepts: boolean): Promise<void> {
  await db.execute(sql`UPDATE conversations SET accepts_images = ${accepts} WHERE id = ${conversationId}`);
}

/** The reference of one image of a turn of the account's conversation, or undefined. */
export async function turnImage(
  db: EngineDb,
  accountId: string,
  conversationId: string,
  turnId: string,
  position: number,
): Promise<TurnImage | undefined> {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  if (!UUID.test(conversationId) || !UUID.test(turnId) || !Number.isInteger(position) || position < 0) return undefined;
  const [row] = rowsOf<{ image: TurnImage | null }>(
    await db.execute(sql`SELECT t.images -> ${position}::int AS image FROM turns t
      JOIN conversations c ON c.id = t.conversation_id
      WHERE t.id = ${turnId} AND t.conversation_id = ${conversationId} AND c.account_id = ${accountId}`),
  );
  const img = row?.image;
  return img && typeof img.digest === 'string' && DIGEST.test(img.digest) ? img : undefined;
}
