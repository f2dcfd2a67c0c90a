/**
 * The usage routes: spend summed by conversation, agent, day, model or turn; the audit list of model
 * calls (JSON or CSV); the account's model limits.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';
import { ModelLimitsApi } from './schemas.ts';
import { callsCsv, type UsageService, type UsageFilter } from './service.ts';

const GROUPS = ['conversation', 'agent', 'day', 'model', 'turn'] as const;

const Filter = z.object({
  conversation_id: z.string().max(100).optional(),
  agent_id: z.string().max(100).optional(),
  since: z.iso.datetime({ offset: true }).optional().openapi({ description: 'ISO 8601; inclusive' }),
  until: z.iso.datetime({ offset: true }).optional().openapi({ description: 'ISO 8601; exclusive' }),
});

const UsageRowSchema = z
  .object({
    key: z.string().openapi({ description: 'The conversation, agent, turn id, model, or UTC day (YYYY-MM-DD)' }),
    calls: z.number().int(),
    refused: z.number().int(),
    input_tokens: z.number().int(),
    output_tokens: z.number().int(),
    cache_read_tokens: z.number().int(),
    cache_write_tokens: z.number().int(),
    cost_usd: z.number(),
  })
  .openapi('UsageRow');

const CallSchema = z
  .object({
    id: z.string(),
    created_at: z.string(),
    conversation_id: z.string().nullable(),
    agent_id: z.string().nullable(),
    turn_id: z.string().nullable(),
    api: z.string(),
    endpoint: z.string(),
    model: z.string().nullable(),
    status: z.number().int(),
    refused: z.string().nullable().openapi({ description: 'The limit that refused the call; null when forwarded' }),
    input_tokens: z.number().int(),
    output_tokens: z.number().int(),
    cache_read_tokens: z.number().int(),
    cache_write_tokens: z.number().int(),
    cost_usd: z.number().nullable(),
    latency_ms: z.number().int(),
    first_byte_ms: z.number().int().nullable(),
  })
  .openapi('ModelCall');

function filterOf(q: z.infer<typeof Filter>): UsageFilter {
  for (const [field, v] of [
    ['conversation_id', q.conversation_id],
    ['agent_id', q.agent_id],
  ] as const)
    if (v !== undefined && !isUuid(v))
      throw new ApiError(422, 'validation_failed', `${field}: must be a uuid`, {
        errors: { [field]: ['must be a uuid'] },
      });
  return {
    conversationId: q.conversation_id,
    agentId: q.agent_id,
    since: q.since ? new Date(q.since) : undefined,
    until: q.until ? new Date(q.until) : undefined,
  };
}

export function usageRoutes(deps: RouteDeps & { readonly usage: UsageService }): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const usage = deps.usage;
  const auth = requireKey(deps.db, deps.logger, 'full');

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/usage',
      summary: 'Model usage through the gateway, summed by conversation, agent, UTC day, model or turn',
      security: bearer,
      middleware: [auth] as const,
      request: { query: Filter.extend({ by: z.enum(GROUPS).default('day') }) },
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(UsageRowSchema), by: z.enum(GROUPS) }) } },
        },
        ...errorResponses(401, 422),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const data = await usage.by(c.get('principal').account.id, q.by, filterOf(q));
      return c.json({ data, by: q.by }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/usage/calls',
      summary:
        'The audit list: one row per model call (no prompt or answer bodies), newest first; format=csv exports it',
      security: bearer,
      middleware: [auth] as const,
      request: {
        query: Filter.extend({
          limit: z.coerce.number().int().min(1).max(10_000).default(100),
          before: z.iso.datetime({ offset: true }).optional().openapi({ description: 'Page: calls before this time' }),
          format: z.enum(['json', 'csv']).default('json'),
        }),
      },
      responses: {
        200: {
          description: 'ok',
          content: {
            'application/json': { schema: z.object({ data: z.array(CallSchema) }) },
            'text/csv': { schema: z.string() },
          },
        },
        ...errorResponses(401, 422),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const rows = await usage.calls(c.get('principal').account.id, {
        ...filterOf(q),
        limit: q.limit,
        before: q.before ? new Date(q.before) : undefined,
      });
      if (q.format === 'csv')
        return c.body(callsCsv(rows), 200, {
          'content-type': 'text/csv; charset=utf-8',
          'content-disposition': 'attachment; filename="model-calls.csv"',
        });
      return c.json({ data: rows }, 200);
    },
  );

  const limitsBody = { 'application/json': { schema: z.object({ data: ModelLimitsApi }) } };
  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/usage/limits',
      summary: "The account's model limits (every agent's calls count against them)",
      security: bearer,
      middleware: [auth] as const,
      responses: { 200: { description: 'ok', content: limitsBody }, ...errorResponses(401) },
    }),
    async (c) => c.json({ data: await usage.limits(c.get('principal').account.id) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'put',
      path: '/api/usage/limits',
      summary: "Replace the account's model limits ({} for none)",
      security: bearer,
      middleware: [auth] as const,
      request: { body: { content: { 'application/json': { schema: ModelLimitsApi } }, required: true } },
      responses: { 200: { description: 'ok', content: limitsBody }, ...errorResponses(401, 422) },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const b = c.req.valid('json');
      if (b.models !== undefined)
        throw new ApiError(
          422,
          'validation_failed',
          'models: a model allow-list is set per agent (model_limits.models)',
          {
            errors: { models: ['a model allow-list is set per agent'] },
          },
        );
      await usage.setLimits(accountId, b);
      return c.json({ data: await usage.limits(accountId) }, 200);
    },
  );

  return app;
}
