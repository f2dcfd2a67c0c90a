/**
 * `POST /api/runners/register`: a new runner trades its single-use registration token (from "Add runner")
 * for a runner-scoped API key. No bearer key: the token is the credential, spent by this call.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import type { AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { audit } from '../account/audit.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';
import { mintRegistration, redeemRegistration, registrationToken, runnerName } from './registration.ts';
import { requireKey } from '../http/auth.ts';
import { installCommand, isLoopbackUrl, serverUrlFor } from './artifact.ts';

const RegisterBody = z.object({ token: registrationToken, name: runnerName }).openapi('RunnerRegistration');
const Registered = z
  .object({ data: z.object({ api_key: z.string(), scopes: z.array(z.literal('runner')) }) })
  .openapi('RunnerKey');

const Minted = z
  .object({
    data: z.object({
      token: z.string().openapi({ description: 'Single-use registration token (ftr_…), valid for one hour' }),
      expires_at: z.string(),
      server_url: z.string().openapi({ description: 'PUBLIC_URL, else the address this request came to' }),
      command: z.string().openapi({ description: 'The one line to run on the new runner machine' }),
      loopback_only: z
        .boolean()
        .openapi({ description: 'True when server_url is a loopback address other machines cannot reach' }),
    }),
  })
  .openapi('RunnerRegistrationToken');

export function runnerRegisterRoutes(deps: RouteDeps & { readonly publicUrl?: string | null }): OpenAPIHono<AppEnv> {
  const app = newRouter();
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/runners/registrations',
      summary: 'Mint a single-use registration token for a new runner, with the install command that uses it',
      security: bearer,
      middleware: [requireKey(deps.db, deps.logger)] as const,
      responses: {
        201: { description: 'the token, shown once', content: { 'application/json': { schema: Minted } } },
        ...errorResponses(401, 403),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const minted = await mintRegistration(deps.db, accountId);
      const serverUrl = serverUrlFor(deps.publicUrl, c.req.url);
      await audit(deps.db, { accountId, actor: 'api', action: 'runner.registration_minted', data: {} }).catch(
        (err: unknown) => deps.logger.warn({ err }, 'could not audit a runner registration token'),
      );
      return c.json(
        {
          data: {
            token: minted.token,
            expires_at: minted.expiresAt.toISOString(),
            server_url: serverUrl,
            command: installCommand(serverUrl, minted.token),
            loopback_only: isLoopbackUrl(serverUrl),
          },
        },
        201,
      );
    },
  );
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
