/**
 * Opens the store: embedded PGlite under the data directory by default, a real PostgreSQL
 * server when a URL is given. Both yield the same Drizzle database type, so queries are shared.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import type { Logger as QueryLogger } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { loadMigrations, migrate, type SqlClient } from './migrate.ts';
import { createPglite } from './pglite-artifacts.ts';
import { PgliteThread } from './pglite-thread.ts';
import {
  bundledTemplateRoot,
  copyTemplate,
  defaultTemplateRoot,
  finishTemplate,
  isTemplateCopyError,
  templateFor,
  templateUnusable,
} from './pglite-template.ts';
import type { Schema } from './schema.ts';

export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface Database {
  readonly db: Db;
  readonly kind: 'pglite' | 'postgres';
  /** Migrations applied by this open (empty when the database was up to date); a new embedded database copied from its template counts them all. */
  readonly migrated: string[];
  /** Why a new embedded database was made without its template, when it was (the server logs it). */
  readonly templateError?: string;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** A postgres:// URL; when absent, PGlite under `dataDir`. */
  url?: string | undefined;
  /** Where PGlite keeps its files (`<dataDir>/pgdata`). Required without `url`. */
  dataDir?: string | undefined;
  /**
   * PostgreSQL only: a schema to create and put first on the search path. Lets parallel test
   * runs share one database without colliding.
   */
  schema?: string | undefined;
  /** Told every statement the query builder sends (benchmarks count a turn's statements with it). */
  queryLogger?: QueryLogger | undefined;
  /** PGlite only: where migrated templates of new databases are kept (pglite-template.ts); null makes each new one from scratch. */
  templateDir?: string | null | undefined;
  /** PGlite only: the template made at install time, tried before making one; null skips it (tests of the making). */
  bundledTemplateDir?: string | null | undefined;
  /**
   * PGlite only: run it on a thread of its own (pglite-thread.ts) instead of this one. `fountain server`
   * and `up` do: the open overlaps their start-up and no statement stalls their event loop. A process that
   * opens many databases (the tests) keeps them here, where PGlite compiles its WebAssembly once per
   * process and a statement crosses no thread.
   */
  thread?: boolean | undefined;
}

/** What the migrations and the query builder need of PGlite, in this thread or on its own. */
type EmbeddedClient = Pick<PgliteThread, 'query' | 'close'> & { exec(text: string): Promise<unknown> };

/** Where an embedded database runs. */
interface EmbeddedHost {
  /** Opens the database in `dir`, a new one copied from template `seed` first (a failed copy: TemplateCopyError). */
  open(dir: string, seed?: string): Promise<EmbeddedClient>;
  /** Ends what open did not take over (the thread of a failed open). */
  abandon(): Promise<void>;
}

/** PGlite in this thread, created with the preloaded WebAssembly when `fountain` began one. */
function inProcessHost(): EmbeddedHost {
  return {
    open: async (dir, seed) => {
      if (seed !== undefined) copyTemplate(seed, dir);
      return createPglite(dir, PGLITE_SETTINGS);
    },
    abandon: async () => {},
  };
}

/**
 * PGlite on a thread started now, so its start, the template's copy and the open run while the caller
 * goes on; the copy and the open are one request, with no wait on the caller's event loop between them.
 */
function threadHost(): EmbeddedHost {
  const thread = new PgliteThread();
  return {
    open: async (dir, seed) => {
      await thread.open(dir, PGLITE_SETTINGS, seed);
      return thread;
    },
    abandon: () => thread.close(),
  };
}

const sqlClientOf = (client: EmbeddedClient): SqlClient => ({
  exec: async (text) => {
    await client.exec(text);
  },
  query: async <T extends Record<string, unknown>>(text: string, params?: unknown[]) =>
    (await client.query<T>(text, params)).rows,
});

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  return opts.url
    ? openPostgres(opts.url, opts.schema, opts.queryLogger)
    : openPglite(
        opts.dataDir,
        opts.queryLogger,
        opts.templateDir === undefined ? defaultTemplateRoot() : opts.templateDir,
        opts.bundledTemplateDir === undefined ? bundledTemplateRoot() : opts.bundledTemplateDir,
        opts.thread === true,
      );
}

