/**
 * Environments as a service: CRUD for routes and pages, write-only secrets sealed with the server key,
 * and what a launch needs (the environment and its opened secrets, merged with launch-attached ones).
 */
import type { z } from '@hono/zod-openapi';
import { Private } from '../../sandbox/private.ts';
import { SANDBOX_HOME } from '../../sandbox/home.ts';
import type { EnvironmentCreateBody } from './schemas.ts';
import { open, seal } from '../credentials/sealing.ts';
import type { EngineDb } from '../store/engine-db.ts';
import type { Environment, Repository } from '../store/environment-schema.ts';
import {
  deleteEnvironment,
  deleteSecretRow,
  getEnvironment,
  insertEnvironment,
  listEnvironments,
  listSecretRows,
  updateEnvironment,
  upsertSecretRow,
  type EnvironmentFields,
  type EnvironmentWrite,
} from './store.ts';

export interface SecretName {
  readonly key: string;
  readonly insertedAt: Date;
  readonly updatedAt: Date;
}

/** What a launch is provisioned with: the environment (null: none) and every secret, opened. */
export interface LaunchEnvironment {
  readonly environment: Environment | null;
  /** Environment secrets overridden on collision by launch-attached ones. */
  readonly secrets: Private<ReadonlyMap<string, string>>;
}

export type LaunchEnvironmentResult =
  | { ok: true; value: LaunchEnvironment }
  | { ok: false; code: 'environment_not_found' | 'secret_unreadable'; message: string };

const secretAad = (environmentId: string, key: string) => `environment-secret:${environmentId}:${key}`;
const launchAad = (accountId: string) => `launch-secrets:${accountId}`;

export class EnvironmentService {
  constructor(
    private readonly db: EngineDb,
    private readonly key: Private<Buffer>,
  ) {}

  list(accountId: string): Promise<Environment[]> {
    return listEnvironments(this.db, accountId);
  }

  get(accountId: string, id: string): Promise<Environment | undefined> {
    return getEnvironment(this.db, accountId, id);
  }

  async create(
    accountId: string,
    fields: EnvironmentFields,
    secrets: Readonly<Record<string, string>>,
  ): Promise<EnvironmentWrite<Environment>> {
    const r = await insertEnvironment(this.db, accountId, fields);
    if (r.ok)
      for (const [k, v] of Object.entries(secrets))
        await upsertSecretRow(this.db, r.environment.id, k, seal(this.key, v, secretAad(r.environment.id, k)));
    return r.ok ? { ok: true, environment: (await getEnvironment(this.db, accountId, r.environment.id))! } : r;
  }

  async update(
    accountId: string,
    id: string,
    patch: Partial<EnvironmentFields>,
    secrets: Readonly<Record<string, string>>,
  ): Promise<EnvironmentWrite<Environment | undefined>> {
    const r = await updateEnvironment(this.db, accountId, id, patch);
    if (!r.ok || !r.environment) return r;
    for (const [k, v] of Object.entries(secrets))
      await upsertSecretRow(this.db, id, k, seal(this.key, v, secretAad(id, k)));
    return { ok: true, environment: await getEnvironment(this.db, accountId, id) };
  }

  delete(accountId: string, id: string): Promise<boolean> {
    return deleteEnvironment(this.db, accountId, id);
  }

  /** Secret names (never values) of an environment the caller loaded for the account. */
  async secretNames(environmentId: string): Promise<SecretName[]> {
    return (await listSecretRows(this.db, environmentId)).map((r) => ({
      key: r.key,
      insertedAt: r.insertedAt,
      updatedAt: r.updatedAt,
    }));
  }

  /** Seals and stores one secret; true when the key was new. */
  putSecret(environmentId: string, key: string, value: string): Promise<boolean> {
    return upsertSecretRow(this.db, environmentId, key, seal(this.key, value, secretAad(environmentId, key)));
  }

  deleteSecret(environmentId: string, key: string): Promise<boolean> {
    return deleteSecretRow(this.db, environmentId, key);
  }

  /** Launch-attached secrets as one sealed text for the conversation row (null when there are none). */
  sealLaunchSecrets(accountId: string, secrets: Readonly<Record<string, string>> | undefined): string | null {
    if (!secrets || Object.keys(secrets).length === 0) return null;
    return seal(this.key, JSON.stringify(secrets), launchAad(accountId));
  }

  /** The environment of a launch and its secrets, opened; a secret that does not open is an error naming its key only. */
  async forLaunch(
    accountId: string,
    environmentId: string | null,
    launchSealed: string | null,
  ): Promise<LaunchEnvironmentResult> {
    const merged = new Map<string, string>();
    let environment: Environment | null = null;
    if (environmentId) {
      environment = (await getEnvironment(this.db, accountId, environmentId)) ?? null;
      if (!environment)
        return {
          ok: false,
          code: 'environment_not_found',
          message: 'the environment of this conversation no longer exists',
        };
      for (const row of await listSecretRows(this.db, environmentId)) {
        const v = open(this.key, row.sealed, secretAad(environmentId, row.key));
        if (v === null)
          return {
            ok: false,
            code: 'secret_unreadable',
            message: `secret ${row.key} does not open with this server's key (FOUNTAIN_SECRET_KEY changed?); set it again`,
          };
        merged.set(row.key, v);
      }
    }
    if (launchSealed) {
      const text = open(this.key, launchSealed, launchAad(accountId));
      if (text === null)
        return {
          ok: false,
          code: 'secret_unreadable',
          message: "the secrets attached at launch do not open with this server's key",
        };
      for (const [k, v] of Object.entries(JSON.parse(text) as Record<string, string>)) merged.set(k, v);
    }
    return { ok: true, value: { environment, secrets: new Private(merged) } };
  }
}

/** A repository without a mount_path lands in the sandbox home (<home>/<its name>); a relative one under it. */
export function withMountPath(r: {
  url: string;
  mount_path?: string | undefined;
  ref?: string | undefined;
  secret_key?: string | undefined;
}): Repository {
  const base =
    (new URL(r.url).pathname.split('/').filter(Boolean).pop() ?? 'repository').replace(/\.git$/, '') || 'repository';
  const given = r.mount_path ?? base;
  const mount_path = given.startsWith('/') ? given : `${SANDBOX_HOME}/${given}`;
  return {
    url: r.url,
    mount_path,
    ...(r.ref ? { ref: r.ref } : {}),
    ...(r.secret_key ? { secret_key: r.secret_key } : {}),
  };
}

/** The stored fields of a validated create body (the API's and the environments page's). */
export function fieldsFromCreate(b: z.infer<typeof EnvironmentCreateBody>): EnvironmentFields {
  return {
    name: b.name,
    description: b.description,
    packages: b.packages,
    envVars: b.env_vars,
    setupScript: b.setup_script,
    networkingType: b.networking_type,
    allowedHosts: b.networking_config.allowed_hosts,
    repositories: b.repositories.map(withMountPath),
    checkpointId: b.checkpoint_id,
    metadata: b.metadata,
  };
}
