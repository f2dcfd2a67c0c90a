import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { DataDirInUseError, openDatabase } from './db.ts';
import { PGlite } from '@electric-sql/pglite';
import { loadMigrations, migrate, type SqlClient } from './migrate.ts';

const ALL_MIGRATIONS = loadMigrations().map((m) => m.name);
import { createAccount, findAccount, findOwner } from '../account/store.ts';
import {
  createApiKey,
  findKeyByPlaintext,
  hashApiKey,
  listApiKeys,
  mintApiKey,
  revokeApiKey,
  API_KEY_PATTERN,
} from '../core/keys-store.ts';
import { deleteRunner, listRunners, touchRunner, upsertRunner } from '../runners/store.ts';
import { audit, listAudit } from '../account/audit.ts';
import { apiKeys } from './schema.ts';
import {
  dropSchema,
  openTestDatabase,
  TEST_POSTGRES_URL,
  uniqueSchemaName,
  type TestDatabase,
  type TestDriver,
} from './testing.ts';

for (const driver of ['pglite', 'postgres'] as TestDriver[]) {
  describe(`store on ${driver}`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await openTestDatabase(driver);
    });
    after(async () => {
      await t?.dispose();
    });

    it('applies the migrations on first open', () => {
      assert.equal(t.database.kind, driver);
      assert.deepEqual(t.database.migrated, ALL_MIGRATIONS);
      assert.equal(ALL_MIGRATIONS[0], '0001_init.sql');
    });

    it('stores only the hash of a key and finds it by the plaintext', async () => {
      const { db } = t.database;
      const acct = await createAccount(db, { name: 'alice', email: `alice-${driver}@example.test`, role: 'owner' });
      const { key, row } = await createApiKey(db, { accountId: acct.id, name: 'k1', scopes: ['full'] });
      assert.match(key, API_KEY_PATTERN);
      assert.equal(row.keyHash, hashApiKey(key));
      assert.equal(row.prefix, key.slice(0, 12));
      const stored = await db.select().from(apiKeys);
      assert.ok(
        stored.every((r) => !Object.values(r).includes(key)),
        'plaintext must not be stored',
      );
      const found = await findKeyByPlaintext(db, key);
      assert.equal(found?.key.id, row.id);
      assert.equal(found?.account.id, acct.id);
      assert.deepEqual(found?.key.scopes, ['full']);
      assert.equal(await findKeyByPlaintext(db, mintApiKey()), undefined);
      assert.equal((await findOwner(db))?.id, acct.id);
    });

    it('revokes only the account’s own live keys', async () => {
      const { db } = t.database;
      const a = await createAccount(db, { name: 'a', role: 'user' });
      const b = await createAccount(db, { name: 'b', role: 'user' });
      const ka = await createApiKey(db, { accountId: a.id, name: 'ka', scopes: ['sandbox'] });
      assert.equal(await revokeApiKey(db, b.id, ka.row.id), false);
      assert.equal((await listApiKeys(db, a.id)).length, 1);
      assert.equal(await revokeApiKey(db, a.id, ka.row.id), true);
      assert.equal(await revokeApiKey(db, a.id, ka.row.id), false);
      assert.equal((await listApiKeys(db, a.id)).length, 0);
      assert.ok((await findKeyByPlaintext(db, ka.key))?.key.revokedAt instanceof Date);
    });

    it('upserts runners by (account, name), tells insert from update, orders by connection', async () => {
      const { db } = t.database;
      const acct = await createAccount(db, { name: 'r', role: 'user' });
      const other = await createAccount(db, { name: 'o', role: 'user' });
      const t0 = new Date('2030-01-01T00:00:00Z');
      const first = await upsertRunner(db, acct.id, { name: 'box', hostname: 'box.local', os: 'linux' }, t0);
      assert.equal(first.inserted, true);
      assert.equal(first.runner.connectedAt?.toISOString(), t0.toISOString());
      const t1 = new Date('2030-01-01T00:01:00Z');
      const again = await upsertRunner(db, acct.id, { name: 'box', arch: 'amd64' }, t1);
      assert.equal(again.inserted, false);
      assert.equal(again.runner.id, first.runner.id);
      assert.equal(again.runner.arch, 'amd64');
      assert.equal(again.runner.hostname, null);
      const sameNameElsewhere = await upsertRunner(db, other.id, { name: 'box' }, t0);
      assert.equal(sameNameElsewhere.inserted, true);
      assert.notEqual(sameNameElsewhere.runner.id, first.runner.id);

      await upsertRunner(db, acct.id, { name: 'alpha' }, t0);
      await upsertRunner(db, acct.id, { name: 'beta' }, t0);
      assert.deepEqual(
        (await listRunners(db, acct.id)).map((r) => r.name),
        ['box', 'alpha', 'beta'],
      );

      const t2 = new Date('2030-01-01T00:02:00Z');
      await touchRunner(db, first.runner.id, t2);
      const listed = await listRunners(db, acct.id);
      assert.equal(listed[0]?.lastSeenAt?.toISOString(), t2.toISOString());

      assert.equal(await deleteRunner(db, other.id, first.runner.id), undefined, 'another account cannot delete it');
      assert.equal((await deleteRunner(db, acct.id, first.runner.id))?.id, first.runner.id);
      assert.deepEqual(
        (await listRunners(db, acct.id)).map((r) => r.name),
        ['alpha', 'beta'],
      );
    });

    it('refuses a runner name outside the pattern at the database too', async () => {
      const { db } = t.database;
      const acct = await createAccount(db, { name: 'n', role: 'user' });
      await assert.rejects(upsertRunner(db, acct.id, { name: 'Bad Name' }));
    });

    it('writes and lists audit entries newest first', async () => {
      const { db } = t.database;
      const acct = await createAccount(db, { name: 'au', role: 'user' });
      await audit(db, {
        accountId: acct.id,
        actor: 'api',
        action: 'runner.registered',
        subjectId: 'x',
        data: { name: 'n' },
      });
      await audit(db, { accountId: acct.id, actor: 'system', action: 'api_key.created' });
      const all = await listAudit(db, acct.id);
      assert.deepEqual(
        all.map((e) => e.action),
        ['api_key.created', 'runner.registered'],
      );
      assert.deepEqual((await listAudit(db, acct.id, 'runner.registered'))[0]?.data, { name: 'n' });
      assert.ok(await findAccount(db, acct.id));
    });
  });
}