/** A second process opening the same embedded database would corrupt it; this one refuses instead. */
export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    lockFile: string,
  ) {
    super(
      `${dataDir} is already open in another Fountain process (pid ${pid}); stop that one first or use another data directory. If pid ${pid} is not Fountain, delete ${lockFile}.`,
    );
    this.name = 'DataDirInUseError';
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * PGlite has no lock of its own: a lock file names the process holding the directory. One left by a
 * process that is gone (killed, crashed) is taken over. Returns the release.
 */
function lockDataDir(dataDir: string): () => void {
  const file = join(dataDir, 'pglite.lock');
  for (;;) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return () => {
        try {
          if (readFileSync(file, 'utf8').trim() === String(process.pid)) rmSync(file, { force: true });
        } catch {
          // Already released (close called twice) or removed by hand: nothing to do.
        }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    const holder = Number.parseInt(readFileSync(file, 'utf8'), 10);
    // The same process may reopen (a restart in one test); only another live process is a conflict.
    if (holder === process.pid) return () => {};
    if (Number.isInteger(holder) && holder > 0 && alive(holder)) throw new DataDirInUseError(dataDir, holder, file);
    rmSync(file, { force: true });
  }
}

/**
 * Server settings for the embedded database, on its command line (never written to postgresql.conf).
 * PGlite runs one backend inside this process's WebAssembly memory, which RSS counts and which never
 * shrinks: the default 128 MB of shared buffers alone holds ~120 MiB once touched. Fountain's working
 * set (recent events, conversations, keys) fits in 16 MB; a page beyond it is re-read from the data
 * directory through the OS page cache. Measured in docs/benchmarks.md (memory, turn).
 */
export const PGLITE_SETTINGS: readonly string[] = ['shared_buffers=16MB'];

async function openPglite(
  dataDir: string | undefined,
  logger: QueryLogger | undefined,
  templateRoot: string | null,
  bundledRoot: string | null,
  thread: boolean,
): Promise<Database> {
  if (!dataDir) throw new Error('openDatabase: dataDir is required when no database URL is given');
  const dir = join(dataDir, 'pgdata');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const unlock = lockDataDir(dataDir);
  const hostOf = thread ? threadHost : inProcessHost;
  const host = hostOf();
  // A new data directory (no PG_VERSION yet) starts from the template; its migrations are read once for both.
  let migrations: ReturnType<typeof loadMigrations> | undefined;
  // The query builder and the tables load while the database opens (on its thread, or between PGlite's awaits).
  const builder = Promise.all([import('drizzle-orm/pglite'), import('./schema.ts')]);
  // Awaited below once the database is open; a failed open must not leave it unhandled meanwhile.
  builder.catch(() => undefined);
  let client: EmbeddedClient;
  let fromTemplate: string[] | null = null;
  let templateError: string | undefined;
  try {
    if (templateRoot !== null && !existsSync(join(dir, 'PG_VERSION'))) migrations = loadMigrations();
    let seed: string | undefined;
    if (migrations && templateRoot !== null) {
      try {
        seed = await templateFor(
          templateRoot,
          migrations,
          async (at) => {
            // A template made on the way is a database of its own, opened and closed before ours.
            const maker = hostOf();
            let made: EmbeddedClient | null = null;
            try {
              made = await maker.open(at);
              const sql = sqlClientOf(made);
              await migrate(sql, { migrations });
              await finishTemplate(sql);
            } finally {
              await (made ? made.close() : maker.abandon());
            }
          },
          bundledRoot,
        );
      } catch (e) {
        templateError = templateUnusable(dir, templateRoot, e);
      }
    }
    try {
      client = await host.open(dir, seed);
    } catch (e) {
      if (seed === undefined || templateRoot === null || !isTemplateCopyError(e)) throw e;
      templateError = templateUnusable(dir, templateRoot, e);
      seed = undefined;
      client = await host.open(dir);
    }
    if (seed !== undefined && migrations) fromTemplate = migrations.map((m) => m.name);
  } catch (e) {
    await host.abandon();
    unlock();
    throw e;
  }
  try {
    const migrated = await migrate(sqlClientOf(client), migrations ? { migrations } : {});
    const [{ drizzle: drizzlePglite }, { schema }] = await builder;
    // The thread's client has the part of PGlite's interface the query builder calls (query, transaction).
    const db: Db = drizzlePglite({ client: client as unknown as PGlite, schema, ...(logger ? { logger } : {}) });
    return {
      db,
      kind: 'pglite',
      migrated: fromTemplate ?? migrated,
      ...(templateError ? { templateError } : {}),
      close: async () => {
        await client.close();
        unlock();
      },
    };
  } catch (e) {
    await client.close();
    unlock();
    throw e;
  }
}

async function openPostgres(
  url: string,
  searchSchema: string | undefined,
  logger: QueryLogger | undefined,
): Promise<Database> {
  if (searchSchema !== undefined && !SCHEMA_NAME.test(searchSchema)) {
    throw new Error(`openDatabase: schema ${JSON.stringify(searchSchema)} must match ${SCHEMA_NAME}`);
  }
  // Imported here, not at the top: the embedded default never needs node-postgres (~130 ms of CPU at start).
  const [{ default: pg }, { drizzle: drizzlePg }, { schema }] = await Promise.all([
    import('pg'),
    import('drizzle-orm/node-postgres'),
    import('./schema.ts'),
  ]);
  const pool = new pg.Pool({
    connectionString: url,
    ...(searchSchema ? { options: `-c search_path=${searchSchema}` } : {}),
  });
  // An idle client losing its server must not crash the process; the next query reports it.
  pool.on('error', () => {});
  try {
    const conn = await pool.connect();
    let migrated: string[];
    try {
      migrated = await migrate(
        {
          exec: async (text) => {
            await conn.query(text);
          },
          query: async <T extends Record<string, unknown>>(text: string, params?: unknown[]) =>
            (await conn.query<T>(text, params)).rows,
        },
        searchSchema ? { prelude: `CREATE SCHEMA IF NOT EXISTS "${searchSchema}"` } : {},
      );
    } finally {
      conn.release();
    }
    const db: Db = drizzlePg({ client: pool, schema, ...(logger ? { logger } : {}) });
    return { db, kind: 'postgres', migrated, close: () => pool.end() };
  } catch (e) {
    await pool.end();
    throw e;
  }
}
