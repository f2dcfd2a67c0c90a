/**
 * The server's database as its configuration names it (PostgreSQL by URL, else the embedded one in the
 * data directory): opened by startServer, or begun earlier by a command so it overlaps the server's load.
 */
import { mkdirSync } from 'node:fs';
import type { Logger as QueryLogger } from 'drizzle-orm';
import type { Env } from './config.ts';
import { databaseEnv } from './database-env.ts';
import type { RunningServer, StartServerOptions } from './start.ts';
import { openDatabase, type Database } from './store/db.ts';

export interface ServerDatabaseOptions {
  readonly dataDir: string;
  readonly env: Env;
  readonly databaseSchema?: string | undefined;
  readonly queryLogger?: QueryLogger | undefined;
  /** The embedded database on a thread of its own (store/db.ts); PostgreSQL ignores it. */
  readonly thread?: boolean;
}

/** Throws ConfigError at once for a bad configuration; the open itself is the promise. */
export function openServerDatabase(opts: ServerDatabaseOptions): Promise<Database> {
  const config = databaseEnv(opts.env);
  mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  return openDatabase({
    url: config.databaseUrl,
    dataDir: opts.dataDir,
    schema: opts.databaseSchema,
    queryLogger: opts.queryLogger,
    templateDir: config.pgliteTemplateDir,
    thread: opts.thread,
  });
}

/**
 * startServer for `fountain server` and `up`, with the database's open begun first: the embedded one on
 * a thread of its own, PostgreSQL on the network, while the server's modules load here instead of after them.
 */
export async function startServerWithEarlyDatabase(opts: StartServerOptions): Promise<RunningServer> {
  const database = openServerDatabase({
    dataDir: opts.dataDir,
    env: opts.env ?? process.env,
    databaseSchema: opts.databaseSchema,
    queryLogger: opts.queryLogger,
    thread: true,
  });
  // Awaited by startServer; a failed open must not count as unhandled while the modules load.
  database.catch(() => undefined);
  let start: typeof import('./start.ts');
  try {
    start = await import('./start.ts');
  } catch (e) {
    await database.then(
      (d) => d.close(),
      () => undefined,
    );
    throw e;
  }
  return start.startServer({ ...opts, database });
}
