/**
 * Fork and move routes: `POST /api/conversations/:id/fork` starts a new conversation from the checkpoint
 * after one of its turns; `POST /api/conversations/:id/move` sends its sandbox to another runner or provider.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { KNOWN_PROVIDERS } from '../../sandbox/index.ts';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { bearer, errorResponses, IdParam, newRouter } from '../http/common.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { engineApiError, type ConversationRouteDeps } from './routes.ts';
import { ConversationSchema } from './views.ts';

const ForkBody = z
  .object({
    turn_id: z
      .string()
      .max(100)
      .optional()
      .openapi({ description: 'The turn to fork after; default: the latest completed one' }),
    turn: z
      .number({ error: 'turn must be a turn number' })
      .int()
      .min(1)
      .optional()
      .openapi({ description: 'The turn to fork after, by its number (instead of turn_id)' }),
  })
  .strict()
  .refine((b) => b.turn_id === undefined || b.turn === undefined, { message: 'give turn_id or turn, not both' })
  .openapi('ConversationFork');

const MoveBody = z
  .object({
    runner: z.string().min(1).max(200).optional().openapi({ description: 'The runner to move to, by id or name' }),
    provider: z
      .enum(KNOWN_PROVIDERS, { error: `provider must be one of ${KNOWN_PROVIDERS.join(', ')}` })
      .optional()
      .openapi({ description: 'A sandbox provider to move to (runner: any connected runner)' }),
  })
  .strict()
  .refine((b) => b.runner !== undefined || b.provider !== undefined, {
    message: 'give runner (a runner name or id) or provider',
  })
  .refine((b) => b.runner === undefined || b.provider === undefined || b.provider === 'runner', {
    message: 'a runner is a placement of provider runner: give runner alone',
  })
  .openapi('ConversationMove');

const one = { 'application/json': { schema: z.object({ data: ConversationSchema }) } };

export function relocateRoutes(deps: ConversationRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const auth = requireKey(deps.db, deps.logger, 'full');
  const checkId = (id: string): string => {
    if (!isUuid(id)) throw ApiError.notFound('conversation');
    return id;
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/fork',
      summary:
        'Fork after a completed turn: a new conversation of the same agent, its history up to that turn copied, its sandbox restored from the checkpoint taken after it',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam, body: { content: { 'application/json': { schema: ForkBody } }, required: false } },
      responses: { 201: { description: 'forked', content: one }, ...errorResponses(400, 401, 404, 409, 422) },
    }),
    async (c) => {
      const id = checkId(c.req.valid('param').id);
      const b = c.req.valid('json') ?? {};
      if (b.turn_id !== undefined && !isUuid(b.turn_id))
        throw new ApiError(404, 'turn_not_found', `the conversation has no turn ${b.turn_id}`);
      const r = await deps.engine.fork(c.get('principal').account.id, id, { turnId: b.turn_id, turnNumber: b.turn });
      if (!r.ok) throw engineApiError(r.error);
      return c.json({ data: r.value }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/move',
      summary:
        'Move to another runner or provider: a checkpoint is taken, the sandbox removed, and the next message restores it there',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam, body: { content: { 'application/json': { schema: MoveBody } }, required: true } },
      responses: { 200: { description: 'moved', content: one }, ...errorResponses(400, 401, 404, 409, 422, 503) },
    }),
    async (c) => {
      const id = checkId(c.req.valid('param').id);
      const b = c.req.valid('json');
      const r = await deps.engine.move(c.get('principal').account.id, id, { runner: b.runner, provider: b.provider });
      if (!r.ok) throw engineApiError(r.error);
      return c.json({ data: r.value }, 200);
    },
  );

  return app;
}
