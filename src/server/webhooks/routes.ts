/**
 * `/api/webhooks`: an account's signed webhook endpoints (full scope): add (the secret is shown once),
 * list, change, enable again, rotate the secret, remove; each endpoint's deliveries, and redelivery.
 */
import { isUuid } from '../http/ids.ts';
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { type AppEnv, requireKey } from '../http/auth.ts';
import { bearer, errorResponses, isHttpUrlWithoutUserInfo, newRouter, type RouteDeps } from '../http/common.ts';
import { ApiError } from '../http/errors.ts';
import { WEBHOOK_EVENT_KINDS } from './kinds.ts';
import type { WebhookResult, WebhookService } from './service.ts';

export const webhookUrlSchema = z
  .string({ error: 'url is required' })
  .max(2048, 'url is longer than 2048 characters')
  .refine(isHttpUrlWithoutUserInfo, 'url must be an http(s) URL without user info');

const eventsSchema = z
  .array(z.enum(WEBHOOK_EVENT_KINDS, { error: `each event must be one of ${WEBHOOK_EVENT_KINDS.join(', ')}` }))
  .min(1, 'name at least one event')
  .openapi({ description: `Event kinds: ${WEBHOOK_EVENT_KINDS.join(', ')}` });

const WebhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.enum(WEBHOOK_EVENT_KINDS)),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable().openapi({ description: 'Why the endpoint was disabled (the notice)' }),
    disabled_at: z.string().nullable(),
    failing_since: z
      .string()
      .nullable()
      .openapi({ description: 'Since when every delivery has failed; null when the last one succeeded' }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Webhook');

const DeliverySchema = z
  .object({
    id: z.string(),
    event_id: z.string(),
    event: z.enum(WEBHOOK_EVENT_KINDS),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    next_attempt_at: z.string().nullable(),
    created_at: z.string(),
    delivered_at: z.string().nullable(),
    redelivery_of: z.string().nullable(),
    payload: z.record(z.string(), z.unknown()),
    attempt_log: z.array(
      z.object({
        at: z.string(),
        status_code: z.number().int().nullable(),
        error: z.string().nullable(),
        latency_ms: z.number().int(),
        response_excerpt: z.string().nullable(),
      }),
    ),
  })
  .openapi('WebhookDelivery');

const CreateBody = z
  .object({
    url: webhookUrlSchema,
    events: eventsSchema,
    secret: z
      .string()
      .min(16, 'secret must be at least 16 characters')
      .max(256)
      .refine((s) => !/\s/.test(s), 'secret must not contain whitespace')
      .optional()
      .openapi({ description: 'Omit to have one generated (shown once in the answer)' }),
  })
  .strict()
  .openapi('CreateWebhook');

const PatchBody = z
  .object({
    url: webhookUrlSchema.optional(),
    events: eventsSchema.optional(),
    enabled: z.boolean().optional().openapi({ description: 'true enables a disabled endpoint again' }),
  })
  .strict()
  .openapi('UpdateWebhook');

const IdParam = z.object({ id: z.string().openapi({ param: { name: 'id', in: 'path' } }) });
const DeliveryParams = z.object({
  id: z.string().openapi({ param: { name: 'id', in: 'path' } }),
  delivery_id: z.string().openapi({ param: { name: 'delivery_id', in: 'path' } }),
});
const LimitQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).optional().openapi({ description: 'Default 50' }),
});

function unwrap<T>(r: WebhookResult<T>): T {
  if (!r.ok) throw ApiError.notFound(r.message.replace(/ not found$/, ''));
  return r.value;
}

const checkId = (...ids: string[]) => {
  for (const id of ids) if (!isUuid(id)) throw ApiError.notFound('webhook');
};

export function webhookRoutes(deps: RouteDeps & { webhooks: WebhookService }): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { db, logger, webhooks } = deps;
  const auth = [requireKey(db, logger)];
  const one = { 'application/json': { schema: z.object({ data: WebhookSchema }) } };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/webhooks',
      summary: "The account's webhook endpoints (never their secrets)",
      security: bearer,
      middleware: auth,
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(WebhookSchema) }) } },
        },
        ...errorResponses(401, 403),
      },
    }),
    async (c) => c.json({ data: await webhooks.list(c.get('principal').account.id) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/webhooks',
      summary: 'Adds an endpoint; the answer carries its signing secret, shown only this once',
      security: bearer,
      middleware: auth,
      request: { body: { content: { 'application/json': { schema: CreateBody } }, required: true } },
      responses: {
        201: {
          description: 'created',
          content: { 'application/json': { schema: z.object({ data: WebhookSchema, secret: z.string() }) } },
        },
        ...errorResponses(401, 403, 422),
      },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const r = await webhooks.create(c.get('principal').account.id, body);
      return c.json({ data: r.webhook, secret: r.secret }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/webhooks/{id}',
      summary: 'One endpoint',
      security: bearer,
      middleware: auth,
      request: { params: IdParam },
      responses: { 200: { description: 'ok', content: one }, ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      checkId(id);
      return c.json({ data: unwrap(await webhooks.get(c.get('principal').account.id, id)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/webhooks/{id}',
      summary: 'Changes the URL or events, or disables / enables the endpoint again',
      security: bearer,
      middleware: auth,
      request: { params: IdParam, body: { content: { 'application/json': { schema: PatchBody } }, required: true } },
      responses: { 200: { description: 'ok', content: one }, ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      checkId(id);
      return c.json(
        { data: unwrap(await webhooks.update(c.get('principal').account.id, id, c.req.valid('json'))) },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/webhooks/{id}/rotate-secret',
      summary: 'A new signing secret, shown once; the old one stops signing at once',
      security: bearer,
      middleware: auth,
      request: { params: IdParam },
      responses: {
        200: {
          description: 'rotated',
          content: { 'application/json': { schema: z.object({ data: WebhookSchema, secret: z.string() }) } },
        },
        ...errorResponses(401, 403, 404),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      checkId(id);
      const r = unwrap(await webhooks.rotateSecret(c.get('principal').account.id, id));
      return c.json({ data: r.webhook, secret: r.secret }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/webhooks/{id}',
      summary: 'Removes the endpoint and its deliveries',
      security: bearer,
      middleware: auth,
      request: { params: IdParam },
      responses: { 204: { description: 'removed' }, ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      checkId(id);
      if (!(await webhooks.remove(c.get('principal').account.id, id))) throw ApiError.notFound('webhook');
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/webhooks/{id}/deliveries',
      summary: "The endpoint's deliveries, newest first, each with every attempt (status, latency, the answer's start)",
      security: bearer,
      middleware: auth,
      request: { params: IdParam, query: LimitQuery },
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(DeliverySchema) }) } },
        },
        ...errorResponses(401, 403, 404, 422),
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      checkId(id);
      const limit = c.req.valid('query').limit ?? 50;
      return c.json({ data: unwrap(await webhooks.deliveries(c.get('principal').account.id, id, limit)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/webhooks/{id}/deliveries/{delivery_id}/redeliver',
      summary: 'Sends the same event again as a new delivery',
      security: bearer,
      middleware: auth,
      request: { params: DeliveryParams },
      responses: {
        202: { description: 'queued', content: { 'application/json': { schema: z.object({ data: DeliverySchema }) } } },
        ...errorResponses(401, 403, 404),
      },
    }),
    async (c) => {
      const { id, delivery_id } = c.req.valid('param');
      checkId(id, delivery_id);
      return c.json({ data: unwrap(await webhooks.redeliver(c.get('principal').account.id, id, delivery_id)) }, 202);
    },
  );

  return app;
}
