/**
 * The capacity limits API: an account reads its limits, what it holds and what waits; the owner sets
 * any account's limits (null returns a limit to the server's default).
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';
import type { ConversationEngine } from './engine.ts';

const limit = z.number().int().min(1).max(10_000);

const LimitsBody = z
  .object({
    max_running_turns: limit.nullable().optional().openapi({
      description:
        "Running turns at once; beyond it prompts and new conversations with a prompt wait. null: the server's default",
    }),
    max_sandboxes: limit.nullable().optional().openapi({
      description:
        "Sandboxes starting or ready at once; beyond it new conversations and wakes wait. null: the server's default",
    }),
  })
  .strict()
  .openapi('CapacityLimitsUpdate');

const LimitsSchema = z
  .object({
    max_running_turns: z.number().int().openapi({ description: 'In force: the account’s own, else the default' }),
    max_sandboxes: z.number().int(),
    own: z.object({ max_running_turns: z.number().int().nullable(), max_sandboxes: z.number().int().nullable() }),
    defaults: z.object({ max_running_turns: z.number().int(), max_sandboxes: z.number().int() }),
    running_turns: z.number().int().openapi({ description: 'Turns pending or running now' }),
    sandboxes: z.number().int().openapi({ description: 'Sandboxes starting or ready now (parked ones hold none)' }),
    waiting: z.number().int().openapi({ description: 'Prompts and conversations in the queue now' }),
  })
  .openapi('CapacityLimits');

const ownerOnly: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.get('principal').account.role !== 'owner')
    throw new ApiError(403, 'owner_only', 'only the owner account may change limits');
  await next();
};

export function capacityRoutes(deps: RouteDeps & { engine: ConversationEngine }): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { engine } = deps;
  const view = async (accountId: string) => {
    const { own, defaults, load } = await engine.limits(accountId);
    return {
      max_running_turns: load.limits.maxRunningTurns,
      max_sandboxes: load.limits.maxSandboxes,
      own: { max_running_turns: own.maxRunningTurns, max_sandboxes: own.maxSandboxes },
      defaults: { max_running_turns: defaults.maxRunningTurns, max_sandboxes: defaults.maxSandboxes },
      running_turns: load.running,
      sandboxes: load.sandboxes,
      waiting: load.waiting,
    };
  };
  const ok = {
    200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: LimitsSchema }) } } },
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/account/limits',
      summary: "This account's capacity limits, what it holds and what waits in its queue",
      security: bearer,
      middleware: [requireKey(deps.db, deps.logger)] as const,
      responses: { ...ok, ...errorResponses(401) },
    }),
    async (c) => c.json({ data: await view(c.get('principal').account.id) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/admin/accounts/{id}/limits',
      summary: "Set an account's capacity limits (owner only); null returns a limit to the server's default",
      security: bearer,
      middleware: [requireKey(deps.db, deps.logger), ownerOnly] as const,
      request: {
        params: z.object({ id: z.string().openapi({ param: { name: 'id', in: 'path' } }) }),
        body: { required: true, content: { 'application/json': { schema: LimitsBody } } },
      },
      responses: { ...ok, ...errorResponses(400, 401, 403, 404, 415) },
    }),
    async (c) => {
      const id = c.req.valid('param').id;
      if (!isUuid(id)) throw ApiError.notFound('account');
      const b = c.req.valid('json');
      const { own } = await engine.limits(id);
      const set = await engine.setLimits(id, {
        maxRunningTurns: b.max_running_turns === undefined ? own.maxRunningTurns : b.max_running_turns,
        maxSandboxes: b.max_sandboxes === undefined ? own.maxSandboxes : b.max_sandboxes,
      });
      if (!set.ok) throw ApiError.notFound('account');
      return c.json({ data: await view(id) }, 200);
    },
  );

  return app;
}
