/**
 * The migrator: applies the numbered SQL files in migrations/ once each, in name order,
 * inside one transaction guarded by an advisory lock so concurrent boots of several nodes are safe.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The little a migration needs from either driver: one connection, raw SQL. */
export interface SqlClient {
  /** Runs one or more statements without parameters. */
  exec(text: string): Promise<void>;
  query<T extends Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
}

export interface Migration {
  readonly name: string;
  readonly sql: string;
}

export const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

// An arbitrary constant shared by every node that migrates the same database.
const MIGRATION_LOCK_ID = 7_236_511_004;

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((name) => ({ name, sql: readFileSync(`${dir}/${name}`, 'utf8') }));
}

async function allApplied(client: SqlClient, migrations: readonly Migration[]): Promise<boolean> {
  let rows: Array<{ name: string }>;
  try {
    rows = await client.query<{ name: string }>('SELECT name FROM fountain_migrations');
  } catch {
    // No table yet (a new database). Outside a transaction, so nothing is left aborted.
    return false;
  }
  const done = new Set(rows.map((r) => r.name));
  return migrations.every((m) => done.has(m.name));
}

/** Applies what is missing and returns the names applied now (empty when up to date). */
export async function migrate(
  client: SqlClient,
  opts: { migrations?: Migration[]; prelude?: string } = {},
): Promise<string[]> {
  const migrations = opts.migrations ?? loadMigrations();
  // A start after the first finds everything applied: one read instead of a locked transaction and a
  // CREATE TABLE. Anything missing (or no table yet) takes the locked path, which checks again under the lock.
  if (await allApplied(client, migrations)) return [];
  const applied: string[] = [];
  await client.exec('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_ID]);
    // Under the lock, so two nodes creating the same schema do not race.
    if (opts.prelude) await client.exec(opts.prelude);
    await client.exec(
      'CREATE TABLE IF NOT EXISTS fountain_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set(
      (await client.query<{ name: string }>('SELECT name FROM fountain_migrations')).map((r) => r.name),
    );
    for (const m of migrations) {
      if (done.has(m.name)) continue;
      await client.exec(m.sql);
      await client.query('INSERT INTO fountain_migrations (name) VALUES ($1)', [m.name]);
      applied.push(m.name);
    }
    await client.exec('COMMIT');
  } catch (e) {
    await client.exec('ROLLBACK');
    throw e;
  }
  return applied;
}
