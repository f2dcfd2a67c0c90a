/**
 * The API shape of an environment: snake_case fields, `networking_config`, and secret names only.
 */
import type { Environment } from '../store/environment-schema.ts';

export function environmentView(e: Environment, secretKeys: readonly string[]) {
  return {
    id: e.id,
    name: e.name,
    description: e.description,
    packages: { apt: [...e.packages.apt], npm: [...e.packages.npm] },
    env_vars: e.envVars,
    secret_keys: [...secretKeys],
    setup_script: e.setupScript,
    networking_type: e.networkingType,
    networking_config: { allowed_hosts: [...e.allowedHosts] },
    repositories: e.repositories.map((r) => ({
      url: r.url,
      mount_path: r.mount_path,
      ...(r.ref ? { ref: r.ref } : {}),
      ...(r.secret_key ? { secret_key: r.secret_key } : {}),
    })),
    checkpoint_id: e.checkpointId,
    metadata: e.metadata,
    inserted_at: e.insertedAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
  };
}
