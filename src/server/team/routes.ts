/**
 * Team routes (platform-api.md §10, §11, §7.2): the roster with presence, add, rename, remove,
 * messages, a teammate's conversation history, the team SSE stream, and schedules.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import type { ConversationEngine } from '../conversations/engine.ts';
import { parseCron } from './cron.ts';
import { PRESENCE_STATES } from './presence.ts';
import { nextRunAt, type Scheduler } from './scheduler.ts';
import type { TeamService, Teammate } from './service.ts';
import type { EngineResult } from '../conversations/errors.ts';
import { eventView } from '../conversations/views.ts';
import { ApiError } from '../http/errors.ts';
import { runnersTopic, teamTopic } from '../cluster/bus.ts';
import { isUuid } from '../http/ids.ts';
import { getAgent, conversationCounts } from '../agents/store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { deleteSchedule, getSchedule, insertSchedule, listSchedules, pageTeamEvents, teamConversationAgents, updateSchedule, type TeamEventRow } from './store.ts';
import type { Schedule } from '../store/team-schema.ts';
import { audit } from '../account/audit.ts';
import { AgentSchema, agentView } from '../agents/routes.ts';
import { bearer, errorResponses, lastEventIdOf, newRouter, type RouteDeps } from '../http/common.ts';
import { sseTail } from '../http/sse.ts';
import { ConversationSchema, engineApiError, streamsParam, wantedBy } from '../conversations/routes.ts';

export interface TeamRouteDeps extends RouteDeps {
  readonly engine: ConversationEngine;
  readonly team: TeamService;
  readonly scheduler: Scheduler;
  /** SSE heartbeat comment interval; default 15 s. */
  readonly sseHeartbeatMs?: number;
}

const unwrap = <T>(r: EngineResult<T>): T => {
  if (!r.ok) throw engineApiError(r.error);
  return r.value;
};

const RunnerRefSchema = z.object({ id: z.string(), name: z.string(), hostname: z.string().nullable(), online: z.boolean(), path: z.string().nullable() });

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

