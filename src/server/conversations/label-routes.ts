/**
 * Conversation label routes: `POST /api/conversations/{id}/labels` sets and removes labels in one change,
 * `DELETE /api/conversations/{id}/labels/{key}` removes one. The list filters with `?label=`.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import type { ConversationEngine } from './engine.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';
import { LabelField, LabelKeyField, LABELS_MAX, type LabelChange } from './labels.ts';

const LabelsBody = z
  .object({
    labels: z
      .array(LabelField)
      .max(LABELS_MAX)
      .optional()
      .openapi({ description: '`key` or `key=value` to set; a key already there takes the new value' }),
    remove: z.array(LabelKeyField).max(LABELS_MAX).optional().openapi({ description: 'Keys to remove' }),
  })
  .openapi('LabelsChange');

const Labels = z.object({ data: z.object({ labels: z.array(z.string()) }) }).openapi('Labels');

const KeyParams = z.object({
  id: z.string().openapi({ param: { name: 'id', in: 'path' } }),
  key: z
    .string()
    .max(100)
    .openapi({ param: { name: 'key', in: 'path' } }),
});

const IdParam = z.object({ id: z.string().openapi({ param: { name: 'id', in: 'path' } }) });

/** A change's refusal as the API's one error type. */
function labelsOrThrow(r: LabelChange): string[] {
  if (r.ok) return r.labels;
  if (r.code === 'not_found') throw ApiError.notFound('conversation');
  throw new ApiError(422, r.code, r.message);
}

export function labelRoutes(deps: RouteDeps & { readonly engine: ConversationEngine }): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { engine } = deps;
  const auth = requireKey(deps.db, deps.logger, 'any');

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/labels',
      summary: `Set and remove labels (key or key=value, at most ${LABELS_MAX}); answers the labels after the change`,
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam, body: { content: { 'application/json': { schema: LabelsBody } }, required: true } },
      responses: {
        200: { description: 'the labels now', content: { 'application/json': { schema: Labels } } },
        ...errorResponses(401, 404, 422),
      },
    }),
    async (c) => {
      const id = c.req.valid('param').id;
      if (!isUuid(id)) throw ApiError.notFound('conversation');
      const b = c.req.valid('json');
      const labels = labelsOrThrow(
        await engine.changeLabels(c.get('principal').account.id, id, { add: b.labels, remove: b.remove }),
      );
      return c.json({ data: { labels } }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/conversations/{id}/labels/{key}',
      summary: 'Remove one label by its key (no error when it is not there)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: KeyParams },
      responses: {
        200: { description: 'the labels now', content: { 'application/json': { schema: Labels } } },
        ...errorResponses(401, 404, 422),
      },
    }),
    async (c) => {
      const { id, key } = c.req.valid('param');
      if (!isUuid(id)) throw ApiError.notFound('conversation');
      const k = LabelKeyField.safeParse(key);
      if (!k.success) throw new ApiError(422, 'invalid_label', k.error.issues[0]?.message ?? 'invalid label key');
      const labels = labelsOrThrow(await engine.changeLabels(c.get('principal').account.id, id, { remove: [k.data] }));
      return c.json({ data: { labels } }, 200);
    },
  );

  return app;
}
