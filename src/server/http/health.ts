/**
 * Liveness and readiness: `/health` answers while the process serves HTTP; `/health/ready` also
 * needs the database to answer and every migration this build ships to be applied.
 */
import { sql } from 'drizzle-orm';
import { Hono } from 'hono';
import type { Logger } from 'pino';
import type { Db } from '../store/db.ts';
import { loadMigrations } from '../store/migrate.ts';

export type Readiness =
  | { readonly ready: true; readonly applied: number }
  | { readonly ready: false; readonly database: 'unreachable' | 'ok'; readonly pending: readonly string[] };

/** Compares the applied migrations with the ones on disk; a newer node's extra migrations are fine. */
export async function readiness(db: Db, shipped: readonly string[]): Promise<Readiness> {
  let applied: Set<string>;
  try {
    const result = await db.execute(sql`SELECT name FROM fountain_migrations`);
    const rows = (result as unknown as { rows: Array<{ name: unknown }> }).rows;
    applied = new Set(rows.map((r) => String(r.name)));
  } catch {
    // Both "server gone" and "table missing" land here; a cheap probe tells them apart.
    try {
      await db.execute(sql`SELECT 1`);
      return { ready: false, database: 'ok', pending: [...shipped] };
    } catch {
      return { ready: false, database: 'unreachable', pending: [] };
    }
  }
  const pending = shipped.filter((m) => !applied.has(m));
  return pending.length ? { ready: false, database: 'ok', pending } : { ready: true, applied: shipped.length };
}

export function healthRoutes(deps: {
  readonly db: Db;
  readonly logger: Logger;
  readonly migrations?: readonly string[];
}): Hono {
  const shipped = deps.migrations ?? loadMigrations().map((m) => m.name);
  const app = new Hono();
  app.get('/health', (c) => c.json({ status: 'ok' }, 200));
  app.get('/health/ready', async (c) => {
    const r = await readiness(deps.db, shipped);
    if (r.ready)
      return c.json({ status: 'ready', database: 'ok', migrations: { applied: r.applied, pending: [] } }, 200);
    deps.logger.warn({ database: r.database, pending: r.pending }, 'not ready');
    return c.json({ status: 'not_ready', database: r.database, migrations: { pending: r.pending } }, 503);
  });
  return app;
}
