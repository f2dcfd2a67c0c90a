/**
 * `POST /api/conversations/{id}/push`: pushes the sandbox's commits in an environment repository to a new
 * branch on the remote (with the environment's token) and answers the branch and its compare link.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { isUuid } from '../http/ids.ts';
import { ApiError } from '../http/errors.ts';
import { bearer, errorResponses, IdParam, newRouter, type RouteDeps } from '../http/common.ts';
import { BRANCH_NAME } from '../environments/git-remote.ts';
import type { ConversationEngine } from './engine.ts';
import { engineApiError } from './routes.ts';

const PushBody = z
  .object({
    branch: z
      .string()
      .regex(BRANCH_NAME, 'not a branch name')
      .optional()
      .openapi({ description: 'A branch the remote does not have yet; `fountain/<conversation>-<time>` when absent' }),
    repository: z
      .string()
      .max(2000)
      .optional()
      .openapi({ description: "Which environment repository; the conversation's picked one, else the first" }),
  })
  .strict()
  .openapi('PushToBranch');

const Pushed = z
  .object({
    data: z.object({
      repository: z.string(),
      branch: z.string(),
      base: z.string().nullable(),
      commit: z.string(),
      commits: z.number().int(),
      compare_url: z.string().nullable().openapi({ description: 'GitHub-style compare page; null for other remotes' }),
    }),
  })
  .openapi('Pushed');

export function pushRoutes(deps: RouteDeps & { readonly engine: ConversationEngine }): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const auth = requireKey(deps.db, deps.logger, 'any');
  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/push',
      summary:
        "Push the sandbox's commits in an environment repository to a new branch on its remote (the environment's token)",
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam, body: { content: { 'application/json': { schema: PushBody } }, required: false } },
      responses: {
        201: { description: 'pushed', content: { 'application/json': { schema: Pushed } } },
        ...errorResponses(400, 401, 404, 409, 422, 502),
      },
    }),
    async (c) => {
      const id = c.req.valid('param').id;
      if (!isUuid(id)) throw ApiError.notFound('conversation');
      const b = c.req.valid('json') ?? {};
      const r = await deps.engine.push(c.get('principal').account.id, id, b);
      if (!r.ok) throw engineApiError(r.error);
      return c.json({ data: r.value }, 201);
    },
  );
  return app;
}
