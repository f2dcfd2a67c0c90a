import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PROVIDER_CREDENTIAL_ENV } from '../../sandbox/providers.ts';

const SRC = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(fileURLToPath(new URL('../../../docs/configuration.md', import.meta.url)), 'utf8');
/** The operating system's own variables, which Fountain passes on but does not define. */
const OS_VARS = new Set(['HOME', 'PATH', 'XDG_CACHE_HOME']);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return name === 'testing' || name === 'conformance' ? [] : sources(full);
    return /\.tsx?$/.test(name) && !/\.test\.tsx?$/.test(name) && !/(testing|test-hub|fake-daemon)\.ts$/.test(name)
      ? [full]
      : [];
  });
}

/** Variables the code reads: `env.X`, `env['X']`, `process.env.X`, and keys of zod env schemas. */
function variablesRead(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sources(SRC)) {
    const text = readFileSync(file, 'utf8');
    const add = (v: string) => found.set(v, found.get(v) ?? file.slice(SRC.length));
    for (const m of text.matchAll(/\benv(?:\.|\[['"])([A-Z][A-Z0-9_]{2,})\b(?!\s*=[^=])/g)) add(m[1]!);
    if (/z\.object\(/.test(text) && /\benv\b/.test(text))
      for (const m of text.matchAll(/^\s+([A-Z][A-Z0-9]+(?:_[A-Z0-9]+)+):\s*(?:z\b|bool\(|positiveMs\()/gm)) add(m[1]!);
  }
  for (const v of Object.values(PROVIDER_CREDENTIAL_ENV)) found.set(v, found.get(v) ?? 'sandbox/providers.ts');
  for (const v of OS_VARS) found.delete(v);
  return found;
}

describe('docs/configuration.md', () => {
  it('documents every environment variable the code reads', () => {
    const read = variablesRead();
    assert.ok(
      read.has('SANDBOX_IDLE_TIMEOUT_MINUTES') && read.has('FOUNTAIN_API_KEY') && read.has('DAYTONA_API_URL'),
      [...read.keys()].join(' '),
    );
    const missing = [...read].filter(([v]) => !DOC.includes(`\`${v}\``)).map(([v, f]) => `${v} (read in ${f})`);
    assert.deepEqual(missing, []);
  });
});
