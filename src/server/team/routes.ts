/**
 * Team routes: the roster with presence, add, rename, remove,
 * messages, a teammate's conversation history and the team SSE stream (schedules: schedule-routes.ts).
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import type { ConversationEngine } from '../conversations/engine.ts';
import { PRESENCE_STATES } from './presence.ts';
import type { TeamService, Teammate } from './service.ts';
import type { Scheduler } from './scheduler.ts';
import type { EngineResult } from '../core/engine-errors.ts';
import { eventView } from '../conversations/views.ts';
import { ApiError } from '../http/errors.ts';
import { runnersTopic, teamTopic } from '../cluster/bus.ts';
import { isUuid } from '../http/ids.ts';
import { conversationCounts } from '../agents/service.ts';
import { messageField } from '../conversations/limits.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { teamEventPage, teamMembers, type TeamEventRow } from './reads.ts';
import { AgentSchema, agentView } from '../agents/routes.ts';
import { bearer, errorResponses, lastEventIdOf, newRouter, type RouteDeps } from '../http/common.ts';
import { sseTail } from '../http/sse.ts';
import { engineApiError, streamsParam, wantedBy } from '../conversations/routes.ts';
import { ConversationSchema } from '../conversations/views.ts';

export interface TeamRouteDeps extends RouteDeps {
  readonly engine: ConversationEngine;
  readonly team: TeamService;
  /** Told which schedules went with a removed teammate. */
  readonly scheduler: Pick<Scheduler, 'changed'>;
  /** SSE heartbeat comment interval; default 15 s. */
  readonly sseHeartbeatMs?: number;
}

export const unwrap = <T>(r: EngineResult<T>): T => {
  if (!r.ok) throw engineApiError(r.error);
  return r.value;
};

const RunnerRefSchema = z.object({
  id: z.string(),
  name: z.string(),
  hostname: z.string().nullable(),
  online: z.boolean(),
  path: z.string().nullable(),
});

export const TeammateSchema = z
  .object({
    agent_id: z.string(),
    name: z.string(),
    agent: AgentSchema,
    conversation: ConversationSchema,
    presence: z.object({ state: z.enum(PRESENCE_STATES), label: z.string() }),
    sandbox: z.object({ provider: z.string(), runner: RunnerRefSchema.nullable() }).nullable(),
    unread: z.boolean(),
    usage_total: z.object({ input: z.number(), output: z.number() }),
    last_turn: z
      .object({
        id: z.string(),
        turn_number: z.number().int(),
        prompt: z.string(),
        status: z.string(),
        inserted_at: z.string(),
        usage: z.object({ input: z.number(), output: z.number() }).passthrough().nullable(),
      })
      .nullable(),
    preview: z.object({ kind: z.enum(['you', 'them', 'typing']), text: z.string() }).nullable(),
  })
  .openapi('Teammate');

export const AgentParam = z.object({ agent_id: z.string().openapi({ param: { name: 'agent_id', in: 'path' } }) });

const AddBody = z
  .object({
    agent_id: z.string({ error: 'agent_id is required' }).min(1, 'agent_id is required').max(100),
    name: z.string().max(120).optional(),
    environment_id: z.string().max(100).nullable().optional(),
  })
  .openapi('TeamAdd');
const RenameBody = z.object({ name: z.string().max(120).nullable() }).openapi('TeamRename');
const RotateBody = z.object({ name: z.string().max(120).optional() }).openapi('TeamRotate');
const MessageBody = z.object({ prompt: messageField }).openapi('TeamMessage');
export const queued = z.object({ status: z.literal('queued'), conversation_id: z.string() });

const TeamStreamQuery = z.object({
  streams: streamsParam,
  after: z.coerce.number().int().min(0).optional(),
});

