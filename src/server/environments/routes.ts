/**
 * Environment routes: `/api/environments[/:id][/secrets[/:key]]`. Secrets are
 * write-only: set, listed by name, deleted; their values never leave the server through the API.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { bearer, errorResponses, IdParam, newRouter, type RouteDeps } from '../http/common.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import type { Environment } from '../store/environment-schema.ts';
import {
  EnvironmentCreateBody,
  EnvironmentPatchBody,
  EnvironmentSchema,
  SecretBody,
  SecretKeyName,
  SecretKeyParams,
  SecretListSchema,
} from './schemas.ts';
import { fieldsFromCreate, withMountPath, type EnvironmentService } from './service.ts';
import type { EnvironmentFields } from './store.ts';
import { environmentView } from './views.ts';
import { environmentBranches, type RepoRefusal } from './branches.ts';

export interface EnvironmentRouteDeps extends RouteDeps {
  readonly environments: EnvironmentService;
}

/** The HTTP status of a repository refusal: the remote's own failures are a bad gateway, not the caller's. */
export const REPO_REFUSAL_STATUS: Record<RepoRefusal['code'], 404 | 409 | 422 | 502> = {
  environment_not_found: 404,
  secret_unreadable: 409,
  no_repository: 422,
  repository_not_in_environment: 422,
  branch_not_found: 422,
  remote_unreachable: 502,
  remote_auth_failed: 502,
};

const BranchesQuery = z.object({
  repository: z
    .string()
    .max(2000)
    .optional()
    .openapi({ description: "One of the environment's repository URLs; its first when absent" }),
});

const BranchesSchema = z
  .object({
    repository: z.string(),
    default_branch: z.string().nullable(),
    branches: z.array(z.string()),
  })
  .openapi('RepositoryBranches');

const fieldError = (field: string, message: string): ApiError =>
  new ApiError(422, 'validation_failed', `${field}: ${message}`, { errors: { [field]: [message] } });

