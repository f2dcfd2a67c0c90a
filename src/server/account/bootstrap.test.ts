import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../store/db.ts';
import { bootstrap } from './bootstrap.ts';

describe('bootstrap', () => {
  it('creates the owner once; a later start reads it with one statement, no transaction', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-bootstrap-'));
    const statements: string[] = [];
    const database = await openDatabase({ dataDir: dir, queryLogger: { logQuery: (q) => statements.push(q) } });
    try {
      const first = await bootstrap(database.db, { dataDir: dir });
      assert.equal(first.created, true);
      assert.ok(
        statements.some((s) => s.includes('pg_advisory_xact_lock')),
        'the first start creates under the lock',
      );
      statements.length = 0;
      const again = await bootstrap(database.db, { dataDir: dir });
      assert.equal(again.created, false);
      assert.equal(again.owner.id, first.owner.id);
      assert.equal(again.key, first.key, 'read back from the bootstrap-key file');
      assert.equal(statements.length, 1, statements.join('\n'));
      assert.match(statements[0]!, /^select .* from "accounts"/);
    } finally {
      await database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
