/**
 * AES-256-GCM sealing of stored credentials. The associated data binds a sealed value to its account
 * and provider, so a row copied onto another account or provider does not open.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Private } from '../../sandbox/private.ts';

const VERSION = 'v1';

export function seal(key: Private<Buffer>, plaintext: string, associated: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key.reveal(), iv);
  c.setAAD(Buffer.from(associated, 'utf8'));
  const body = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return [VERSION, iv.toString('base64'), c.getAuthTag().toString('base64'), body.toString('base64')].join('.');
}

/** The plaintext, or null when the value was sealed with another key, for another row, or altered. */
export function open(key: Private<Buffer>, sealed: string, associated: string): string | null {
  const parts = sealed.split('.');
  if (parts.length !== 4 || parts[0] !== VERSION) return null;
  try {
    const d = createDecipheriv('aes-256-gcm', key.reveal(), Buffer.from(parts[1]!, 'base64'));
    d.setAAD(Buffer.from(associated, 'utf8'));
    d.setAuthTag(Buffer.from(parts[2]!, 'base64'));
    return Buffer.concat([d.update(Buffer.from(parts[3]!, 'base64')), d.final()]).toString('utf8');
  } catch {
    return null;
  }
}
