/**
 * The database type the engine's queries accept: any Drizzle PostgreSQL database (PGlite or pg),
 * whatever relational schema it was opened with, since these queries use only the query builder.
 */
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';

// The schema parameter only shapes `db.query`, which these modules never use.
export type EngineDb = PgDatabase<PgQueryResultHKT, Record<string, unknown>>;

/** The rows of a raw `db.execute(sql…)`: both drivers answer `{ rows }`. */
export const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/** PostgreSQL's unique_violation, whichever driver raised it (drizzle may wrap it in `cause`). */
export function isUniqueViolation(e: unknown): boolean {
  for (let cur: unknown = e, depth = 0; cur && depth < 4; depth++) {
    if (typeof cur === 'object' && (cur as { code?: unknown }).code === '23505') return true;
    cur = typeof cur === 'object' ? (cur as { cause?: unknown }).cause : undefined;
  }
  return false;
}