describe('migrations', () => {
  it('are applied once: reopening PostgreSQL applies nothing and keeps the data', async () => {
    const schema = uniqueSchemaName();
    try {
      const first = await openDatabase({ url: TEST_POSTGRES_URL, schema });
      await createAccount(first.db, { name: 'keep', role: 'owner' });
      await first.close();
      const second = await openDatabase({ url: TEST_POSTGRES_URL, schema });
      assert.deepEqual(second.migrated, []);
      assert.equal((await findOwner(second.db))?.name, 'keep');
      await second.close();
      // The tables live in the run's own schema, not in public.
      const c = new pg.Client({ connectionString: TEST_POSTGRES_URL });
      await c.connect();
      const { rows } = await c.query(
        'SELECT table_schema FROM information_schema.tables WHERE table_name = $1 AND table_schema = $2',
        ['runners', schema],
      );
      await c.end();
      assert.equal(rows.length, 1);
    } finally {
      await dropSchema(schema);
    }
  });

  it('an up-to-date database costs one read; a newly shipped migration still takes the locked path', async () => {
    const pglite = new PGlite();
    const statements: string[] = [];
    const client: SqlClient = {
      exec: async (text) => {
        statements.push(text.split('\n')[0]!);
        await pglite.exec(text);
      },
      query: async <T extends Record<string, unknown>>(text: string, params?: unknown[]) => {
        statements.push(text);
        return (await pglite.query<T>(text, params)).rows;
      },
    };
    try {
      const shipped = [{ name: '0001_a.sql', sql: 'CREATE TABLE a (id int)' }];
      assert.deepEqual(await migrate(client, { migrations: shipped }), ['0001_a.sql']);
      statements.length = 0;
      assert.deepEqual(await migrate(client, { migrations: shipped }), []);
      assert.deepEqual(statements, ['SELECT name FROM fountain_migrations']);
      const next = [...shipped, { name: '0002_b.sql', sql: 'CREATE TABLE b (id int)' }];
      assert.deepEqual(await migrate(client, { migrations: next }), ['0002_b.sql']);
      assert.ok(statements.includes('SELECT pg_advisory_xact_lock($1)'));
      await pglite.query('SELECT * FROM b');
    } finally {
      await pglite.close();
    }
  });

  it('two concurrent opens of one fresh schema both succeed and apply each migration once', async () => {
    const schema = uniqueSchemaName();
    try {
      const [a, b] = await Promise.all([
        openDatabase({ url: TEST_POSTGRES_URL, schema }),
        openDatabase({ url: TEST_POSTGRES_URL, schema }),
      ]);
      assert.deepEqual([...a.migrated, ...b.migrated], ALL_MIGRATIONS);
      await Promise.all([a.close(), b.close()]);
    } finally {
      await dropSchema(schema);
    }
  });
});

describe('embedded database lock', () => {
  it('refuses a directory another live process holds, takes over a dead holder, and releases on close', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-lock-'));
    const lock = join(dir, 'pglite.lock');
    try {
      // Our parent (the test runner) is alive and is not us: the shape of a second `fountain up`.
      writeFileSync(lock, `${process.ppid}\n`);
      await assert.rejects(
        openDatabase({ dataDir: dir }),
        (e: unknown) =>
          e instanceof DataDirInUseError &&
          e.pid === process.ppid &&
          /already open in another Fountain process/.test(e.message),
      );

      const gone = spawn(process.execPath, ['-e', '']);
      await new Promise((r) => gone.once('exit', r));
      writeFileSync(lock, `${gone.pid}\n`);
      const db = await openDatabase({ dataDir: dir });
      assert.equal(readFileSync(lock, 'utf8').trim(), String(process.pid));
      await db.close();
      assert.equal(existsSync(lock), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
