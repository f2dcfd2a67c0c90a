/**
 * A new embedded database starts as a copy of a migrated template: PGlite's initdb costs 6–11 s of CPU
 * on a 2-core machine, copying the template's ~40 MB and opening it ~0.5 s. `npm install` makes one in
 * the package (scripts/make-pglite-template.mjs), so even the first start on a new machine copies it;
 * the user's cache holds the ones made later, when the package's is missing or for other migrations.
 */
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Migration, SqlClient } from './migrate.ts';

/** `$XDG_CACHE_HOME/fountain/pglite`, else `~/.cache/fountain/pglite`. */
export function defaultTemplateRoot(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const xdg = env.XDG_CACHE_HOME;
  return join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache'), 'fountain', 'pglite');
}

/**
 * The template `npm install` made, inside the package (`.cache/pglite-template`, beside src/ and dist/;
 * this module sits three folders below the package root in both).
 */
export function bundledTemplateRoot(): string {
  return fileURLToPath(new URL('../../../.cache/pglite-template', import.meta.url));
}

function pgliteVersion(): string {
  const pkg = new URL('../package.json', import.meta.resolve('@electric-sql/pglite'));
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version?: unknown }).version as string;
}

/**
 * What a template keeps besides the migrated database: nothing. PGlite's initdb also makes template0 and
 * template1, ~14 MB in ~770 files that every new data directory would copy (two thirds of the copy's
 * time) and Fountain never uses: it creates no database.
 */
const FINISH = [
  'ALTER DATABASE template0 WITH IS_TEMPLATE false',
  'DROP DATABASE template0',
  'ALTER DATABASE template1 WITH IS_TEMPLATE false',
  'DROP DATABASE template1',
  'CHECKPOINT',
];

/** Run on a template's database once it is migrated, before it is closed and kept. */
export async function finishTemplate(client: SqlClient): Promise<void> {
  for (const statement of FINISH) await client.exec(statement);
}

/**
 * Names a template by everything that shapes its files: PGlite's version, each migration's name and text,
 * and what finishTemplate does.
 */
export function templateKey(migrations: readonly Migration[], version = pgliteVersion()): string {
  const h = createHash('sha256').update(`pglite ${version}\n${FINISH.join(';\n')}\n`);
  for (const m of migrations) h.update(`${m.name}\n${m.sql}\n`);
  return h.digest('hex').slice(0, 24);
}

const complete = (dir: string): boolean => existsSync(join(dir, 'PG_VERSION'));

/** A template's copy into a new data directory failed (the caller makes the database from scratch then). */
export class TemplateCopyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateCopyError';
  }
}

/** Also true of one that crossed the database's thread, which keeps an error's name but not its class. */
export const isTemplateCopyError = (e: unknown): boolean => e instanceof Error && e.name === 'TemplateCopyError';

/** Copies template `from` into the empty directory `to`; a failure is a TemplateCopyError. */
export function copyTemplate(from: string, to: string): void {
  try {
    cpSync(from, to, { recursive: true });
  } catch (e) {
    throw new TemplateCopyError((e as Error).message);
  }
}

/**
 * The directory of the template for `migrations`: the cache's, else the one in `bundled` (the
 * package's), else one made first with `make` (initdb and migrations in the directory it is given) into
 * the cache. A template appears only whole: it is made beside the cache's entry and renamed into it, and
 * when two processes make one at once the first rename wins. Throws when there is none to be had (an
 * unwritable cache, a full disk); the caller makes the database the slow way then.
 */
export async function templateFor(
  root: string,
  migrations: readonly Migration[],
  make: (dir: string) => Promise<void>,
  bundled: string | null = bundledTemplateRoot(),
): Promise<string> {
  const key = templateKey(migrations);
  const entry = join(root, key);
  const shipped = bundled === null ? null : join(bundled, key);
  if (shipped !== null && !complete(entry) && complete(shipped)) return shipped;
  if (!complete(entry)) {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    const building = join(root, `.building-${process.pid}-${randomBytes(4).toString('hex')}`);
    mkdirSync(building, { mode: 0o700 });
    try {
      await make(building);
      // Only a tampered cache holds an entry without PG_VERSION; it is replaced.
      if (existsSync(entry) && !complete(entry)) rmSync(entry, { recursive: true, force: true });
      try {
        renameSync(building, entry);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || !complete(entry)) throw e;
      }
    } finally {
      rmSync(building, { recursive: true, force: true });
    }
  }
  return entry;
}

/** Empties `pgdata` after a template could not be had or copied, and says so for the server's log. */
export function templateUnusable(pgdata: string, root: string, e: unknown): string {
  for (const f of readdirSync(pgdata)) rmSync(join(pgdata, f), { recursive: true, force: true });
  return `the embedded database template in ${root} could not be used (${(e as Error).message}); made the database from scratch`;
}
