import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { readiness } from './health.ts';
import { startServer, type RunningServer } from '../start.ts';
import { loadMigrations } from '../store/migrate.ts';
import { openDatabase } from '../store/db.ts';
import { dropSchema, TEST_POSTGRES_URL, uniqueSchemaName } from '../store/testing.ts';

const shipped = loadMigrations().map((m) => m.name);

const get = async (base: string, path: string) => {
  const res = await fetch(base + path);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('health routes (PostgreSQL)', () => {
  let dir: string;
  let schema: string;
  let srv: RunningServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fountain-health-'));
    schema = uniqueSchemaName();
    srv = await startServer({
      dataDir: dir,
      port: 0,
      env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL },
      databaseSchema: schema,
      acceptRunnerSocket: () => assert.fail('no upgrade expected'),
    });
  });
  after(async () => {
    await srv?.stop();
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers liveness and readiness without a key', async () => {
    assert.deepEqual(await get(srv.url, '/health'), { status: 200, body: { status: 'ok' } });
    assert.ok(shipped.length > 0);
    assert.deepEqual(await get(srv.url, '/health/ready'), {
      status: 200,
      body: { status: 'ready', database: 'ok', migrations: { applied: shipped.length, pending: [] } },
    });
  });

  it('is not ready while a shipped migration is missing, and ready again once it is back', async () => {
    const last = shipped.at(-1)!;
    await srv.database.db.execute(sql`DELETE FROM fountain_migrations WHERE name = ${last}`);
    try {
      assert.deepEqual(await get(srv.url, '/health/ready'), {
        status: 503,
        body: { status: 'not_ready', database: 'ok', migrations: { pending: [last] } },
      });
      assert.equal((await get(srv.url, '/health')).status, 200);
    } finally {
      await srv.database.db.execute(sql`INSERT INTO fountain_migrations (name) VALUES (${last})`);
    }
    assert.equal((await get(srv.url, '/health/ready')).status, 200);
  });

  it('tolerates migrations a newer node applied', async () => {
    await srv.database.db.execute(sql`INSERT INTO fountain_migrations (name) VALUES ('9999_from_a_newer_node.sql')`);
    assert.equal((await get(srv.url, '/health/ready')).status, 200);
  });
});

describe('readiness of a database that is gone or never migrated (PostgreSQL)', () => {
  it('reports an unreachable database', async () => {
    const schema = uniqueSchemaName();
    const database = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    await database.close();
    try {
      assert.deepEqual(await readiness(database.db, shipped), { ready: false, database: 'unreachable', pending: [] });
    } finally {
      await dropSchema(schema);
    }
  });

  it('reports every migration pending on a database without the migrations table', async () => {
    const schema = uniqueSchemaName();
    const database = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    try {
      await database.db.execute(sql`DROP TABLE fountain_migrations`);
      assert.deepEqual(await readiness(database.db, shipped), { ready: false, database: 'ok', pending: shipped });
    } finally {
      await database.close();
      await dropSchema(schema);
    }
  });
});