export function environmentRoutes(deps: EnvironmentRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const svc = deps.environments;
  const auth = requireKey(deps.db, deps.logger, 'any');
  const ok = { 'application/json': { schema: z.object({ data: EnvironmentSchema }) } };

  const load = async (accountId: string, id: string): Promise<Environment> => {
    const e = isUuid(id) ? await svc.get(accountId, id) : undefined;
    if (!e) throw new ApiError(404, 'environment_not_found', 'environment not found');
    return e;
  };
  const view = async (e: Environment) =>
    environmentView(
      e,
      (await svc.secretNames(e.id)).map((s) => s.key),
    );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/environments',
      summary: 'List environments',
      security: bearer,
      middleware: [auth] as const,
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(EnvironmentSchema) }) } },
        },
        ...errorResponses(401),
      },
    }),
    async (c) => {
      const rows = await svc.list(c.get('principal').account.id);
      return c.json({ data: await Promise.all(rows.map(view)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/environments',
      summary: 'Create an environment (secrets are write-only)',
      security: bearer,
      middleware: [auth] as const,
      request: { body: { content: { 'application/json': { schema: EnvironmentCreateBody } }, required: true } },
      responses: { 201: { description: 'created', content: ok }, ...errorResponses(401, 422) },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const r = await svc.create(c.get('principal').account.id, fieldsFromCreate(b), b.secrets);
      if (!r.ok) throw fieldError('name', 'has already been taken');
      return c.json({ data: await view(r.environment) }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/environments/{id}',
      summary: 'One environment (secret names only)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 200: { description: 'ok', content: ok }, ...errorResponses(401, 404) },
    }),
    async (c) => c.json({ data: await view(await load(c.get('principal').account.id, c.req.valid('param').id)) }, 200),
  );

  const patch = (method: 'patch' | 'put') =>
    app.openapi(
      createRoute({
        method,
        path: '/api/environments/{id}',
        summary:
          'Update an environment (fields given are changed; secrets given are set, others kept); applied at the next launch',
        security: bearer,
        middleware: [auth] as const,
        request: {
          params: IdParam,
          body: { content: { 'application/json': { schema: EnvironmentPatchBody } }, required: true },
        },
        responses: { 200: { description: 'ok', content: ok }, ...errorResponses(401, 404, 422) },
      }),
      async (c) => {
        const accountId = c.get('principal').account.id;
        const current = await load(accountId, c.req.valid('param').id);
        const b = c.req.valid('json');
        const p: Partial<EnvironmentFields> = {};
        if (b.name !== undefined) p.name = b.name;
        if (b.description !== undefined) p.description = b.description;
        if (b.packages !== undefined) p.packages = b.packages;
        if (b.env_vars !== undefined) p.envVars = b.env_vars;
        if (b.setup_script !== undefined) p.setupScript = b.setup_script;
        if (b.networking_type !== undefined) p.networkingType = b.networking_type;
        if (b.networking_config !== undefined) p.allowedHosts = b.networking_config.allowed_hosts;
        if (b.repositories !== undefined) p.repositories = b.repositories.map(withMountPath);
        if (b.checkpoint_id !== undefined) p.checkpointId = b.checkpoint_id;
        if (b.metadata !== undefined) p.metadata = b.metadata;
        const r = await svc.update(accountId, current.id, p, b.secrets ?? {});
        if (!r.ok) throw fieldError('name', 'has already been taken');
        if (!r.environment) throw new ApiError(404, 'environment_not_found', 'environment not found');
        return c.json({ data: await view(r.environment) }, 200);
      },
    );
  patch('patch');
  patch('put');

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/environments/{id}',
      summary: 'Delete an environment; agents and conversations that named it launch without one',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'deleted' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      if (!isUuid(id) || !(await svc.delete(c.get('principal').account.id, id)))
        throw new ApiError(404, 'environment_not_found', 'environment not found');
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/environments/{id}/branches',
      summary:
        "The branches of one of the environment's repositories, listed by the server with the environment's token",
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam, query: BranchesQuery },
      responses: {
        200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: BranchesSchema }) } } },
        ...errorResponses(401, 404, 409, 422, 502),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const env = await load(accountId, c.req.valid('param').id);
      const r = await environmentBranches(svc, accountId, env.id, c.req.valid('query').repository);
      if (!r.ok) throw new ApiError(REPO_REFUSAL_STATUS[r.error.code], r.error.code, r.error.message);
      const { repository, remote } = r.value;
      return c.json(
        {
          data: { repository: repository.url, default_branch: remote.defaultBranch, branches: [...remote.branches] },
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/environments/{id}/secrets',
      summary: "The environment's secret names (values are write-only)",
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(SecretListSchema) }) } },
        },
        ...errorResponses(401, 404),
      },
    }),
    async (c) => {
      const env = await load(c.get('principal').account.id, c.req.valid('param').id);
      const names = await svc.secretNames(env.id);
      return c.json(
        {
          data: names.map((s) => ({
            key: s.key,
            inserted_at: s.insertedAt.toISOString(),
            updated_at: s.updatedAt.toISOString(),
          })),
        },
        200,
      );
    },
  );

  const secretKey = (key: string): string => {
    const k = SecretKeyName.safeParse(key);
    if (!k.success) throw fieldError('key', k.error.issues[0]?.message ?? 'not a secret name');
    return k.data;
  };

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/environments/{id}/secrets/{key}',
      summary: 'Set a secret (sealed at rest; delivered to the agent process environment only)',
      security: bearer,
      middleware: [auth] as const,
      request: {
        params: SecretKeyParams,
        body: { content: { 'application/json': { schema: SecretBody } }, required: true },
      },
      responses: {
        200: {
          description: 'replaced',
          content: { 'application/json': { schema: z.object({ data: z.object({ key: z.string() }) }) } },
        },
        201: {
          description: 'created',
          content: { 'application/json': { schema: z.object({ data: z.object({ key: z.string() }) }) } },
        },
        ...errorResponses(401, 404, 422),
      },
    }),
    async (c) => {
      const p = c.req.valid('param');
      const env = await load(c.get('principal').account.id, p.id);
      const key = secretKey(p.key);
      const created = await svc.putSecret(env.id, key, c.req.valid('json').value);
      return c.json({ data: { key } }, created ? 201 : 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/environments/{id}/secrets/{key}',
      summary: 'Delete a secret',
      security: bearer,
      middleware: [auth] as const,
      request: { params: SecretKeyParams },
      responses: { 204: { description: 'deleted' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      const p = c.req.valid('param');
      const env = await load(c.get('principal').account.id, p.id);
      if (!(await svc.deleteSecret(env.id, p.key))) throw new ApiError(404, 'not_found', 'secret not found');
      return c.body(null, 204);
    },
  );

  return app;
}