export function teamRoutes(deps: TeamRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const db = deps.db as unknown as EngineDb;
  const { team, scheduler } = deps;
  const auth = requireKey(deps.db, deps.logger, 'any');
  const heartbeatMs = deps.sseHeartbeatMs ?? 15_000;

  const teammateJson = async (t: Teammate) => {
    const counts = await conversationCounts(db, [t.agent.id]);
    const c = t.conversation;
    return {
      agent_id: t.agent.id,
      name: t.name,
      agent: agentView(t.agent, counts.get(t.agent.id) ?? 0),
      conversation: c,
      presence: t.presence,
      sandbox: c.sandbox ? { provider: c.sandbox.provider, runner: c.sandbox.runner } : null,
      unread: c.unread,
      usage_total: t.usageTotal,
      last_turn: t.lastTurn
        ? {
            id: t.lastTurn.id,
            turn_number: t.lastTurn.turnNumber,
            prompt: t.lastTurn.prompt,
            status: t.lastTurn.status,
            inserted_at: t.lastTurn.insertedAt.toISOString(),
            usage: t.lastTurn.usage,
          }
        : null,
      preview: t.preview,
    };
  };
  const agentIdOf = (raw: string): string => {
    if (!isUuid(raw)) throw ApiError.notFound('teammate');
    return raw;
  };
  const teammate = async (accountId: string, rawAgentId: string): Promise<Teammate> => {
    const t = await team.get(accountId, agentIdOf(rawAgentId));
    if (!t) throw new ApiError(404, 'not_found', 'the agent is not on the team');
    return t;
  };
  // ------------------------------------------------------------ the stream (declared before /team/{agent_id})

  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/api/team/stream',
    summary:
      'Server-sent events of every teammate (each with conversation_id and agent_id); `event: team` and `event: schedule` {"reason":"changed"}; Last-Event-ID replays across teammates; `: heartbeat` every 15 s',
    security: bearer,
    request: { query: TeamStreamQuery },
    responses: {
      200: {
        description:
          'text/event-stream: `: connected`, then `id`/`event: output|stage`/`data`, `event: team`, `event: schedule`',
        content: { 'text/event-stream': { schema: z.string() } },
      },
      ...errorResponses(401, 422),
    },
  });
  app.get('/api/team/stream', auth, async (c) => {
    const accountId = c.get('principal').account.id;
    const q = TeamStreamQuery.safeParse(c.req.query());
    if (!q.success) throw ApiError.validation(q.error, 422);
    const fromHeader = lastEventIdOf(c.req.header('last-event-id'));
    const requested = fromHeader ?? q.data.after;
    // Without a cursor the stream starts at the present; with one it replays what the client missed.
    const after = requested ?? (await deps.engine.feeds.present());
    const streams = q.data.streams;
    const wanted = wantedBy(streams);
    let members = await teamMembers(db, accountId);
    /** Conversations known not to be this account's teammates (membership only changes with a `team` event). */
    const others = new Set<string>();
    let teamSignal = false;
    let scheduleSignal = false;
    const account = deps.engine.feeds.account(accountId, streams);
    type Item = { readonly event: TeamEventRow['event']; readonly agentId: string | null };
    return sseTail<Item>(c, {
      source: {
        page: (from, limit) => teamEventPage(db, accountId, { after: from, limit, streams }),
        live: (push) => account.live((event) => push({ event, agentId: null })),
      },
      idOf: (t) => t.event.id,
      after,
      heartbeatMs,
      send: async (stream, { event, agentId: known }) => {
        const convId = event.conversationId;
        let agentId: string | undefined = known ?? members.get(convId);
        if (agentId === undefined && !others.has(convId)) {
          // A conversation never seen may be a teammate's that started a moment ago: re-read to be sure.
          members = await teamMembers(db, accountId);
          agentId = members.get(convId);
          if (agentId === undefined) {
            if (others.size > 10_000) others.clear();
            others.add(convId);
          }
        }
        if (!agentId || !wanted(event)) return;
        await stream.writeSSE({
          id: String(event.id),
          event: event.kind,
          data: JSON.stringify({ ...eventView(event), conversation_id: convId, agent_id: agentId }),
        });
      },
      signals: {
        watch: (wake) => {
          const offTeam = deps.bus.subscribe(teamTopic(accountId), (e) => {
            if (e.type === 'team_changed') {
              teamSignal = true;
              others.clear();
            } else if (e.type === 'schedule_changed') scheduleSignal = true;
            wake();
          });
          const offRunners = deps.bus.subscribe(runnersTopic(accountId), (e) => {
            if (e.type === 'runner_online' || e.type === 'runner_offline') teamSignal = true;
            wake();
          });
          return () => {
            offTeam();
            offRunners();
          };
        },
        flush: async (stream) => {
          if (teamSignal) {
            teamSignal = false;
            await stream.writeSSE({ event: 'team', data: JSON.stringify({ reason: 'changed' }) });
          }
          if (scheduleSignal) {
            scheduleSignal = false;
            await stream.writeSSE({ event: 'schedule', data: JSON.stringify({ reason: 'changed' }) });
          }
        },
      },
    });
  });

  // ------------------------------------------------------------ roster

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team',
      summary: 'The roster, most recently active first, with presence and preview',
      security: bearer,
      middleware: [auth] as const,
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(TeammateSchema) }) } },
        },
        ...errorResponses(401),
      },
    }),
    async (c) => {
      const roster = await team.roster(c.get('principal').account.id);
      return c.json({ data: await Promise.all(roster.map(teammateJson)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/team',
      summary: 'Put an agent on the team: opens its conversation and provisions a sandbox (201); 200 if it already is',
      security: bearer,
      middleware: [auth] as const,
      request: { body: { content: { 'application/json': { schema: AddBody } }, required: true } },
      responses: {
        200: {
          description: 'already on the team',
          content: { 'application/json': { schema: z.object({ data: TeammateSchema }) } },
        },
        201: { description: 'added', content: { 'application/json': { schema: z.object({ data: TeammateSchema }) } } },
        ...errorResponses(401, 404, 409, 422),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const b = c.req.valid('json');
      if (!isUuid(b.agent_id)) throw ApiError.notFound('agent');
      if (b.environment_id !== undefined && b.environment_id !== null) {
        // This server has no environments yet, so every id is unknown.
        throw new ApiError(404, 'environment_not_found', 'environment not found');
      }
      const r = unwrap(await team.add(accountId, b.agent_id, b.name));
      const t = await teammate(accountId, b.agent_id);
      return c.json({ data: await teammateJson(t) }, r.created ? 201 : 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team/{agent_id}',
      summary: 'One teammate',
      security: bearer,
      middleware: [auth] as const,
      request: { params: AgentParam },
      responses: {
        200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: TeammateSchema }) } } },
        ...errorResponses(401, 404),
      },
    }),
    async (c) =>
      c.json(
        { data: await teammateJson(await teammate(c.get('principal').account.id, c.req.valid('param').agent_id)) },
        200,
      ),
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/team/{agent_id}',
      summary: "Rename a teammate (the conversation's title); null or blank restores the agent's name",
      security: bearer,
      middleware: [auth] as const,
      request: {
        params: AgentParam,
        body: { content: { 'application/json': { schema: RenameBody } }, required: true },
      },
      responses: {
        200: {
          description: 'renamed',
          content: { 'application/json': { schema: z.object({ data: TeammateSchema }) } },
        },
        ...errorResponses(401, 404, 422),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const agentId = agentIdOf(c.req.valid('param').agent_id);
      unwrap(await team.rename(accountId, agentId, c.req.valid('json').name));
      return c.json({ data: await teammateJson(await teammate(accountId, agentId)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/team/{agent_id}',
      summary:
        'Take an agent off the team: terminates its live conversation, unbinds its team conversations, deletes its schedules',
      security: bearer,
      middleware: [auth] as const,
      request: { params: AgentParam },
      responses: { 204: { description: 'removed' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const r = unwrap(await team.remove(accountId, agentIdOf(c.req.valid('param').agent_id)));
      for (const id of r.scheduleIds) scheduler.changed({ accountId, id });
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/team/{agent_id}/messages',
      summary:
        'Message a teammate: wakes a parked sandbox; a finished conversation is replaced by a fresh one seeded with the message. 503 runner_offline (Retry-After) while its machine is away.',
      security: bearer,
      middleware: [auth] as const,
      request: {
        params: AgentParam,
        body: { content: { 'application/json': { schema: MessageBody } }, required: true },
      },
      responses: {
        202: { description: 'queued', content: { 'application/json': { schema: queued } } },
        ...errorResponses(400, 401, 404, 409, 422, 503),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const r = unwrap(
        await team.message(accountId, agentIdOf(c.req.valid('param').agent_id), c.req.valid('json').prompt),
      );
      return c.json({ status: 'queued' as const, conversation_id: r.conversationId }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/team/{agent_id}/conversations',
      summary:
        'Rotate: a fresh conversation on the same sandbox (files kept, new agent session); the old one is released. A sandbox that is gone gives a new one.',
      security: bearer,
      middleware: [auth] as const,
      request: {
        params: AgentParam,
        body: { content: { 'application/json': { schema: RotateBody } }, required: false },
      },
      responses: {
        201: {
          description: 'created',
          content: { 'application/json': { schema: z.object({ data: ConversationSchema }) } },
        },
        ...errorResponses(400, 401, 404, 422, 503),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const body = c.req.header('content-type')?.includes('application/json') ? c.req.valid('json') : {};
      const r = unwrap(await team.rotate(accountId, agentIdOf(c.req.valid('param').agent_id), body?.name));
      return c.json({ data: r }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team/{agent_id}/conversations',
      summary: "A teammate's conversations, newest first; `current` marks the one the roster shows",
      security: bearer,
      middleware: [auth] as const,
      request: { params: AgentParam },
      responses: {
        200: {
          description: 'ok',
          content: {
            'application/json': {
              schema: z.object({ data: z.array(ConversationSchema.extend({ current: z.boolean() })) }),
            },
          },
        },
        ...errorResponses(401, 404),
      },
    }),
    async (c) => {
      const t = await teammate(c.get('principal').account.id, c.req.valid('param').agent_id);
      const data = await Promise.all(
        t.history.map(async (row) => ({
          ...(await deps.engine.view(row)),
          current: row.conversation.id === t.conversation.id,
        })),
      );
      return c.json({ data }, 200);
    },
  );

  return app;
}
