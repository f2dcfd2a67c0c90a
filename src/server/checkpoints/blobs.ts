/**
 * The blob store checkpoints are kept in: content-addressed (sha256 of the plaintext), sealed with the
 * server's secret key, deduplicated by digest. Two implementations: the data directory and the database.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { Private } from '../../sandbox/private.ts';
import { err, ok, type Result } from '../../sandbox/result.ts';

/** `sha256:` and 64 lowercase hex digits: the only form a digest takes, checked before any path or query uses it. */
export const DIGEST = /^sha256:[0-9a-f]{64}$/;

export interface BlobRef {
  readonly digest: string;
  /** Plaintext bytes. */
  readonly size: number;
}

export type BlobErrorCode = 'not_found' | 'corrupt' | 'invalid' | 'too_large' | 'unavailable';

export interface BlobError {
  readonly code: BlobErrorCode;
  readonly message: string;
}

const blobError = (code: BlobErrorCode, message: string): BlobError => ({ code, message });

export interface BlobStore {
  /** Stores `data` unless a blob with its digest is already there; either way its reference. */
  put(data: Buffer): Promise<Result<BlobRef, BlobError>>;
  /** The plaintext, checked against its digest before anything is returned. */
  get(digest: string): Promise<Result<Buffer, BlobError>>;
  has(digest: string): Promise<boolean>;
  /** Removes the blob; removing one that is not there is not an error. */
  delete(digest: string): Promise<Result<void, BlobError>>;
  /** Every stored digest with when it was stored (garbage collection spares recent ones). */
  list(): Promise<Array<{ digest: string; storedAt: Date }>>;
}

export function digestOf(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

export function checkDigest(digest: string): Result<string, BlobError> {
  return DIGEST.test(digest)
    ? ok(digest)
    : err(blobError('invalid', `not a blob digest: ${JSON.stringify(digest.slice(0, 80))}`));
}

/** What a sealed blob starts with: a format tag, so a file that is not a blob is told apart from a damaged one. */
const MAGIC = Buffer.from('FBLOB1\n', 'ascii');
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * AES-256-GCM with the digest as associated data: a sealed blob moved under another digest, altered,
 * truncated or sealed with another server's key does not open.
 */
export function sealBlob(key: Private<Buffer>, digest: string, plaintext: Buffer): Buffer {
  const iv = randomBytes(IV_BYTES);
  const c = createCipheriv('aes-256-gcm', key.reveal(), iv);
  c.setAAD(Buffer.from(digest, 'ascii'));
  const body = Buffer.concat([c.update(plaintext), c.final()]);
  return Buffer.concat([MAGIC, iv, c.getAuthTag(), body]);
}

export function openBlob(key: Private<Buffer>, digest: string, sealed: Buffer): Result<Buffer, BlobError> {
  if (sealed.length < MAGIC.length + IV_BYTES + TAG_BYTES || !sealed.subarray(0, MAGIC.length).equals(MAGIC)) {
    return err(blobError('corrupt', `blob ${digest} is not a Fountain blob or is truncated`));
  }
  const iv = sealed.subarray(MAGIC.length, MAGIC.length + IV_BYTES);
  const tag = sealed.subarray(MAGIC.length + IV_BYTES, MAGIC.length + IV_BYTES + TAG_BYTES);
  let plain: Buffer;
  try {
    const d = createDecipheriv('aes-256-gcm', key.reveal(), iv);
    d.setAAD(Buffer.from(digest, 'ascii'));
    d.setAuthTag(tag);
    plain = Buffer.concat([d.update(sealed.subarray(MAGIC.length + IV_BYTES + TAG_BYTES)), d.final()]);
  } catch {
    return err(
      blobError('corrupt', `blob ${digest} does not open: altered, truncated, or sealed with another server's key`),
    );
  }
  // The tag already binds the digest; the hash of what opened is checked as well, so a blob sealed under a
  // wrong digest by a defect is refused rather than restored.
  if (digestOf(plain) !== digest)
    return err(blobError('corrupt', `blob ${digest} holds other content than its digest says`));
  return ok(plain);
}

export { blobError };
