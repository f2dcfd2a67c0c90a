/**
 * Test support: opens the store on PGlite in a temporary directory or on the real PostgreSQL
 * in a schema unique to this run, and removes either afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDatabase, type Database } from './db.ts';

/** The PostgreSQL the tests use; FOUNTAIN_TEST_DATABASE_URL points elsewhere. */
export const TEST_POSTGRES_URL = process.env.FOUNTAIN_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export type TestDriver = 'pglite' | 'postgres';

export interface TestDatabase {
  readonly database: Database;
  /** Closes the store and drops its schema or directory. */
  dispose(): Promise<void>;
}

export const uniqueSchemaName = (): string => `fountain_test_${process.pid}_${randomBytes(4).toString('hex')}`;

export async function openTestDatabase(driver: TestDriver): Promise<TestDatabase> {
  if (driver === 'pglite') {
    const dir = mkdtempSync(join(tmpdir(), 'fountain-store-'));
    const database = await openDatabase({ dataDir: dir });
    return {
      database,
      dispose: async () => {
        await database.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const schema = uniqueSchemaName();
  const database = await openDatabase({ url: TEST_POSTGRES_URL, schema });
  return {
    database,
    dispose: async () => {
      await database.close();
      await dropSchema(schema);
    },
  };
}

export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: TEST_POSTGRES_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
