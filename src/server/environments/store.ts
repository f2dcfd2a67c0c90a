/**
 * Environment rows and their sealed secrets. Queries are tenant-scoped: a foreign id reads as absent.
 * Values here are sealed; only the service opens them.
 */
import { and, asc, eq } from 'drizzle-orm';
import {
  environments,
  environmentSecrets,
  type Environment,
  type EnvironmentSecretRow,
  type NetworkingType,
  type Packages,
  type Repository,
} from '../store/environment-schema.ts';
import { isUniqueViolation, type EngineDb } from '../store/engine-db.ts';

export interface EnvironmentFields {
  name: string;
  description: string;
  packages: Packages;
  envVars: Record<string, string>;
  setupScript: string;
  networkingType: NetworkingType;
  allowedHosts: string[];
  repositories: Repository[];
  checkpointId: string | null;
  metadata: Record<string, unknown>;
}

export type EnvironmentWrite<T> = { ok: true; environment: T } | { ok: false; reason: 'name_taken' };

export async function listEnvironments(db: EngineDb, accountId: string): Promise<Environment[]> {
  return db.select().from(environments).where(eq(environments.accountId, accountId)).orderBy(asc(environments.name));
}

export async function getEnvironment(db: EngineDb, accountId: string, id: string): Promise<Environment | undefined> {
  const [row] = await db
    .select()
    .from(environments)
    .where(and(eq(environments.accountId, accountId), eq(environments.id, id)));
  return row;
}

export async function insertEnvironment(
  db: EngineDb,
  accountId: string,
  fields: EnvironmentFields,
): Promise<EnvironmentWrite<Environment>> {
  try {
    const [row] = await db
      .insert(environments)
      .values({ accountId, ...fields })
      .returning();
    return { ok: true, environment: row! };
  } catch (e) {
    if (isUniqueViolation(e)) return { ok: false, reason: 'name_taken' };
    throw e;
  }
}

export async function updateEnvironment(
  db: EngineDb,
  accountId: string,
  id: string,
  patch: Partial<EnvironmentFields>,
): Promise<EnvironmentWrite<Environment | undefined>> {
  try {
    const [row] = await db
      .update(environments)
      .set({ ...patch, updatedAt: new Date() })
      .where(and(eq(environments.accountId, accountId), eq(environments.id, id)))
      .returning();
    return { ok: true, environment: row };
  } catch (e) {
    if (isUniqueViolation(e)) return { ok: false, reason: 'name_taken' };
    throw e;
  }
}

export async function deleteEnvironment(db: EngineDb, accountId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(environments)
    .where(and(eq(environments.accountId, accountId), eq(environments.id, id)))
    .returning({ id: environments.id });
  return rows.length > 0;
}

/** The secret rows of an environment (the caller checked that the environment is the account's). */
export async function listSecretRows(db: EngineDb, environmentId: string): Promise<EnvironmentSecretRow[]> {
  return db
    .select()
    .from(environmentSecrets)
    .where(eq(environmentSecrets.environmentId, environmentId))
    .orderBy(asc(environmentSecrets.key));
}

/** Inserts or replaces one sealed secret; true when it was new. */
export async function upsertSecretRow(
  db: EngineDb,
  environmentId: string,
  key: string,
  sealed: string,
): Promise<boolean> {
  const [before] = await db
    .select({ key: environmentSecrets.key })
    .from(environmentSecrets)
    .where(and(eq(environmentSecrets.environmentId, environmentId), eq(environmentSecrets.key, key)));
  await db
    .insert(environmentSecrets)
    .values({ environmentId, key, sealed })
    .onConflictDoUpdate({
      target: [environmentSecrets.environmentId, environmentSecrets.key],
      set: { sealed, updatedAt: new Date() },
    });
  // A secret change is an environment change: the next launch sees a newer updated_at.
  await db.update(environments).set({ updatedAt: new Date() }).where(eq(environments.id, environmentId));
  return !before;
}

export async function deleteSecretRow(db: EngineDb, environmentId: string, key: string): Promise<boolean> {
  const rows = await db
    .delete(environmentSecrets)
    .where(and(eq(environmentSecrets.environmentId, environmentId), eq(environmentSecrets.key, key)))
    .returning({ key: environmentSecrets.key });
  return rows.length > 0;
}
