import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { openDatabase } from './db.ts';
import { preloadPglite, takePreloadedPglite } from './pglite-artifacts.ts';

/** What `fountain server` preloads is what the embedded database opens with, and it is handed over once. */
describe('preloaded PGlite artifacts (real PGlite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fountain-preload-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('creates and migrates a data directory with the preloaded modules, then has none left', async () => {
    preloadPglite();
    const d = await openDatabase({ dataDir: dir });
    try {
      assert.equal(await takePreloadedPglite(), null, 'the open took the preload');
      const res = (await d.db.execute(sql`select count(*)::int as n from fountain_migrations`)) as unknown as {
        rows: Array<{ n: number }>;
      };
      assert.equal(res.rows[0]!.n, d.migrated.length);
      assert.ok(d.migrated.length > 0);
    } finally {
      await d.close();
    }
  });
});
