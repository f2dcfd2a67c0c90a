import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { openDatabase, type Database } from './db.ts';
import { isUniqueViolation } from './engine-db.ts';
import { EmbeddedDatabaseError, type PgliteThread } from './pglite-thread.ts';

/** The embedded database on its own thread behaves as PGlite in-process did: errors, transactions, order. */
describe('embedded database thread (real PGlite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fountain-thread-'));
  let d: Database;
  before(async () => {
    d = await openDatabase({ dataDir: dir, thread: true });
    await d.db.execute(sql`create table t (k text primary key, n int not null, at timestamptz default now())`);
  });
  after(async () => {
    await d.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const rows = async (q: ReturnType<typeof sql>) =>
    ((await d.db.execute(q)) as unknown as { rows: Record<string, unknown>[] }).rows;

  it("carries Postgres' error fields across the thread (a unique violation is recognised)", async () => {
    await d.db.execute(sql`insert into t (k, n) values ('a', 1)`);
    const e = await d.db.execute(sql`insert into t (k, n) values ('a', 2)`).then(
      () => null,
      (err: unknown) => err,
    );
    assert.ok(e, 'the duplicate key was refused');
    assert.ok(isUniqueViolation(e), `a unique violation: ${String(e)}`);
  });

  it('rolls a transaction back when its callback throws, and commits one that returns', async () => {
    await assert.rejects(
      d.db.transaction(async (tx) => {
        await tx.execute(sql`insert into t (k, n) values ('b', 1)`);
        throw new Error('changed my mind');
      }),
      /changed my mind/,
    );
    assert.deepEqual(await rows(sql`select k from t where k = 'b'`), []);
    const n = await d.db.transaction(async (tx) => {
      await tx.execute(sql`insert into t (k, n) values ('c', 3)`);
      return 3;
    });
    assert.equal(n, 3);
    assert.deepEqual(await rows(sql`select n from t where k = 'c'`), [{ n: 3 }]);
  });

  it('runs a statement sent during a transaction after it, never inside it', async () => {
    let inside!: () => void;
    const entered = new Promise<void>((r) => {
      inside = r;
    });
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const tx = d.db.transaction(async (t) => {
      await t.execute(sql`insert into t (k, n) values ('d', 1)`);
      inside();
      await held;
      await t.execute(sql`update t set n = 2 where k = 'd'`);
    });
    await entered;
    // Sent while the transaction is open: it must see the committed row, n = 2.
    const outside = rows(sql`select n from t where k = 'd'`);
    release();
    await tx;
    assert.deepEqual(await outside, [{ n: 2 }]);
  });

  const thread = (x: Database) => (x.db as unknown as { $client: PgliteThread }).$client;

  it('keeps timestamps as Postgres printed them for the query builder, and as dates for raw queries', async () => {
    const [row] = await d.db
      .execute(sql`select at from t where k = 'a'`)
      .then((r) => (r as unknown as { rows: { at: unknown }[] }).rows);
    assert.equal(typeof row?.at, 'string', 'the query builder asks for timestamps as text');
    const [raw] = (await thread(d).query<{ at: unknown }>(`select at from t where k = 'a'`)).rows;
    assert.ok(raw?.at instanceof Date, 'a raw query parses them');
  });

  it('refuses every request after close with a clear error, and closes twice without one', async () => {
    const other = mkdtempSync(join(tmpdir(), 'fountain-thread-closed-'));
    try {
      const closing = await openDatabase({ dataDir: other, thread: true });
      const t = thread(closing);
      assert.deepEqual((await t.query('select 1 as one')).rows, [{ one: 1 }]);
      await closing.close();
      await assert.rejects(t.query('select 1'), EmbeddedDatabaseError);
      await t.close();
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
