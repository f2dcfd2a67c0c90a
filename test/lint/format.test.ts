import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('one formatter for the whole tree', () => {
  it('biome finds nothing to reformat (run `npx biome format --write .` to fix)', () => {
    const r = spawnSync(process.execPath, ['node_modules/@biomejs/biome/bin/biome', 'format', '.'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`.slice(0, 4000));
  });
});
