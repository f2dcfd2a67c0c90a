/**
 * Key routes: who am I, and the account's API keys (list, create — plaintext shown once — revoke).
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { audit } from './audit.ts';
import { API_KEY_SCOPES, createKey, listKeys, revokeKey } from './service.ts';
import type { Account, ApiKey } from '../store/schema.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { bearer, errorResponses, IdParam, iso, newRouter, type RouteDeps } from '../http/common.ts';

export const AccountSchema = z
  .object({
    id: z.string(),
    email: z.string().nullable(),
    name: z.string(),
    role: z.enum(['owner', 'user']),
    created_at: z.string(),
  })
  .openapi('Account');

export const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    scopes: z.array(z.enum(API_KEY_SCOPES)),
    created_at: z.string(),
    last_used_at: z.string().nullable(),
    expires_at: z.string().nullable(),
  })
  .openapi('ApiKey');

export const CreatedApiKeySchema = ApiKeySchema.extend({
  key: z.string().openapi({ description: 'The plaintext key. Shown only in this response.' }),
}).openapi('CreatedApiKey');

export const accountView = (a: Account) => ({
  id: a.id,
  email: a.email,
  name: a.name,
  role: a.role,
  created_at: a.createdAt.toISOString(),
});

export const keyView = (k: ApiKey) => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  scopes: k.scopes,
  created_at: k.createdAt.toISOString(),
  last_used_at: iso(k.lastUsedAt),
  expires_at: iso(k.expiresAt),
});

const MeSchema = AccountSchema.extend({
  key: z.object({ id: z.string(), name: z.string(), prefix: z.string(), scopes: z.array(z.enum(API_KEY_SCOPES)) }),
}).openapi('Me');

const CreateKeyBody = z
  .object({
    name: z.string({ error: 'name is required' }).trim().min(1, 'name is required').max(200),
    scopes: z
      .array(z.enum(['full', 'sandbox']))
      .length(1, 'scopes must be ["full"] or ["sandbox"]')
      .default(['full']),
    expires_at: z.iso.datetime({ offset: true }).optional(),
  })
  .strict()
  .openapi('CreateApiKey');

export function authRoutes(deps: RouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { db, logger } = deps;

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/auth/me',
      summary: 'The account and key behind the bearer key',
      security: bearer,
      middleware: [requireKey(db, logger, 'any')] as const,
      responses: {
        200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: MeSchema }) } } },
        ...errorResponses(401),
      },
    }),
    (c) => {
      const { account, key } = c.get('principal');
      return c.json(
        {
          data: {
            ...accountView(account),
            key: { id: key.id, name: key.name, prefix: key.prefix, scopes: key.scopes },
          },
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/auth/api-keys',
      summary: "The account's live API keys, newest first",
      security: bearer,
      middleware: [requireKey(db, logger)] as const,
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(ApiKeySchema) }) } },
        },
        ...errorResponses(401, 403),
      },
    }),
    async (c) => {
      const keys = await listKeys(db, c.get('principal').account.id);
      return c.json({ data: keys.map(keyView) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/auth/api-keys',
      summary: 'Create an API key; the plaintext is returned once',
      security: bearer,
      middleware: [requireKey(db, logger)] as const,
      request: { body: { required: true, content: { 'application/json': { schema: CreateKeyBody } } } },
      responses: {
        201: {
          description: 'created',
          content: { 'application/json': { schema: z.object({ data: CreatedApiKeySchema }) } },
        },
        ...errorResponses(400, 401, 403, 415, 422),
      },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const { account } = c.get('principal');
      const expiresAt = body.expires_at ? new Date(body.expires_at) : null;
      if (expiresAt && expiresAt <= new Date()) {
        throw new ApiError(422, 'validation_failed', 'expires_at must be in the future', {
          errors: { expires_at: ['must be in the future'] },
        });
      }
      const created = await createKey(db, { accountId: account.id, name: body.name, scopes: body.scopes, expiresAt });
      await audit(db, {
        accountId: account.id,
        actor: 'api',
        action: 'api_key.created',
        subjectId: created.row.id,
        data: { name: body.name, scopes: body.scopes },
      });
      return c.json({ data: { ...keyView(created.row), key: created.key } }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/auth/api-keys/{id}',
      summary: 'Revoke one of the account’s API keys',
      security: bearer,
      middleware: [requireKey(db, logger)] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'revoked' }, ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const { account } = c.get('principal');
      if (!isUuid(id) || !(await revokeKey(db, account.id, id)))
        throw new ApiError(404, 'not_found', 'API key not found');
      await audit(db, { accountId: account.id, actor: 'api', action: 'api_key.revoked', subjectId: id });
      return c.body(null, 204);
    },
  );

  return app;
}
