/**
 * Blobs in the data directory (the embedded default): one sealed file per digest under
 * `<dir>/<2 hex>/<64 hex>`, written beside its place and renamed in, so a blob appears only whole.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Private } from '../../sandbox/private.ts';
import { err, ok, type Result } from '../../sandbox/result.ts';
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

const code = (e: unknown) => (e as NodeJS.ErrnoException).code;

export class DiskBlobStore implements BlobStore {
  readonly #dir: string;
  readonly #key: Private<Buffer>;

  constructor(dir: string, key: Private<Buffer>) {
    this.#dir = dir;
    this.#key = key;
  }

  #path(digest: string): string {
    const hex = digest.slice('sha256:'.length);
    return join(this.#dir, hex.slice(0, 2), hex);
  }

  async put(data: Buffer): Promise<Result<BlobRef, BlobError>> {
    const digest = digestOf(data);
    const ref = { digest, size: data.length };
    if (await this.has(digest)) return ok(ref);
    const path = this.#path(digest);
    const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      await mkdir(join(path, '..'), { recursive: true, mode: 0o700 });
      await writeFile(tmp, sealBlob(this.#key, digest, data), { mode: 0o600 });
      await rename(tmp, path);
      return ok(ref);
    } catch (e) {
      await rm(tmp, { force: true });
      return err(blobError('unavailable', `could not store blob ${digest}: ${(e as Error).message}`));
    }
  }

  async get(digest: string): Promise<Result<Buffer, BlobError>> {
    const checked = checkDigest(digest);
    if (!checked.ok) return checked;
    let sealed: Buffer;
    try {
      sealed = await readFile(this.#path(digest));
    } catch (e) {
      if (code(e) === 'ENOENT') return err(blobError('not_found', `no blob ${digest}`));
      return err(blobError('unavailable', `could not read blob ${digest}: ${(e as Error).message}`));
    }
    return openBlob(this.#key, digest, sealed);
  }

  async has(digest: string): Promise<boolean> {
    if (!checkDigest(digest).ok) return false;
    try {
      return (await stat(this.#path(digest))).isFile();
    } catch {
      return false;
    }
  }

  async delete(digest: string): Promise<Result<void, BlobError>> {
    const checked = checkDigest(digest);
    if (!checked.ok) return checked;
    try {
      await rm(this.#path(digest), { force: true });
      return ok(undefined);
    } catch (e) {
      return err(blobError('unavailable', `could not delete blob ${digest}: ${(e as Error).message}`));
    }
  }

  async list(): Promise<Array<{ digest: string; storedAt: Date }>> {
    const out: Array<{ digest: string; storedAt: Date }> = [];
    let shards: string[];
    try {
      shards = await readdir(this.#dir);
    } catch (e) {
      if (code(e) === 'ENOENT') return out;
      throw e;
    }
    for (const shard of shards) {
      if (!/^[0-9a-f]{2}$/.test(shard)) continue;
      for (const name of await readdir(join(this.#dir, shard))) {
        // Half-written files (name.tmp-…) are not blobs.
        if (!/^[0-9a-f]{64}$/.test(name) || !name.startsWith(shard)) continue;
        const s = await stat(join(this.#dir, shard, name));
        out.push({ digest: `sha256:${name}`, storedAt: s.mtime });
      }
    }
    return out;
  }
}
