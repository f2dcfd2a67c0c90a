/**
 * `/api/account/inference-credentials`: set, list and remove the account's model credentials
 * (full scope). Values are write-only: no answer, log line or error ever carries one.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { audit } from '../account/audit.ts';
import { bearer, errorResponses, isHttpUrlWithoutUserInfo, newRouter, type RouteDeps } from '../http/common.ts';
import { Private } from '../../sandbox/private.ts';
import { CREDENTIAL_PROVIDERS, SET_NAME, SET_NAME_RULE } from './providers.ts';
import { DEFAULT_SET, type CredentialService } from './service.ts';

export const CredentialSchema = z
  .object({
    provider: z.enum(CREDENTIAL_PROVIDERS),
    name: z
      .string()
      .openapi({ description: 'The credential set it belongs to; agents pick a set by name (default: default)' }),
    base_url: z
      .string()
      .nullable()
      .openapi({ description: 'The gateway the runtime is pointed at; null means the vendor API' }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('InferenceCredential');

export const baseUrlSchema = z
  .string()
  .max(2048)
  .refine(isHttpUrlWithoutUserInfo, 'base_url must be an http(s) URL without user info');

export const PutCredentialBody = z
  .object({
    value: z
      .string({ error: 'value is required' })
      .min(1, 'value is required')
      .max(8192, 'value is longer than 8192 characters')
      .refine((s) => s.trim() === s && !/[\s\0]/.test(s), 'value must not contain whitespace'),
    base_url: baseUrlSchema.nullable().optional(),
    validate: z
      .boolean()
      .optional()
      .openapi({ description: 'Check the credential against the provider first (default true)' }),
  })
  .strict()
  .openapi('PutInferenceCredential');

const ProviderParam = z.object({
  provider: z
    .enum(CREDENTIAL_PROVIDERS, { error: `provider must be one of ${CREDENTIAL_PROVIDERS.join(', ')}` })
    .openapi({ param: { name: 'provider', in: 'path' } }),
});

const SetQuery = z.object({
  name: z.string().regex(SET_NAME, SET_NAME_RULE).optional().openapi({
    description: 'The credential set (default: default). Setting it again replaces its value for every agent using it',
  }),
});

const STATUS = { refused: 422, network: 502, provider_error: 502, timeout: 504 } as const;
const CODE = {
  refused: 'credential_refused',
  network: 'network',
  provider_error: 'provider_error',
  timeout: 'timeout',
} as const;

export function credentialRoutes(deps: RouteDeps & { credentials: CredentialService }): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { db, logger, credentials } = deps;
  const auth = [requireKey(db, logger)];

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/account/inference-credentials',
      summary: 'Which model credentials the account has set (never their values)',
      security: bearer,
      middleware: auth,
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(CredentialSchema) }) } },
        },
        ...errorResponses(401, 403),
      },
    }),
    async (c) => c.json({ data: await credentials.list(c.get('principal').account.id) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/account/inference-credentials/{provider}',
      summary: 'Sets a model credential (validated against the provider unless validate is false)',
      security: bearer,
      middleware: auth,
      request: {
        params: ProviderParam,
        query: SetQuery,
        body: { content: { 'application/json': { schema: PutCredentialBody } }, required: true },
      },
      responses: {
        200: {
          description: 'stored',
          content: { 'application/json': { schema: z.object({ data: CredentialSchema }) } },
        },
        ...errorResponses(401, 403, 422, 502, 504),
      },
    }),
    async (c) => {
      const { provider } = c.req.valid('param');
      const name = c.req.valid('query').name ?? DEFAULT_SET;
      const body = c.req.valid('json');
      const accountId = c.get('principal').account.id;
      const r = await credentials.set(accountId, provider, new Private(body.value), {
        baseUrl: body.base_url ?? null,
        validate: body.validate ?? true,
        name,
      });
      if (!r.ok) throw new ApiError(STATUS[r.failure.kind], CODE[r.failure.kind], r.failure.message, { provider });
      await audit(db, {
        accountId,
        actor: 'api',
        action: 'inference_credential.set',
        subjectId: accountId,
        data: { provider, name, base_url: body.base_url ?? null },
      });
      return c.json({ data: r.value }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/account/inference-credentials/{provider}',
      summary: 'Removes a model credential of a set; refused (409 credential_set_in_use) while agents use it',
      security: bearer,
      middleware: auth,
      request: { params: ProviderParam, query: SetQuery },
      responses: { 204: { description: 'removed' }, ...errorResponses(401, 403, 404, 409, 422) },
    }),
    async (c) => {
      const { provider } = c.req.valid('param');
      const name = c.req.valid('query').name ?? DEFAULT_SET;
      const accountId = c.get('principal').account.id;
      const r = await credentials.remove(accountId, provider, name);
      const label = name === DEFAULT_SET ? provider : `${provider} of set ${name}`;
      if (r === 'absent') throw ApiError.notFound(`inference credential ${label}`);
      if (r !== 'removed')
        throw new ApiError(
          409,
          'credential_set_in_use',
          `the ${label} is used by agent${r.agents.length === 1 ? '' : 's'} ${r.agents.map((a) => a.name).join(', ')}: switch them to another credential set first`,
          { agents: r.agents },
        );
      await audit(db, {
        accountId,
        actor: 'api',
        action: 'inference_credential.removed',
        subjectId: accountId,
        data: { provider, name },
      });
      return c.body(null, 204);
    },
  );

  return app;
}
