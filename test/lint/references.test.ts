import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.(tsx?|mjs|js|sql)$/.test(e)) out.push(p);
  }
  return out;
}

describe('comments cite only what ships with the code', () => {
  it('no section sign in src/: a reader has no document outside the repository to look it up in', () => {
    const found = sources(join(ROOT, 'src')).flatMap((abs) =>
      readFileSync(abs, 'utf8')
        .split('\n')
        .flatMap((line, i) => (line.includes('§') ? [`${relative(ROOT, abs)}:${i + 1}: ${line.trim()}`] : [])),
    );
    assert.deepEqual(found, []);
  });
});
