import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { sql } from 'drizzle-orm';
import { openDatabase, type Database } from './db.ts';
import { loadMigrations } from './migrate.ts';
import { templateKey } from './pglite-template.ts';

/** One value of a one-row query. */
async function one<T>(d: Database, q: ReturnType<typeof sql>): Promise<T> {
  const res = (await d.db.execute(q)) as unknown as { rows: Array<{ v: T }> };
  return res.rows[0]!.v;
}

const ALL = loadMigrations().map((m) => m.name);

describe('new embedded databases from a migrated template (real PGlite)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'fountain-template-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const root = join(tmp, 'cache');

  it('the first new database makes the template, the next is a copy of it; each is its own database', {
    timeout: 180_000,
  }, async () => {
    const a = await openDatabase({ dataDir: join(tmp, 'a'), templateDir: root, bundledTemplateDir: null });
    assert.deepEqual(a.migrated, ALL);
    assert.equal(a.templateError, undefined);
    const entry = join(root, templateKey(loadMigrations()));
    assert.ok(existsSync(join(entry, 'PG_VERSION')), 'the template is in the cache');
    assert.deepEqual(readdirSync(root), [templateKey(loadMigrations())], 'nothing half-made is left beside it');
    await a.db.execute(sql`CREATE TABLE only_in_a (x int)`);
    await a.close();

    const b = await openDatabase({ dataDir: join(tmp, 'b'), templateDir: root, bundledTemplateDir: null });
    assert.deepEqual(b.migrated, ALL);
    assert.equal(await one<number>(b, sql`SELECT count(*)::int AS v FROM fountain_migrations`), ALL.length);
    // initdb's template0 and template1 are not kept: a copy holds only the database Fountain uses.
    assert.equal(await one<string>(b, sql`SELECT string_agg(datname, ',') AS v FROM pg_database`), 'postgres');
    assert.deepEqual(readdirSync(join(entry, 'base')).length, 1, 'one database directory in the template');
    assert.equal(
      await one<string | null>(b, sql`SELECT to_regclass('only_in_a')::text AS v`),
      null,
      'a write to one copy is not in another',
    );
    await b.db.execute(sql`CREATE TABLE only_in_b (x int)`);
    await b.close();

    // A reopen of an existing data directory neither copies nor migrates.
    const again = await openDatabase({ dataDir: join(tmp, 'b'), templateDir: root, bundledTemplateDir: null });
    assert.deepEqual(again.migrated, []);
    assert.equal(await one<string | null>(again, sql`SELECT to_regclass('only_in_b')::text AS v`), 'only_in_b');
    await again.close();
  });

  it('an unusable cache is said and the database is made from scratch', { timeout: 180_000 }, async () => {
    const blocked = join(tmp, 'a-file');
    writeFileSync(blocked, 'not a directory');
    const d = await openDatabase({
      dataDir: join(tmp, 'c'),
      templateDir: join(blocked, 'cache'),
      bundledTemplateDir: null,
    });
    assert.match(d.templateError ?? '', /could not be used/);
    assert.deepEqual(d.migrated, ALL);
    await d.close();
  });

  it('a cache entry without its database files is replaced', { timeout: 180_000 }, async () => {
    const root2 = join(tmp, 'cache2');
    const entry = join(root2, templateKey(loadMigrations()));
    rmSync(root2, { recursive: true, force: true });
    // What a tampered cache could hold: the entry's directory with something in it but no PG_VERSION.
    mkdirSync(entry, { recursive: true });
    writeFileSync(join(entry, 'junk'), 'x');
    const d = await openDatabase({ dataDir: join(tmp, 'd'), templateDir: root2, bundledTemplateDir: null });
    assert.equal(d.templateError, undefined);
    assert.deepEqual(d.migrated, ALL);
    assert.ok(existsSync(join(entry, 'PG_VERSION')));
    assert.ok(!existsSync(join(entry, 'junk')));
    await d.close();
  });

  it('the template made at install time is copied without making one or touching the cache', {
    timeout: 180_000,
  }, async () => {
    // The shipped template is the cache's entry from the first test, moved aside to play the package's.
    const shipped = join(tmp, 'shipped');
    mkdirSync(shipped);
    const key = templateKey(loadMigrations());
    cpSync(join(root, key), join(shipped, key), { recursive: true });
    const emptyCache = join(tmp, 'cache3');
    const d = await openDatabase({ dataDir: join(tmp, 'e'), templateDir: emptyCache, bundledTemplateDir: shipped });
    assert.equal(d.templateError, undefined);
    assert.deepEqual(d.migrated, ALL);
    assert.equal(await one<number>(d, sql`SELECT count(*)::int AS v FROM fountain_migrations`), ALL.length);
    assert.ok(!existsSync(emptyCache), 'nothing was made in the cache');
    await d.close();
  });
});
