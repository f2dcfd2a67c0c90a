/**
 * Conversation routes: create, list, get, delete, prompts, interrupt,
 * terminate, turns, cursor-paged events, the SSE stream, and permission answers.
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { hasScope, requireKey, type AppEnv } from '../http/auth.ts';
import type { ConversationEngine } from './engine.ts';
import { ENGINE_ERROR_STATUS, ENGINE_RETRY_AFTER, type EngineError, type EngineResult } from '../core/engine-errors.ts';
import { ConversationSchema, EventSchema, eventView, TurnSchema, turnView } from './views.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { messageField } from './limits.ts';
import {
  decodeImages,
  IMAGE_TYPES,
  ImagesField,
  MAX_IMAGE_BYTES,
  MAX_IMAGES,
  type DecodedImage,
  type ImageRefusalCode,
} from './prompt-images.ts';
import type { ConversationStatus, EventRow } from '../store/conversation-schema.ts';
import { CONVERSATION_STATUSES, EVENT_STREAMS, eventPage, findConversation, turnsOf } from './history.ts';
import { decodeCursor, listConversationRowsPage } from './listing.ts';
import { LabelFilterParam } from './labels.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { deriverFor } from './blocks.ts';
import { bearer, errorResponses, IdParam, newRouter, type RouteDeps } from '../http/common.ts';
import { PermissionPolicySchema } from '../agents/routes.ts';
import { LaunchSecretsSchema } from '../environments/schemas.ts';
import { BRANCH_NAME } from '../environments/git-remote.ts';
import { MODEL_PATTERN } from '../runtimes/table.ts';

export interface ConversationRouteDeps extends RouteDeps {
  readonly engine: ConversationEngine;
  /** SSE heartbeat comment interval; default 15 s. */
  readonly sseHeartbeatMs?: number;
}

/** The engine's refusals become the one error type, with `Retry-After` where the code carries one. */
export function engineApiError(e: EngineError): ApiError {
  const retry = ENGINE_RETRY_AFTER[e.code];
  return new ApiError(
    (e.status ?? ENGINE_ERROR_STATUS[e.code]) as 400,
    e.code,
    e.message,
    { ...e.extras },
    retry ? { 'retry-after': String(retry) } : {},
  );
}

const unwrap = <T>(r: EngineResult<T>): T => {
  if (!r.ok) throw engineApiError(r.error);
  return r.value;
};

const CreateBody = z
  .object({
    agent_id: z.string({ error: 'agent_id is required' }).min(1, 'agent_id is required').max(100),
    title: z.string().max(120).optional(),
    prompt: messageField.optional(),
    images: ImagesField.openapi({ description: 'Images sent with the first prompt (needs prompt); see Prompt' }),
    permission_policy: PermissionPolicySchema.optional(),
    environment_id: z
      .string()
      .max(100)
      .optional()
      .openapi({ description: "Overrides the agent's environment; must pass its allowed_environment_ids" }),
    secrets: LaunchSecretsSchema.optional(),
    branch: z.string().regex(BRANCH_NAME, 'not a branch name').optional().openapi({
      description:
        "A branch of the environment's repository to clone instead of its ref; checked against the remote (422 branch_not_found)",
    }),
    repository: z
      .string()
      .max(2000)
      .optional()
      .openapi({ description: "Which of the environment's repositories `branch` is of; its first when absent" }),
    model: z
      .string()
      .max(200)
      .regex(MODEL_PATTERN, 'must look like provider/model_id (lowercase letters, digits, . _ -)')
      .optional()
      .openapi({
        description:
          "The model (`provider/id`) instead of the agent's, for this conversation's every launch: it must fit the agent's runtime (422 model_not_for_runtime) and its allow-list (422 model_not_allowed), and its vendor's credential must be set",
        example: 'anthropic/claude-opus-4-1',
      }),
  })
  .openapi('ConversationCreate');

