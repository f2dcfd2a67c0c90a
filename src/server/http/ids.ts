/**
 * Path ids: anything that is not a UUID cannot name a row, so it is simply not found
 * (and never reaches PostgreSQL, which would reject it as a uuid).
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (s: string): boolean => UUID.test(s);

/** A unique violation from either driver (Drizzle wraps the driver error in `cause`). */
export function isUniqueViolation(e: unknown): boolean {
  for (let cur: unknown = e, depth = 0; cur && depth < 5; depth++) {
    if (typeof cur === 'object' && (cur as { code?: unknown }).code === '23505') return true;
    cur = typeof cur === 'object' ? (cur as { cause?: unknown }).cause : undefined;
  }
  return false;
}
