/**
 * Egress allow lists: validation of the entries a policy may hold and the one matching rule the
 * resolver and the proxy share (an exact name, or `*.domain` for any name below it).
 */
import type { Result } from '../../../sandbox/result.ts';
import { err, ok } from '../../../sandbox/result.ts';

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** A DNS name in presentation form: lowercase labels, no trailing dot, at most 253 characters. */
export function normalizeName(name: string): string | null {
  const n = name.trim().toLowerCase().replace(/\.$/, '');
  if (n.length === 0 || n.length > 253) return null;
  return n.split('.').every((l) => LABEL.test(l)) ? n : null;
}

/** Entries are names or `*.name`; anything else (URLs, ports, addresses with paths) is refused. */
export function parseAllowList(allow: readonly string[]): Result<readonly string[], string> {
  const out = new Set<string>();
  for (const raw of allow) {
    const wildcard = raw.startsWith('*.');
    const name = normalizeName(wildcard ? raw.slice(2) : raw);
    if (name === null) return err(`not a domain name: ${JSON.stringify(raw)}`);
    out.add(wildcard ? `*.${name}` : name);
  }
  return ok([...out].sort());
}

/** Whether `name` (already normalized) is allowed: equal to an entry, or strictly below a `*.` entry. */
export function allows(allow: readonly string[], name: string): boolean {
  for (const entry of allow) {
    if (entry.startsWith('*.')) {
      if (name.endsWith(entry.slice(1))) return true;
    } else if (entry === name) return true;
  }
  return false;
}