const PromptBody = z
  .object({
    prompt: messageField,
    images: ImagesField.openapi({
      description: `Images sent with the prompt, as ACP image blocks, to a runtime that advertises image prompts: at most ${MAX_IMAGES}, PNG, JPEG, GIF or WebP (told by their bytes), ${MAX_IMAGE_BYTES / 1024 / 1024} MB each`,
    }),
  })
  .openapi('Prompt');

const IMAGE_STATUS: Record<ImageRefusalCode, 413 | 422> = {
  too_many_images: 422,
  image_too_large: 413,
  unsupported_image_type: 422,
  invalid_image: 422,
};

/** The request's images decoded and checked, or the refusal naming the first bad one (nothing is stored). */
export function imagesOf(input: Parameters<typeof decodeImages>[0]): DecodedImage[] {
  const r = decodeImages(input);
  if (r.ok) return r.value;
  throw new ApiError(
    IMAGE_STATUS[r.error.code] as 422,
    r.error.code,
    r.error.message,
    r.error.index === undefined ? {} : { index: r.error.index },
  );
}

const ImageParams = z.object({
  id: z.string().openapi({ param: { name: 'id', in: 'path' } }),
  turn_id: z
    .string()
    .max(100)
    .openapi({ param: { name: 'turn_id', in: 'path' } }),
  position: z
    .string()
    .max(10)
    .openapi({ param: { name: 'position', in: 'path' }, description: 'From 0' }),
});

const AnswerBody = z.object({ option_id: z.string().max(200).optional() }).openapi('PermissionAnswer');

const ListQuery = z.object({
  status: z
    .string()
    .max(200)
    .optional()
    .openapi({ description: `Comma list of ${CONVERSATION_STATUSES.join(', ')}` }),
  agent_id: z.string().max(100).optional(),
  // Paging (beyond upstream, which returns every conversation): any of these switches to pages by last activity.
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(200)
    .optional()
    .openapi({ description: 'Page size (1-200): pages newest activity first, with meta.next_cursor' }),
  after: z.string().max(200).optional().openapi({ description: 'meta.next_cursor of the previous page' }),
  q: z
    .string()
    .max(200)
    .optional()
    .openapi({ description: 'Search titles and first messages (case-insensitive); pages' }),
  unread: z
    .enum(['true', 'false'])
    .optional()
    .openapi({ description: 'true: only conversations with activity since they were last opened; pages' }),
  label: LabelFilterParam.optional().openapi({
    type: 'string',
    description: 'Comma list of labels (`key` matches any value, `key=value` that value); all must match; pages',
  }),
});

const PAGE_DEFAULT = 50;

const STREAM_FILTERS = [...EVENT_STREAMS.filter((s) => s !== ''), 'stage'] as const;
/** Whether a live event passes `?streams=` (the store applies the same filter to replays). */
export const wantedBy =
  (streams: ReadonlyArray<string> | undefined) =>
  (e: Pick<EventRow, 'kind' | 'stream'>): boolean =>
    !streams || (e.kind === 'stage' ? streams.includes('stage') : streams.includes(e.stream));

/** `?streams=stdout,acp,stage`: shared by the conversation, account and team streams. */
export const streamsParam = z
  .string()
  .max(100)
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v.trim() === '') return undefined;
    const parts = v.split(',').map((s) => s.trim());
    for (const p of parts) {
      if (!(STREAM_FILTERS as readonly string[]).includes(p)) {
        ctx.addIssue({ code: 'custom', message: `streams must be a comma list of ${STREAM_FILTERS.join(', ')}` });
        return z.NEVER;
      }
    }
    return parts as Array<(typeof STREAM_FILTERS)[number]>;
  });

export const blocksParam = z
  .enum(['true', 'false'])
  .optional()
  .openapi({ description: 'true: each event carries its blocks, tool calls merged with their updates' });

