/**
 * Blobs in the database (PostgreSQL or the embedded PGlite): a header row and sealed 1 MiB chunks, so a
 * cluster without a shared disk restores a checkpoint on any node. Written in one transaction.
 */
import { sql } from 'drizzle-orm';
import type { Private } from '../../sandbox/private.ts';
import { err, ok, type Result } from '../../sandbox/result.ts';
import type { Db } from '../store/db.ts';
import { rowsOf } from '../store/engine-db.ts';
import {
  type BlobError,
  type BlobRef,
  type BlobStore,
  blobError,
  checkDigest,
  digestOf,
  openBlob,
  sealBlob,
} from './blobs.ts';

export const CHUNK_BYTES = 1024 * 1024;

export class DbBlobStore implements BlobStore {
  readonly #db: Db;
  readonly #key: Private<Buffer>;

  constructor(db: Db, key: Private<Buffer>) {
    this.#db = db;
    this.#key = key;
  }

  async put(data: Buffer): Promise<Result<BlobRef, BlobError>> {
    const digest = digestOf(data);
    const ref = { digest, size: data.length };
    const sealed = sealBlob(this.#key, digest, data);
    const chunks = Math.ceil(sealed.length / CHUNK_BYTES);
    try {
      await this.#db.transaction(async (tx) => {
        // A blob another node stored first is kept as it is: same digest, same plaintext.
        const inserted = rowsOf<{ digest: string }>(
          await tx.execute(
            sql`INSERT INTO blobs (digest, size, chunks) VALUES (${digest}, ${data.length}, ${chunks}) ON CONFLICT (digest) DO NOTHING RETURNING digest`,
          ),
        );
        if (inserted.length === 0) return;
        for (let seq = 0; seq < chunks; seq++) {
          const part = sealed.subarray(seq * CHUNK_BYTES, (seq + 1) * CHUNK_BYTES);
          await tx.execute(sql`INSERT INTO blob_chunks (digest, seq, data) VALUES (${digest}, ${seq}, ${part})`);
        }
      });
      return ok(ref);
    } catch (e) {
      return err(blobError('unavailable', `could not store blob ${digest}: ${(e as Error).message}`));
    }
  }

  async get(digest: string): Promise<Result<Buffer, BlobError>> {
    const checked = checkDigest(digest);
    if (!checked.ok) return checked;
    try {
      const head = rowsOf<{ chunks: number }>(
        await this.#db.execute(sql`SELECT chunks FROM blobs WHERE digest = ${digest}`),
      );
      if (head.length === 0) return err(blobError('not_found', `no blob ${digest}`));
      const parts = rowsOf<{ seq: number; data: Uint8Array }>(
        await this.#db.execute(sql`SELECT seq, data FROM blob_chunks WHERE digest = ${digest} ORDER BY seq`),
      );
      if (parts.length !== Number(head[0]!.chunks) || parts.some((p, i) => Number(p.seq) !== i)) {
        return err(blobError('corrupt', `blob ${digest} is missing chunks`));
      }
      return openBlob(this.#key, digest, Buffer.concat(parts.map((p) => Buffer.from(p.data))));
    } catch (e) {
      return err(blobError('unavailable', `could not read blob ${digest}: ${(e as Error).message}`));
    }
  }

  async has(digest: string): Promise<boolean> {
    if (!checkDigest(digest).ok) return false;
    return rowsOf(await this.#db.execute(sql`SELECT 1 FROM blobs WHERE digest = ${digest}`)).length > 0;
  }

  async delete(digest: string): Promise<Result<void, BlobError>> {
    const checked = checkDigest(digest);
    if (!checked.ok) return checked;
    try {
      await this.#db.execute(sql`DELETE FROM blobs WHERE digest = ${digest}`);
      return ok(undefined);
    } catch (e) {
      return err(blobError('unavailable', `could not delete blob ${digest}: ${(e as Error).message}`));
    }
  }

  async list(): Promise<Array<{ digest: string; storedAt: Date }>> {
    const rows = rowsOf<{ digest: string; stored_at: Date | string }>(
      await this.#db.execute(sql`SELECT digest, stored_at FROM blobs`),
    );
    return rows.map((r) => ({ digest: r.digest, storedAt: new Date(r.stored_at) }));
  }
}
