/**
 * `PATCH /api/conversations/{id}/settings`: a conversation's ACP session settings (config option values
 * and a mode) over its agent's; refused with a code where its runtime does not list one.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { bearer, errorResponses, IdParam, newRouter } from '../http/common.ts';
import { isUuid } from '../http/ids.ts';
import { SessionSettingsSchema } from '../agents/launch-fields.ts';
import { engineApiError, type ConversationRouteDeps } from './routes.ts';

const SettingsChangeSchema = z
  .object({
    settings: SessionSettingsSchema,
    applied: z.array(z.string()).openapi({ description: 'What the running agent was sent now (id=value, mode=id)' }),
    live: z.boolean().openapi({
      description: 'Whether a running agent took them now; false: they apply when its session next starts',
    }),
  })
  .openapi('SessionSettingsChange');

export function settingsRoutes(deps: ConversationRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const auth = requireKey(deps.db, deps.logger, 'any');
  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/conversations/{id}/settings',
      summary:
        'Set session options and the mode of a conversation: sent at once to its running agent, else at its next start; refused (422) where the runtime does not list them',
      security: bearer,
      middleware: [auth] as const,
      request: {
        params: IdParam,
        body: { content: { 'application/json': { schema: SessionSettingsSchema } }, required: true },
      },
      responses: {
        200: {
          description: 'stored',
          content: { 'application/json': { schema: z.object({ data: SettingsChangeSchema }) } },
        },
        ...errorResponses(401, 404, 410, 422, 502),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      if (!isUuid(id)) throw ApiError.notFound('conversation');
      const r = await deps.engine.settings(c.get('principal').account.id, id, c.req.valid('json'));
      if (!r.ok) throw engineApiError(r.error);
      return c.json({ data: r.value }, 200);
    },
  );
  return app;
}
