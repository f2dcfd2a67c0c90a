/**
 * Owner-only administration: creating another account together with its first full-scope key.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { audit } from './audit.ts';
import { addAccount } from './service.ts';
import { accountView, AccountSchema, CreatedApiKeySchema, keyView } from './keys-routes.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';

const CreateAccountBody = z
  .object({
    name: z.string({ error: 'name is required' }).trim().min(1, 'name is required').max(200),
    email: z.email().max(320).optional(),
  })
  .strict()
  .openapi('CreateAccount');

const ownerOnly: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.get('principal').account.role !== 'owner')
    throw new ApiError(403, 'owner_only', 'only the owner account may do this');
  await next();
};

export function adminRoutes(deps: RouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { db, logger } = deps;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/admin/accounts',
      summary: 'Create an account and its first full-scope key (owner only)',
      security: bearer,
      middleware: [requireKey(db, logger), ownerOnly] as const,
      request: { body: { required: true, content: { 'application/json': { schema: CreateAccountBody } } } },
      responses: {
        201: {
          description: 'created',
          content: {
            'application/json': {
              schema: z.object({ data: z.object({ account: AccountSchema, key: CreatedApiKeySchema }) }),
            },
          },
        },
        ...errorResponses(400, 401, 403, 409, 415, 422),
      },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const owner = c.get('principal').account;
      const added = await addAccount(db, { name: body.name, email: body.email ?? null });
      if (!added.ok) throw new ApiError(409, 'email_taken', 'an account with this email already exists');
      const { account, created } = added;
      await audit(db, {
        accountId: owner.id,
        actor: 'api',
        action: 'account.created',
        subjectId: account.id,
        data: { name: account.name },
      });
      return c.json(
        { data: { account: accountView(account), key: { ...keyView(created.row), key: created.key } } },
        201,
      );
    },
  );

  return app;
}
