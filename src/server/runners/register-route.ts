/**
 * `POST /api/runners/register`: a new runner trades its single-use registration token (from "Add runner")
 * for a runner-scoped API key. No bearer key: the token is the credential, spent by this call.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import type { AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { audit } from '../account/audit.ts';
import { errorResponses, newRouter, type RouteDeps } from '../http/common.ts';
import { redeemRegistration, registrationToken, runnerName } from './registration.ts';

const RegisterBody = z.object({ token: registrationToken, name: runnerName }).openapi('RunnerRegistration');
const Registered = z
  .object({ data: z.object({ api_key: z.string(), scopes: z.array(z.literal('runner')) }) })
  .openapi('RunnerKey');

export function runnerRegisterRoutes(deps: RouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/runners/register',
      summary: 'Exchange a registration token for a runner-scoped API key (the key can only dial the runner socket)',
      request: { body: { content: { 'application/json': { schema: RegisterBody } }, required: true } },
      responses: {
        201: { description: 'the runner key, shown once', content: { 'application/json': { schema: Registered } } },
        ...errorResponses(401, 422),
      },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const r = await redeemRegistration(deps.db, body.token, body.name);
      if (!r.ok) {
        throw new ApiError(
          401,
          'registration_token_invalid',
          r.reason === 'unknown'
            ? 'this registration token is not known to this server'
            : 'this registration token was already used or has expired: add the runner again for a fresh one',
        );
      }
      await audit(deps.db, {
        accountId: r.accountId,
        actor: 'api',
        action: 'runner.registered',
        data: { name: body.name },
      }).catch((err: unknown) => deps.logger.warn({ err }, 'could not audit a runner registration'));
      return c.json({ data: { api_key: r.apiKey, scopes: ['runner' as const] } }, 201);
    },
  );
  return app;
}
