/**
 * The server's secret key (FOUNTAIN_SECRET_KEY) that seals stored credentials: 32 bytes, from the
 * environment (64 hex digits or base64) or generated once into `<data-dir>/secret-key` with mode 0600.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Private } from '../../sandbox/private.ts';

export const SECRET_KEY_FILE = 'secret-key';

export class SecretKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretKeyError';
  }
}

/** 32 bytes from hex (64 digits) or base64; null when the text is neither. */
function decodeKey(text: string): Buffer | null {
  const t = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(t)) return Buffer.from(t, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(t)) {
    const b = Buffer.from(t.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (b.length === 32) return b;
  }
  return null;
}

/**
 * The key credentials are sealed with. A set but malformed FOUNTAIN_SECRET_KEY stops the boot (silently
 * generating another would make every stored credential unreadable); so does a damaged key file.
 */
export function loadSecretKey(env: Readonly<Record<string, string | undefined>>, dataDir: string): Private<Buffer> {
  const fromEnv = env.FOUNTAIN_SECRET_KEY;
  if (fromEnv !== undefined && fromEnv.trim() !== '') {
    const k = decodeKey(fromEnv);
    if (!k) throw new SecretKeyError('FOUNTAIN_SECRET_KEY must be 32 bytes as 64 hex digits or base64');
    return new Private(k);
  }
  const file = join(dataDir, SECRET_KEY_FILE);
  if (existsSync(file)) {
    const k = decodeKey(readFileSync(file, 'utf8'));
    if (!k)
      throw new SecretKeyError(
        `${file} does not hold a 32-byte key (64 hex digits); restore it or set FOUNTAIN_SECRET_KEY`,
      );
    return new Private(k);
  }
  const k = randomBytes(32);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, `${k.toString('hex')}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
  return new Private(k);
}