const EventsQuery = z.object({
  blocks: blocksParam,
  after: z.coerce.number({ error: 'after must be an event id' }).int().min(0).default(0),
  limit: z.coerce
    .number({ error: 'limit must be a number' })
    .int()
    .min(1)
    .max(1000, 'limit must be at most 1000')
    .default(100),
  streams: streamsParam,
});

const RequestParams = z.object({
  id: z.string().openapi({ param: { name: 'id', in: 'path' } }),
  request_id: z
    .string()
    .max(200)
    .openapi({ param: { name: 'request_id', in: 'path' } }),
});

const queued = z
  .object({
    status: z.literal('queued').openapi({ description: 'Accepted (the upstream word); `queue` says whether it waits' }),
    turn_id: z.string(),
    queue: z.object({ position: z.number().int(), expires_at: z.string() }).nullable().openapi({
      description:
        "Null: the turn starts now. Set: the account's running-turn or sandbox limit is reached and the turn waits (turn status `queued`), 1 = next in line; it fails at expires_at unless started, and the interrupt cancels it",
    }),
  })
  .openapi('PromptAccepted');

export function conversationRoutes(deps: ConversationRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const db = deps.db as unknown as EngineDb;
  const { engine } = deps;
  const auth = requireKey(deps.db, deps.logger, 'any');
  const one = { 'application/json': { schema: z.object({ data: ConversationSchema }) } };

  const owned = async (accountId: string, id: string) => {
    const row = isUuid(id) ? await findConversation(db, accountId, id) : undefined;
    if (!row) throw ApiError.notFound('conversation');
    return row;
  };
  const checkId = (id: string): string => {
    if (!isUuid(id)) throw ApiError.notFound('conversation');
    return id;
  };

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/conversations',
      summary:
        'List conversations, newest first (filters: status, agent_id); with limit, after, q, unread or label: one page by last activity',
      security: bearer,
      middleware: [auth] as const,
      request: { query: ListQuery },
      responses: {
        200: {
          description: 'ok',
          content: {
            'application/json': {
              schema: z.object({
                data: z.array(ConversationSchema),
                meta: z
                  .object({ limit: z.number().int(), has_more: z.boolean(), next_cursor: z.string().nullable() })
                  .optional(),
              }),
            },
          },
        },
        ...errorResponses(400, 401),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      let statuses: ConversationStatus[] | undefined;
      if (q.status) {
        const parts = q.status
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        const bad = parts.find((p) => !(CONVERSATION_STATUSES as readonly string[]).includes(p));
        if (bad !== undefined)
          throw new ApiError(
            400,
            'invalid_status',
            `unknown status ${JSON.stringify(bad)}; use ${CONVERSATION_STATUSES.join(', ')}`,
          );
        statuses = parts as ConversationStatus[];
      }
      if (q.agent_id !== undefined && !isUuid(q.agent_id)) return c.json({ data: [] }, 200);
      const accountId = c.get('principal').account.id;
      const paged = [q.limit, q.after, q.q, q.unread, q.label].some((v) => v !== undefined);
      if (paged) {
        if (q.after !== undefined && !decodeCursor(q.after))
          throw new ApiError(400, 'invalid_cursor', 'after must be a meta.next_cursor from an earlier page');
        const limit = q.limit ?? PAGE_DEFAULT;
        const page = await listConversationRowsPage(db, accountId, {
          statuses,
          agentId: q.agent_id,
          search: q.q,
          unread: q.unread === 'true',
          labels: q.label,
          after: q.after,
          limit,
        });
        const places = await engine.queuePositions(page.rows.map((r) => r.conversation.id));
        const data = await Promise.all(page.rows.map((r) => engine.view(r, places)));
        return c.json({ data, meta: { limit, has_more: page.next !== null, next_cursor: page.next } }, 200);
      }
      const data = await engine.list(accountId, { statuses, agentId: q.agent_id });
      return c.json({ data }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations',
      summary: 'Start a conversation: allocates a sandbox and provisions it in the background (stage events follow)',
      security: bearer,
      middleware: [auth] as const,
      request: { body: { content: { 'application/json': { schema: CreateBody } }, required: true } },
      responses: {
        201: {
          description: 'created',
          content: {
            'application/json': {
              schema: z.object({ data: ConversationSchema, meta: z.object({ resumed: z.boolean() }) }),
            },
          },
        },
        ...errorResponses(401, 404, 409, 422, 502),
      },
    }),
    async (c) => {
      const b = c.req.valid('json');
      if (!isUuid(b.agent_id)) throw ApiError.notFound('agent');
      if (b.environment_id !== undefined && !isUuid(b.environment_id))
        throw new ApiError(404, 'environment_not_found', `environment ${b.environment_id} not found`);
      if (b.images?.length && !b.prompt)
        throw new ApiError(422, 'validation_failed', 'images: go with a prompt', {
          errors: { images: ['go with a prompt'] },
        });
      const images = imagesOf(b.images);
      const p = c.get('principal');
      // Created with a sandbox token: a child of the token's conversation, never looser than it.
      const parentId = hasScope(p, 'full') ? undefined : (p.key.conversationId ?? undefined);
      const data = unwrap(
        await engine.create(p.account.id, {
          agentId: b.agent_id,
          title: b.title,
          prompt: b.prompt,
          images,
          permissionPolicy: b.permission_policy,
          parentId,
          environmentId: b.environment_id,
          secrets: b.secrets,
          branch: b.branch,
          repository: b.repository,
          model: b.model,
        }),
      );
      return c.json({ data, meta: { resumed: false } }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/conversations/{id}',
      summary: 'One conversation, with its sandbox and (for runner sandboxes) the runner',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 200: { description: 'ok', content: one }, ...errorResponses(401, 404) },
    }),
    async (c) =>
      c.json({ data: unwrap(await engine.get(c.get('principal').account.id, checkId(c.req.valid('param').id))) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/conversations/{id}',
      summary: 'Tear down the sandbox and delete the conversation with its turns and events',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'deleted' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      unwrap(await engine.delete(c.get('principal').account.id, checkId(c.req.valid('param').id)));
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/prompts',
      summary: 'Send a prompt; wakes a parked sandbox first. The turn runs asynchronously.',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam, body: { content: { 'application/json': { schema: PromptBody } }, required: true } },
      responses: {
        200: { description: 'queued', content: { 'application/json': { schema: queued } } },
        ...errorResponses(400, 401, 404, 410, 413, 422, 503),
      },
    }),
    async (c) => {
      const body = c.req.valid('json');
      const images = imagesOf(body.images);
      const r = unwrap(
        await engine.prompt(c.get('principal').account.id, checkId(c.req.valid('param').id), body.prompt, images),
      );
      return c.json(
        {
          status: 'queued' as const,
          turn_id: r.turnId,
          queue: r.queue ? { position: r.queue.position, expires_at: r.queue.expiresAt } : null,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/conversations/{id}/turns/{turn_id}/images/{position}',
      summary: "The bytes of one image of a turn's prompt (its url in the turn and the turn's started event)",
      security: bearer,
      middleware: [auth] as const,
      request: { params: ImageParams },
      responses: {
        200: {
          description: 'the image, with its type',
          content: Object.fromEntries(
            IMAGE_TYPES.map((t) => [t, { schema: z.string().openapi({ type: 'string', format: 'binary' }) }]),
          ),
        },
        ...errorResponses(401, 404),
      },
    }),
    async (c) => {
      const { id, turn_id, position } = c.req.valid('param');
      const at = /^\d{1,2}$/.test(position) ? Number(position) : -1;
      const r = await engine.image(c.get('principal').account.id, id, turn_id, at);
      if (!r.ok) throw ApiError.notFound('image');
      return c.body(new Uint8Array(r.value.bytes), 200, {
        'content-type': r.value.mediaType,
        'content-length': String(r.value.bytes.length),
        // The bytes of a digest never change; only the key's holder may keep them.
        'cache-control': 'private, max-age=31536000, immutable',
        'x-content-type-options': 'nosniff',
      }) as never;
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/interrupt',
      summary:
        'Cancel the running turn (ACP session/cancel), or the prompt waiting in the capacity queue (it never starts)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'interrupting' }, ...errorResponses(401, 404, 409) },
    }),
    async (c) => {
      unwrap(await engine.interrupt(c.get('principal').account.id, checkId(c.req.valid('param').id)));
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/terminate',
      summary: 'Destroy the sandbox and end the conversation (idempotent)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'terminated' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      unwrap(await engine.terminate(c.get('principal').account.id, checkId(c.req.valid('param').id)));
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/read',
      summary: 'Mark the conversation read (`last_read_at` now, so `unread` is false until it is next active)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'marked read' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      unwrap(await engine.markRead(c.get('principal').account.id, checkId(c.req.valid('param').id)));
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/conversations/{id}/turns',
      summary: 'The turns, oldest first: the way to poll a turn’s status',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(TurnSchema) }) } },
        },
        ...errorResponses(401, 404),
      },
    }),
    async (c) => {
      const row = await owned(c.get('principal').account.id, c.req.valid('param').id);
      const place = (await engine.queuePositions([row.conversation.id])).get(row.conversation.id);
      return c.json({ data: (await turnsOf(db, row.conversation.id)).map((t) => turnView(t, place)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/conversations/{id}/events',
      summary: 'Events after a cursor, oldest first (limit ≤ 1000)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam, query: EventsQuery },
      responses: {
        200: {
          description: 'ok',
          content: {
            'application/json': {
              schema: z.object({
                data: z.array(EventSchema),
                meta: z.object({ limit: z.number(), has_more: z.boolean(), next_cursor: z.number().nullable() }),
              }),
            },
          },
        },
        ...errorResponses(401, 404, 422),
      },
    }),
    async (c) => {
      const row = await owned(c.get('principal').account.id, c.req.valid('param').id);
      const q = c.req.valid('query');
      const rows = await eventPage(db, row.conversation.id, { after: q.after, limit: q.limit + 1, streams: q.streams });
      const page = rows.slice(0, q.limit);
      const last = page[page.length - 1];
      const deriver = q.blocks === 'true' ? await deriverFor(db, row.conversation.id, page) : null;
      return c.json(
        {
          data: page.map((e) => eventView(e, deriver?.blocks(e))),
          meta: { limit: q.limit, has_more: rows.length > q.limit, next_cursor: last ? last.id : null },
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/conversations/{id}/requests/{request_id}',
      summary: 'Answer a held permission request with one of its options; the first answer wins',
      security: bearer,
      middleware: [auth] as const,
      request: {
        params: RequestParams,
        body: { content: { 'application/json': { schema: AnswerBody } }, required: true },
      },
      responses: {
        200: {
          description: 'answered',
          content: { 'application/json': { schema: z.object({ ok: z.literal(true) }) } },
        },
        ...errorResponses(401, 403, 404, 409, 422),
      },
    }),
    async (c) => {
      const p = c.get('principal');
      if (!hasScope(p, 'full'))
        throw new ApiError(403, 'sprite_may_not_answer', 'a sandbox token cannot answer permission requests');
      const { id, request_id } = c.req.valid('param');
      const { option_id } = c.req.valid('json');
      if (option_id === undefined || option_id === '')
        throw new ApiError(422, 'option_id_required', 'option_id is required');
      unwrap(await engine.answerPermission(p.account.id, checkId(id), request_id, option_id));
      return c.json({ ok: true as const }, 200);
    },
  );

  return app;
}