export const ScheduleSchema = z
  .object({
    id: z.string(),
    agent_id: z.string(),
    name: z.string().nullable(),
    cron: z.string(),
    prompt: z.string(),
    one_off: z.boolean(),
    enabled: z.boolean(),
    next_run_at: z.string().nullable(),
    last_run_at: z.string().nullable(),
    last_conversation_id: z.string().nullable(),
    last_error: z.string().nullable(),
    inserted_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Schedule');

const AgentParam = z.object({ agent_id: z.string().openapi({ param: { name: 'agent_id', in: 'path' } }) });
const ScheduleParams = AgentParam.extend({ id: z.string().openapi({ param: { name: 'id', in: 'path' } }) });

const AddBody = z
  .object({
    agent_id: z.string({ error: 'agent_id is required' }).min(1, 'agent_id is required').max(100),
    name: z.string().max(120).optional(),
    environment_id: z.string().max(100).nullable().optional(),
  })
  .openapi('TeamAdd');
const RenameBody = z.object({ name: z.string().max(120).nullable() }).openapi('TeamRename');
const RotateBody = z.object({ name: z.string().max(120).optional() }).openapi('TeamRotate');
const MessageBody = z.object({ prompt: z.string({ error: 'prompt is required' }).min(1, 'prompt must not be empty').max(200_000) }).openapi('TeamMessage');
const queued = z.object({ status: z.literal('queued'), conversation_id: z.string() });

const cronField = z
  .string({ error: 'cron is required' })
  .max(200)
  .superRefine((v, ctx) => {
    const r = parseCron(v);
    if (!r.ok) ctx.addIssue({ code: 'custom', message: r.error });
  });
const ScheduleCreate = z
  .object({
    name: z.string().max(120).nullable().optional(),
    cron: cronField,
    prompt: z.string({ error: 'prompt is required' }).min(1, 'prompt must not be empty').max(20_000, 'prompt is limited to 20,000 characters'),
    one_off: z.boolean().default(false),
    enabled: z.boolean().default(true),
  })
  .openapi('ScheduleCreate');
const ScheduleUpdate = z
  .object({
    name: z.string().max(120).nullable().optional(),
    cron: cronField.optional(),
    prompt: z.string().min(1, 'prompt must not be empty').max(20_000, 'prompt is limited to 20,000 characters').optional(),
    one_off: z.boolean().optional(),
    enabled: z.boolean().optional(),
  })
  .openapi('ScheduleUpdate');

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

export function scheduleView(s: Schedule): z.infer<typeof ScheduleSchema> {
  return {
    id: s.id,
    agent_id: s.agentId,
    name: s.name,
    cron: s.cron,
    prompt: s.prompt,
    one_off: s.oneOff,
    enabled: s.enabled,
    next_run_at: iso(s.nextRunAt),
    last_run_at: iso(s.lastRunAt),
    last_conversation_id: s.lastConversationId,
    last_error: s.lastError,
    inserted_at: s.insertedAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
  };
}

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
  const ownedAgent = async (accountId: string, rawAgentId: string) => {
    const agent = isUuid(rawAgentId) ? await getAgent(db, accountId, rawAgentId) : undefined;
    if (!agent) throw ApiError.notFound('agent');
    return agent;
  };
  const ownedSchedule = async (accountId: string, rawAgentId: string, rawId: string): Promise<Schedule> => {
    const s = isUuid(rawAgentId) && isUuid(rawId) ? await getSchedule(db, accountId, rawAgentId, rawId) : undefined;
    if (!s) throw ApiError.notFound('schedule');
    return s;
  };
  const auditSchedule = (s: Schedule, action: string) =>
    audit(deps.db, { accountId: s.accountId, actor: 'api', action, subjectId: s.id, data: { agent_id: s.agentId } });

  // ------------------------------------------------------------ the stream (declared before /team/{agent_id})

  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/api/team/stream',
    summary:
      'Server-sent events of every teammate (each with conversation_id and agent_id); `event: team` and `event: schedule` {"reason":"changed"}; Last-Event-ID replays across teammates; `: heartbeat` every 15 s',
    security: bearer,
    request: { query: TeamStreamQuery },
    responses: {
      200: { description: 'text/event-stream: `: connected`, then `id`/`event: output|stage`/`data`, `event: team`, `event: schedule`', content: { 'text/event-stream': { schema: z.string() } } },
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
    let members = await teamConversationAgents(db, accountId);
    /** Conversations known not to be this account's teammates (membership only changes with a `team` event). */
    const others = new Set<string>();
    let teamSignal = false;
    let scheduleSignal = false;
    const account = deps.engine.feeds.account(accountId, streams);
    type Item = { readonly event: TeamEventRow['event']; readonly agentId: string | null };
    return sseTail<Item>(c, {
      source: {
        page: (from, limit) => pageTeamEvents(db, accountId, { after: from, limit, streams }),
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
          members = await teamConversationAgents(db, accountId);
          agentId = members.get(convId);
          if (agentId === undefined) {
            if (others.size > 10_000) others.clear();
            others.add(convId);
          }
        }
        if (!agentId || !wanted(event)) return;
        await stream.writeSSE({ id: String(event.id), event: event.kind, data: JSON.stringify({ ...eventView(event), conversation_id: convId, agent_id: agentId }) });
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

  // ------------------------------------------------------------ schedules across the team (before /team/{agent_id})

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team/schedules',
      summary: "Every schedule of the caller's agents",
      security: bearer,
      middleware: [auth] as const,
      responses: { 200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: z.array(ScheduleSchema) }) } } }, ...errorResponses(401) },
    }),
    async (c) => c.json({ data: (await listSchedules(db, c.get('principal').account.id)).map(scheduleView) }, 200),
  );

  // ------------------------------------------------------------ roster

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team',
      summary: 'The roster, most recently active first, with presence and preview',
      security: bearer,
      middleware: [auth] as const,
      responses: { 200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: z.array(TeammateSchema) }) } } }, ...errorResponses(401) },
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
        200: { description: 'already on the team', content: { 'application/json': { schema: z.object({ data: TeammateSchema }) } } },
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
      responses: { 200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: TeammateSchema }) } } }, ...errorResponses(401, 404) },
    }),
    async (c) => c.json({ data: await teammateJson(await teammate(c.get('principal').account.id, c.req.valid('param').agent_id)) }, 200),
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/team/{agent_id}',
      summary: "Rename a teammate (the conversation's title); null or blank restores the agent's name",
      security: bearer,
      middleware: [auth] as const,
      request: { params: AgentParam, body: { content: { 'application/json': { schema: RenameBody } }, required: true } },
      responses: { 200: { description: 'renamed', content: { 'application/json': { schema: z.object({ data: TeammateSchema }) } } }, ...errorResponses(401, 404, 422) },
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
      summary: "Take an agent off the team: terminates its live conversation, unbinds its team conversations, deletes its schedules",
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
      request: { params: AgentParam, body: { content: { 'application/json': { schema: MessageBody } }, required: true } },
      responses: { 202: { description: 'queued', content: { 'application/json': { schema: queued } } }, ...errorResponses(400, 401, 404, 409, 422, 503) },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const r = unwrap(await team.message(accountId, agentIdOf(c.req.valid('param').agent_id), c.req.valid('json').prompt));
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
      request: { params: AgentParam, body: { content: { 'application/json': { schema: RotateBody } }, required: false } },
      responses: {
        201: { description: 'created', content: { 'application/json': { schema: z.object({ data: ConversationSchema }) } } },
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
        200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: z.array(ConversationSchema.extend({ current: z.boolean() })) }) } } },
        ...errorResponses(401, 404),
      },
    }),
    async (c) => {
      const t = await teammate(c.get('principal').account.id, c.req.valid('param').agent_id);
      const data = await Promise.all(t.history.map(async (row) => ({ ...(await deps.engine.view(row)), current: row.conversation.id === t.conversation.id })));
      return c.json({ data }, 200);
    },
  );

  // ------------------------------------------------------------ schedules of one agent

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team/{agent_id}/schedules',
      summary: "An agent's schedules",
      security: bearer,
      middleware: [auth] as const,
      request: { params: AgentParam },
      responses: { 200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: z.array(ScheduleSchema) }) } } }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const agent = await ownedAgent(accountId, c.req.valid('param').agent_id);
      return c.json({ data: (await listSchedules(db, accountId, agent.id)).map(scheduleView) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/team/{agent_id}/schedules',
      summary: 'Create a schedule: five-field cron in UTC (or @daily-style names; @reboot is refused)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: AgentParam, body: { content: { 'application/json': { schema: ScheduleCreate } }, required: true } },
      responses: { 201: { description: 'created', content: { 'application/json': { schema: z.object({ data: ScheduleSchema }) } } }, ...errorResponses(401, 404, 422) },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const agent = await ownedAgent(accountId, c.req.valid('param').agent_id);
      const b = c.req.valid('json');
      const cron = b.cron.trim().replace(/\s+/g, ' ');
      const s = await insertSchedule(db, {
        accountId,
        agentId: agent.id,
        name: b.name ?? null,
        cron,
        prompt: b.prompt,
        oneOff: b.one_off,
        enabled: b.enabled,
        nextRunAt: b.enabled ? nextRunAt(cron, new Date()) : null,
      });
      await auditSchedule(s, 'team.schedule.created');
      scheduler.changed(s);
      return c.json({ data: scheduleView(s) }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team/{agent_id}/schedules/{id}',
      summary: 'One schedule',
      security: bearer,
      middleware: [auth] as const,
      request: { params: ScheduleParams },
      responses: { 200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: ScheduleSchema }) } } }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      const p = c.req.valid('param');
      return c.json({ data: scheduleView(await ownedSchedule(c.get('principal').account.id, p.agent_id, p.id)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/api/team/{agent_id}/schedules/{id}',
      summary: 'Change a schedule; a new cron or a re-enable recomputes next_run_at (re-enabling also clears last_error)',
      security: bearer,
      middleware: [auth] as const,
      request: { params: ScheduleParams, body: { content: { 'application/json': { schema: ScheduleUpdate } }, required: true } },
      responses: { 200: { description: 'updated', content: { 'application/json': { schema: z.object({ data: ScheduleSchema }) } } }, ...errorResponses(401, 404, 422) },
    }),
    async (c) => {
      const p = c.req.valid('param');
      const s = await ownedSchedule(c.get('principal').account.id, p.agent_id, p.id);
      const b = c.req.valid('json');
      const cron = b.cron !== undefined ? b.cron.trim().replace(/\s+/g, ' ') : s.cron;
      const enabled = b.enabled ?? s.enabled;
      const reenabled = enabled && !s.enabled;
      const patch: Parameters<typeof updateSchedule>[2] = {
        ...(b.name !== undefined ? { name: b.name } : {}),
        ...(b.prompt !== undefined ? { prompt: b.prompt } : {}),
        ...(b.one_off !== undefined ? { oneOff: b.one_off } : {}),
        cron,
        enabled,
      };
      if (!enabled) patch.nextRunAt = null;
      else if (reenabled || cron !== s.cron) patch.nextRunAt = nextRunAt(cron, new Date());
      if (reenabled) patch.lastError = null;
      const updated = await updateSchedule(db, s.id, patch);
      if (!updated) throw ApiError.notFound('schedule');
      await auditSchedule(updated, 'team.schedule.updated');
      scheduler.changed(updated);
      return c.json({ data: scheduleView(updated) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/team/{agent_id}/schedules/{id}',
      summary: 'Delete a schedule',
      security: bearer,
      middleware: [auth] as const,
      request: { params: ScheduleParams },
      responses: { 204: { description: 'deleted' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      const p = c.req.valid('param');
      const s = await ownedSchedule(c.get('principal').account.id, p.agent_id, p.id);
      if (await deleteSchedule(db, s.id)) {
        await auditSchedule(s, 'team.schedule.deleted');
        scheduler.changed(s);
      }
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/team/{agent_id}/schedules/{id}/run',
      summary: 'Run a schedule now (same errors as messages); last_run_at and last_error are stamped either way',
      security: bearer,
      middleware: [auth] as const,
      request: { params: ScheduleParams },
      responses: { 202: { description: 'queued', content: { 'application/json': { schema: queued } } }, ...errorResponses(400, 401, 404, 409, 422, 503) },
    }),
    async (c) => {
      const p = c.req.valid('param');
      const s = await ownedSchedule(c.get('principal').account.id, p.agent_id, p.id);
      const r = unwrap(await scheduler.runNow(s));
      return c.json({ status: 'queued' as const, conversation_id: r.conversationId }, 202);
    },
  );

  return app;
}
