/**
 * Schedule routes: every schedule of the team, and one agent's schedules —
 * list, create, read, change, delete, run now. Mounted before the team routes (`/api/team/schedules`
 * must win over `/api/team/{agent_id}`).
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { parseCron } from './cron.ts';
import { nextRunAt, type Scheduler } from './scheduler.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import { getAgent } from '../agents/service.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { createSchedule, deleteSchedule, getSchedule, listSchedules, updateSchedule } from './schedules.ts';
import type { Schedule } from '../store/team-schema.ts';
import { audit } from '../account/audit.ts';
import { bearer, errorResponses, newRouter, type RouteDeps } from '../http/common.ts';
import { AgentParam, queued, unwrap } from './routes.ts';

export interface ScheduleRouteDeps extends RouteDeps {
  readonly scheduler: Scheduler;
}

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

const ScheduleParams = AgentParam.extend({ id: z.string().openapi({ param: { name: 'id', in: 'path' } }) });

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
    prompt: z
      .string({ error: 'prompt is required' })
      .min(1, 'prompt must not be empty')
      .max(20_000, 'prompt is limited to 20,000 characters'),
    one_off: z.boolean().default(false),
    enabled: z.boolean().default(true),
  })
  .openapi('ScheduleCreate');
const ScheduleUpdate = z
  .object({
    name: z.string().max(120).nullable().optional(),
    cron: cronField.optional(),
    prompt: z
      .string()
      .min(1, 'prompt must not be empty')
      .max(20_000, 'prompt is limited to 20,000 characters')
      .optional(),
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

export function scheduleRoutes(deps: ScheduleRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter();
  const db = deps.db as unknown as EngineDb;
  const { scheduler } = deps;
  const auth = requireKey(deps.db, deps.logger, 'any');
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

  // ------------------------------------------------------------ schedules across the team (before /team/{agent_id})

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/team/schedules',
      summary: "Every schedule of the caller's agents",
      security: bearer,
      middleware: [auth] as const,
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(ScheduleSchema) }) } },
        },
        ...errorResponses(401),
      },
    }),
    async (c) => c.json({ data: (await listSchedules(db, c.get('principal').account.id)).map(scheduleView) }, 200),
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
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(ScheduleSchema) }) } },
        },
        ...errorResponses(401, 404),
      },
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
      request: {
        params: AgentParam,
        body: { content: { 'application/json': { schema: ScheduleCreate } }, required: true },
      },
      responses: {
        201: {
          description: 'created',
          content: { 'application/json': { schema: z.object({ data: ScheduleSchema }) } },
        },
        ...errorResponses(401, 404, 422),
      },
    }),
    async (c) => {
      const accountId = c.get('principal').account.id;
      const agent = await ownedAgent(accountId, c.req.valid('param').agent_id);
      const b = c.req.valid('json');
      const cron = b.cron.trim().replace(/\s+/g, ' ');
      const s = await createSchedule(db, {
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
      responses: {
        200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: ScheduleSchema }) } } },
        ...errorResponses(401, 404),
      },
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
      summary:
        'Change a schedule; a new cron or a re-enable recomputes next_run_at (re-enabling also clears last_error)',
      security: bearer,
      middleware: [auth] as const,
      request: {
        params: ScheduleParams,
        body: { content: { 'application/json': { schema: ScheduleUpdate } }, required: true },
      },
      responses: {
        200: {
          description: 'updated',
          content: { 'application/json': { schema: z.object({ data: ScheduleSchema }) } },
        },
        ...errorResponses(401, 404, 422),
      },
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
      responses: {
        202: { description: 'queued', content: { 'application/json': { schema: queued } } },
        ...errorResponses(400, 401, 404, 409, 422, 503),
      },
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
