/**
 * The conversation streams: one conversation's events, and every event of the
 * caller's conversations, both on the one SSE loop and the node's event feeds, whichever node drives the turn.
 */
import { z } from '@hono/zod-openapi';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { bearer, errorResponses, IdParam, lastEventIdOf, newRouter } from '../http/common.ts';
import { encodeSse, sseOncePer, sseTail } from '../http/sse.ts';
import { eventView } from './views.ts';
import type { EventRow } from '../store/conversation-schema.ts';
import { blocksParam, streamsParam, wantedBy, type ConversationRouteDeps } from './routes.ts';
import { deriverFor, type BlockDeriver } from './blocks.ts';
import type { EngineDb } from '../store/engine-db.ts';

/** An event as the conversation stream and as the account stream send it, each encoded once however many clients tail it. */
const conversationEvent = sseOncePer((e: EventRow) => ({
  id: String(e.id),
  event: e.kind,
  data: JSON.stringify(eventView(e)),
}));
const accountEvent = sseOncePer((e: EventRow) => ({
  id: String(e.id),
  event: e.kind,
  data: JSON.stringify({ ...eventView(e), conversation_id: e.conversationId }),
}));

/** The account stream's signal that the caller's conversation list changed: re-read it (debounced to one a second). */
const CONVERSATIONS_CHANGED = encodeSse({ event: 'conversations', data: JSON.stringify({ reason: 'changed' }) });

export function streamRoutes(deps: ConversationRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const { engine } = deps;
  const auth = requireKey(deps.db, deps.logger, 'any');
  const heartbeatMs = deps.sseHeartbeatMs ?? 15_000;
  const owned = async (accountId: string, id: string) => {
    const r = isUuid(id) ? await engine.get(accountId, id) : undefined;
    if (!r?.ok) throw ApiError.notFound('conversation');
    return r.value;
  };

  const db = deps.db as unknown as EngineDb;
  const StreamQuery = z.object({
    blocks: blocksParam,
    streams: streamsParam,
    wait: z.enum(['true', 'false']).optional(),
    after: z.coerce.number().int().min(0).optional(),
  });
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/api/conversations/{id}/stream',
    summary: 'Server-sent events: replays after Last-Event-ID (or ?after=), then tails; `: heartbeat` every 15 s',
    security: bearer,
    request: { params: IdParam, query: StreamQuery },
    responses: {
      200: {
        description: 'text/event-stream of `id`, `event: output|stage`, `data: LogEvent`',
        content: { 'text/event-stream': { schema: z.string() } },
      },
      ...errorResponses(401, 404, 422),
    },
  });
  app.get('/api/conversations/:id/stream', auth, async (c) => {
    const conv = await owned(c.get('principal').account.id, c.req.param('id'));
    const q = StreamQuery.safeParse(c.req.query());
    if (!q.success) throw ApiError.validation(q.error, 422);
    const fromHeader = lastEventIdOf(c.req.header('last-event-id'));
    const start = fromHeader ?? q.data.after ?? 0;
    const streams = q.data.streams;
    const wanted = wantedBy(streams);
    // Blocks merge tool calls across events, so they are this client's own: a deriver primed with the
    // earlier tool lines of the first event's turn sees every event sent.
    let deriver: BlockDeriver | null = null;
    return sseTail(c, {
      source: engine.feeds.conversation(conv.id, streams),
      idOf: (e) => e.id,
      after: start,
      follow: q.data.wait !== 'false',
      heartbeatMs,
      send: async (stream, e) => {
        if (!wanted(e)) return;
        if (q.data.blocks !== 'true') {
          await stream.write(conversationEvent(e));
          return;
        }
        deriver ??= await deriverFor(db, conv.id, [e]);
        await stream.writeSSE({
          id: String(e.id),
          event: e.kind,
          data: JSON.stringify(eventView(e, deriver.blocks(e))),
        });
      },
    });
  });

  const AccountStreamQuery = z.object({ streams: streamsParam, after: z.coerce.number().int().min(0).optional() });
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/api/events/stream',
    summary:
      'Account-wide server-sent events: every event of the caller\'s conversations, each with conversation_id, from whichever node the turn runs on; `event: conversations` {"reason":"changed"} when one is created, retitled, read, deleted or finishes (at most one a second); Last-Event-ID (or ?after=) replays, otherwise it starts at the present',
    security: bearer,
    request: { query: AccountStreamQuery },
    responses: {
      200: {
        description:
          'text/event-stream: `: connected`, then `id`/`event: output|stage`/`data: LogEvent + conversation_id`, and `event: conversations` (no id) with `data: {"reason":"changed"}`',
        content: { 'text/event-stream': { schema: z.string() } },
      },
      ...errorResponses(401, 422),
    },
  });
  app.get('/api/events/stream', auth, async (c) => {
    const accountId = c.get('principal').account.id;
    const q = AccountStreamQuery.safeParse(c.req.query());
    if (!q.success) throw ApiError.validation(q.error, 422);
    const streams = q.data.streams;
    const wanted = wantedBy(streams);
    const after = lastEventIdOf(c.req.header('last-event-id')) ?? q.data.after ?? (await engine.feeds.present());
    const changes = engine.conversationsSignal(accountId);
    return sseTail(c, {
      source: engine.feeds.account(accountId, streams),
      idOf: (e) => e.id,
      after,
      heartbeatMs,
      send: async (stream, e) => {
        if (!wanted(e)) return;
        await stream.write(accountEvent(e));
      },
      signals: {
        watch: changes.watch,
        flush: async (stream) => {
          if (changes.due()) await stream.write(CONVERSATIONS_CHANGED);
        },
      },
    });
  });

  return app;
}
