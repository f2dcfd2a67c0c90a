/**
 * Runner records: one row per (account, name), upserted when a daemon registers.
 * Whether a runner is online is never stored; it is a question for the live registry.
 */
import { and, asc, eq, getTableColumns, sql } from 'drizzle-orm';
import { z } from 'zod';
import {
  parseRunnerBackend,
  parseRunnerCapabilities,
  RUNNER_BACKENDS,
  RUNNER_CAPABILITIES,
  type RunnerBackend,
  type RunnerCapability,
} from '../../wire/index.ts';
import type { Db } from '../store/db.ts';
import { runners, type Runner } from '../store/schema.ts';

export const RUNNER_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** What a daemon reports about itself when it dials in (the WebSocket query). */
export const runnerRegistrationSchema = z.object({
  name: z
    .string({ error: 'name is required' })
    .regex(RUNNER_NAME_PATTERN, 'name must match ^[a-z0-9][a-z0-9._-]{0,62}$'),
  hostname: z.string().max(255).optional(),
  os: z.string().max(40).optional(),
  arch: z.string().max(40).optional(),
  version: z.string().max(80).optional(),
  root: z.string().max(1024).optional(),
  /** Parsed from the dial by the wire's rules (known names only), so never a raw query value. */
  backend: z.enum(RUNNER_BACKENDS).nullable().optional(),
  capabilities: z.array(z.enum(RUNNER_CAPABILITIES)).optional(),
});
export type RunnerRegistration = z.infer<typeof runnerRegistrationSchema>;

/** The stored backend, known names only (a row may predate a rename or come from a newer node). */
export const runnerBackendOf = (r: Runner): RunnerBackend | null => parseRunnerBackend(r.backend);

/** The stored capabilities; a row from before migration 0073 has none recorded: the upstream set. */
export const runnerCapabilitiesOf = (r: Runner): RunnerCapability[] =>
  parseRunnerCapabilities(r.capabilities?.join(','));

export async function findRunnerByName(db: Db, accountId: string, name: string): Promise<Runner | undefined> {
  const [row] = await db
    .select()
    .from(runners)
    .where(and(eq(runners.accountId, accountId), eq(runners.name, name)));
  return row;
}

export async function findRunner(db: Db, accountId: string, id: string): Promise<Runner | undefined> {
  const [row] = await db
    .select()
    .from(runners)
    .where(and(eq(runners.accountId, accountId), eq(runners.id, id)));
  return row;
}

/**
 * Inserts or refreshes the row for (account, name), stamping connected_at and last_seen_at.
 * `inserted` tells a first registration (audited) from a reconnect (silent).
 */
export async function upsertRunner(
  db: Db,
  accountId: string,
  reg: RunnerRegistration,
  now = new Date(),
): Promise<{ runner: Runner; inserted: boolean }> {
  const fields = {
    hostname: reg.hostname ?? null,
    os: reg.os ?? null,
    arch: reg.arch ?? null,
    version: reg.version ?? null,
    root: reg.root ?? null,
    backend: reg.backend ?? null,
    capabilities: reg.capabilities ?? null,
    connectedAt: now,
    lastSeenAt: now,
    updatedAt: now,
  };
  const [row] = await db
    .insert(runners)
    .values({ accountId, name: reg.name, ...fields })
    .onConflictDoUpdate({ target: [runners.accountId, runners.name], set: fields })
    // xmax is 0 only for a freshly inserted tuple: how PostgreSQL tells insert from update in one statement.
    .returning({ ...getTableColumns(runners), inserted: sql<boolean>`(xmax = 0)` });
  const { inserted, ...runner } = row!;
  return { runner, inserted };
}

export async function touchRunner(db: Db, id: string, at = new Date()): Promise<void> {
  await db.update(runners).set({ lastSeenAt: at }).where(eq(runners.id, id));
}

/** Most recent connection first (never-connected last), then by name. */
export async function listRunners(db: Db, accountId: string): Promise<Runner[]> {
  return db
    .select()
    .from(runners)
    .where(eq(runners.accountId, accountId))
    .orderBy(sql`${runners.connectedAt} DESC NULLS LAST`, asc(runners.name));
}

export async function deleteRunner(db: Db, accountId: string, id: string): Promise<Runner | undefined> {
  const [row] = await db
    .delete(runners)
    .where(and(eq(runners.accountId, accountId), eq(runners.id, id)))
    .returning();
  return row;
}
