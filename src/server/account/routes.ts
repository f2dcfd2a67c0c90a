/**
 * The caller's account settings (issue 6): `GET /api/account` and `PATCH /api/account`, today the
 * `credential_brokerage` switch that makes launches require a backend with network_policy.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { setBrokerage } from './service.ts';
import { audit } from './audit.ts';
import type { Account } from '../store/schema.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';

export const AccountSettingsSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    email: z.string().nullable(),
    role: z.enum(['owner', 'user']),
    credential_brokerage: z.boolean().openapi({
      description:
        'On: a launch on a provider or runner without network_policy is refused with backend_lacks_network_policy (BROKER_ALLOW_UNENFORCED lifts it)',
    }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('AccountSettings');

const PatchAccountBody = z
  .object({ credential_brokerage: z.boolean({ error: 'credential_brokerage must be true or false' }) })
  .strict()
  .openapi('PatchAccount');

const view = (a: Account) => ({
  id: a.id,
  name: a.name,
  email: a.email,
  role: a.role,
  credential_brokerage: a.credentialBrokerage,
  created_at: a.createdAt.toISOString(),
  updated_at: a.updatedAt.toISOString(),
});

export function accountRoutes(deps: RouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { db, logger } = deps;
  const one = { 'application/json': { schema: z.object({ data: AccountSettingsSchema }) } };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/account',
      summary: "The caller's account and its settings",
      security: bearer,
      middleware: [requireKey(db, logger)] as const,
      responses: { 200: { description: 'ok', content: one }, ...errorResponses(401, 403) },
    }),
    async (c) => c.json({ data: view(c.get('principal').account) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/account',
      summary: "Changes the caller's account settings (full scope)",
      security: bearer,
      middleware: [requireKey(db, logger)] as const,
      request: { body: { content: { 'application/json': { schema: PatchAccountBody } }, required: true } },
      responses: { 200: { description: 'ok', content: one }, ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const id = c.get('principal').account.id;
      const row = await setBrokerage(db, id, body.credential_brokerage);
      if (!row) throw ApiError.notFound('account');
      await audit(db, {
        accountId: id,
        actor: 'api',
        action: 'account.updated',
        subjectId: id,
        data: { credential_brokerage: body.credential_brokerage },
      });
      return c.json({ data: view(row) }, 200);
    },
  );

  return app;
}
