/**
 * Agent routes and the catalog: CRUD over agents with zod schemas, provider
 * validation through the ProviderRegistry, and the runtimes/models/providers an agent may pick.
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import { createRoute, type OpenAPIHono, z } from '@hono/zod-openapi';
import { KNOWN_PROVIDERS, isKnownProvider, type KnownProvider, type ProviderRegistry } from '../../sandbox/index.ts';
import { requireKey, type AppEnv } from '../http/auth.ts';
import { MetadataSchema } from './metadata.ts';
import { RUNTIME_SPECS, modelProblem } from '../runtimes/table.ts';
import { ApiError } from '../http/errors.ts';
import { isUuid } from '../http/ids.ts';
import {
  agentWarner,
  conversationCounts,
  createAgent,
  deleteAgent,
  getAgent,
  listAgents,
  RUNTIMES,
  updateAgent,
  VERDICTS,
  type AgentEnvironmentFields,
  type AgentFields,
} from './service.ts';
import type { Agent, Runtime } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { bearer, errorResponses, IdParam, newRouter, type RouteDeps } from '../http/common.ts';
import { findRunnerByRef } from '../runners/options.ts';
import { McpServersSchema, SkillsSchema } from '../environments/schemas.ts';
import { BACKEND_LACKS_NETWORK_POLICY } from '../account/brokerage.ts';
import type { EnvironmentService } from '../environments/service.ts';
import { GatewayAgentFields } from '../gateway/schemas.ts';
import { gatewayReach, type CredentialDelivery } from '../gateway/reach.ts';
import { credentialsFor } from '../credentials/providers.ts';
import { LaunchFields, WarmPoolField } from './launch-fields.ts';
import { customRuntimeProblem, customView } from './custom-runtime.ts';
import type { CustomRuntime } from '../store/conversation-schema.ts';

export interface AgentRouteDeps extends RouteDeps {
  readonly registry: ProviderRegistry;
  /** SANDBOX_PROVIDER: what `sandbox_provider: null` means. */
  readonly defaultProvider: KnownProvider;
  /** Checks that an agent's environment_id is the account's. */
  readonly environments: EnvironmentService;
  /** BROKER_ALLOW_UNENFORCED, for the answers' warnings (the launch gate's rule). */
  readonly allowUnenforced?: boolean;
  /** PUBLIC_URL: whether a hosted provider's sandbox can reach the model gateway. */
  readonly publicUrl?: string | null;
  /** An agent was created, changed or deleted: its warm pool is refilled or drained (pool.ts). */
  readonly agentChanged?: (accountId: string, agentId: string) => void;
}

export const PermissionPolicySchema = z
  .record(z.string().min(1).max(200), z.enum(VERDICTS))
  .openapi('PermissionPolicy', {
    description:
      'The runtime\'s tool name (Claude: Bash, Edit, …), a tool title, or an ACP tool kind (read, edit, delete, move, search, execute, think, fetch, switch_mode, other), or "default", to a verdict. Looked up in that order; no match and no default is auto_allow. New agents default to {"default": "ask"}.',
    example: { Bash: 'ask', read: 'auto_allow', default: 'ask' },
  });

// A string, not an enum, so an unknown provider answers 422 sandbox_provider_disabled; the spec still lists the registry's names.
const SandboxProviderField = z
  .string()
  .max(40)
  .nullable()
  .openapi({ enum: [...KNOWN_PROVIDERS], description: 'null = the instance default (SANDBOX_PROVIDER)' });

export const AgentSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string(),
    system: z.string(),
    runtime: z.enum(RUNTIMES),
    model: z.string(),
    sandbox_provider: z.enum(KNOWN_PROVIDERS).nullable(),
    permission_policy: PermissionPolicySchema,
    metadata: z.record(z.string(), z.unknown()),
    environment_id: z.string().nullable(),
    skills: SkillsSchema,
    mcp_servers: McpServersSchema,
    allowed_environment_ids: z.array(z.string()).nullable(),
    runner_id: z.string().nullable().openapi({
      description: "The runner its new conversations go to; null = the account's most recently connected online runner",
    }),
    ...GatewayAgentFields,
    ...LaunchFields,
    warm_pool: z.number().int(),
    acp: z.boolean(),
    conversation_count: z.number().int(),
    inserted_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Agent');

export const AgentWarningSchema = z
  .object({
    code: z.enum([BACKEND_LACKS_NETWORK_POLICY]),
    message: z.string(),
  })
  .openapi('AgentWarning', {
    description:
      "What would refuse this agent's conversations at launch although the agent saved, e.g. backend_lacks_network_policy: its environment is limited but its provider or runner cannot enforce it.",
  });

/** Create and update answers: the agent saved, and its warnings (empty when none). */
const AgentSavedSchema = AgentSchema.extend({ warnings: z.array(AgentWarningSchema) }).openapi('AgentSaved');

const RunnerField = z
  .string()
  .trim()
  .min(1, 'runner_id must not be blank')
  .max(100)
  .nullable()
  .openapi({ description: "A runner id or name of the account's; stored as the id. null = not pinned (any runner)" });

const AgentCreateBody = z
  .object({
    name: z.string({ error: 'name is required' }).trim().min(1, 'name is required').max(200),
    description: z.string().max(10_000).default(''),
    system: z.string().max(200_000).default(''),
    runtime: z.enum(RUNTIMES, { error: `runtime must be one of ${RUNTIMES.join(', ')}` }),
    model: z.string({ error: 'model is required' }).max(200),
    sandbox_provider: SandboxProviderField.default(null),
    // A fresh agent asks before every tool: its runner may run as the user (issue 16 #3).
    permission_policy: PermissionPolicySchema.default({ default: 'ask' }),
    metadata: MetadataSchema.default({}),
    environment_id: z.string().max(100).nullable().default(null),
    skills: SkillsSchema.default([]),
    mcp_servers: McpServersSchema.default({}),
    allowed_environment_ids: z.array(z.string().max(100)).max(100).nullable().default(null),
    runner_id: RunnerField.default(null),
    credential_delivery: GatewayAgentFields.credential_delivery.default('gateway'),
    model_limits: GatewayAgentFields.model_limits.default({}),
    custom_runtime: LaunchFields.custom_runtime.default(null),
    session_settings: LaunchFields.session_settings.default({}),
    credential_set: LaunchFields.credential_set.default('default'),
    warm_pool: WarmPoolField.default(0),
  })
  .strict()
  .openapi('AgentCreate');

const AgentPatchBody = z
  .object({
    name: z.string().trim().min(1, 'name must not be blank').max(200),
    description: z.string().max(10_000),
    system: z.string().max(200_000),
    runtime: z.enum(RUNTIMES, { error: `runtime must be one of ${RUNTIMES.join(', ')}` }),
    model: z.string().max(200),
    sandbox_provider: SandboxProviderField,
    permission_policy: PermissionPolicySchema,
    metadata: MetadataSchema,
    environment_id: z.string().max(100).nullable(),
    skills: SkillsSchema,
    mcp_servers: McpServersSchema,
    allowed_environment_ids: z.array(z.string().max(100)).max(100).nullable(),
    runner_id: RunnerField,
    ...GatewayAgentFields,
    ...LaunchFields,
    warm_pool: WarmPoolField,
  })
  .partial()
  .strict()
  .openapi('AgentUpdate');

const AgentListQuery = z.object({
  search: z.string().max(200).optional(),
  runtime: z.string().max(200).optional().openapi({ description: 'Comma-separated runtimes' }),
  environment_id: z.string().max(2000).optional().openapi({ description: 'Comma-separated environment ids' }),
  has_skills: z.enum(['true', 'false']).optional(),
  has_mcp: z.enum(['true', 'false']).optional(),
});

const CatalogSchema = z
  .object({
    runtimes: z.array(z.enum(RUNTIMES)),
    models: z.record(z.string(), z.array(z.string())),
    model_providers: z.record(z.string(), z.array(z.string())),
    sandbox_providers: z.object({
      enabled: z.array(z.enum(KNOWN_PROVIDERS)),
      default: z.enum(KNOWN_PROVIDERS),
      known: z.array(z.enum(KNOWN_PROVIDERS)),
    }),
    package_managers: z.array(z.string()),
  })
  .openapi('Catalog');

const fieldError = (field: string, message: string, code = 'validation_failed'): ApiError =>
  new ApiError(422, code, `${field}: ${message}`, { errors: { [field]: [message] } });

export type AgentView = z.infer<typeof AgentSchema>;

export function agentView(a: Agent, conversationCount: number): AgentView {
  return {
    id: a.id,
    name: a.name,
    description: a.description,
    system: a.system,
    runtime: a.runtime,
    model: a.model,
    sandbox_provider: isKnownProvider(a.sandboxProvider) ? a.sandboxProvider : null,
    permission_policy: a.permissionPolicy,
    metadata: a.metadata,
    environment_id: a.environmentId,
    skills: a.skills,
    mcp_servers: a.mcpServers,
    allowed_environment_ids: a.allowedEnvironmentIds,
    runner_id: a.runnerId,
    credential_delivery: a.credentialDelivery,
    model_limits: a.modelLimits,
    custom_runtime: customView(a.customRuntime),
    session_settings: a.sessionSettings,
    credential_set: a.credentialSet,
    warm_pool: a.warmPool,
    acp: true,
    conversation_count: conversationCount,
    inserted_at: a.insertedAt.toISOString(),
    updated_at: a.updatedAt.toISOString(),
  };
}

/** A bad warm_pool answers its own code, so a client can tell it from the agent's other fields. */
const warmPoolCode = (e: z.ZodError): string | undefined =>
  e.issues.some((i) => i.path[0] === 'warm_pool') ? 'warm_pool_invalid' : undefined;

export function agentRoutes(deps: AgentRouteDeps): OpenAPIHono<AppEnv> {
  const app = newRouter(warmPoolCode);
  const db = deps.db as unknown as EngineDb;
  const auth = requireKey(deps.db, deps.logger, 'any');

  const checkProvider = (p: string | null): KnownProvider | null => {
    if (p === null) return null;
    if (!isKnownProvider(p) || !deps.registry.isEnabled(p)) {
      throw new ApiError(
        422,
        'sandbox_provider_disabled',
        `sandbox provider ${JSON.stringify(p)} is not configured on this instance`,
      );
    }
    return p;
  };
  const checkModel = (runtime: Runtime, model: string): void => {
    const problem = modelProblem(runtime, model);
    if (problem) throw fieldError('model', problem);
  };
  const checkEnvironment = async (accountId: string, id: string | null): Promise<string | null> => {
    if (id === null) return null;
    if (!isUuid(id) || !(await deps.environments.get(accountId, id)))
      throw new ApiError(404, 'environment_not_found', `environment ${id} not found`);
    return id;
  };
  const checkAllowed = async (accountId: string, ids: readonly string[] | null): Promise<string[] | null> => {
    if (ids === null) return null;
    for (const id of ids) await checkEnvironment(accountId, id);
    return [...new Set(ids)];
  };
  // An id or a name, so `--runner laptop` works; unknown names the value it was given.
  const checkRunner = async (accountId: string, ref: string | null): Promise<string | null> => {
    if (ref === null) return null;
    const row = await findRunnerByRef(deps.db, accountId, ref);
    if (!row) throw fieldError('runner_id', `no runner ${JSON.stringify(ref)} on this account`, 'runner_not_found');
    return row.id;
  };
  // A custom runtime needs its launch; any other must not carry one (it would be silently ignored).
  const checkCustom = (runtime: Runtime, custom: CustomRuntime | null, delivery: CredentialDelivery): void => {
    if (runtime === 'custom' && !custom)
      throw fieldError(
        'custom_runtime',
        'is required for runtime custom: give at least its command',
        'custom_runtime_required',
      );
    if (runtime !== 'custom' && custom)
      throw fieldError(
        'custom_runtime',
        `must be null for runtime ${runtime} (only runtime custom is launched by its own command)`,
      );
    const problem = custom ? customRuntimeProblem(custom, delivery) : null;
    if (problem) throw fieldError('custom_runtime', problem);
  };
  // Refused before saving: an agent whose sandboxes could not reach the gateway would fail every launch.
  const checkDelivery = (
    delivery: CredentialDelivery,
    provider: string | null,
    runtime: Runtime,
    model: string,
    custom: CustomRuntime | null,
  ) => {
    if (delivery !== 'gateway' || credentialsFor(runtime, model, custom).length === 0) return;
    const reach = gatewayReach(provider ?? deps.defaultProvider, deps.publicUrl ?? null, 'listen address');
    if (!reach.ok) throw fieldError('credential_delivery', reach.message, 'gateway_unreachable');
  };
  const load = async (accountId: string, id: string): Promise<Agent> => {
    const a = isUuid(id) ? await getAgent(db, accountId, id) : undefined;
    if (!a) throw ApiError.notFound('agent');
    return a;
  };
  const countOf = async (a: Agent) => (await conversationCounts(db, [a.id])).get(a.id) ?? 0;
  const one = async (a: Agent) => agentView(a, await countOf(a));
  const ok = { 'application/json': { schema: z.object({ data: AgentSchema }) } };
  const saved = { 'application/json': { schema: z.object({ data: AgentSavedSchema }) } };
  const warningsOf = agentWarner({
    db,
    registry: deps.registry,
    defaultProvider: deps.defaultProvider,
    allowUnenforced: deps.allowUnenforced ?? false,
    environments: deps.environments,
  });
  const warned = async (accountId: string, a: Agent, count: number) => ({
    ...agentView(a, count),
    warnings: await warningsOf(accountId, a),
  });

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/agents',
      summary: 'List agents (filters: search, runtime)',
      security: bearer,
      middleware: [auth] as const,
      request: { query: AgentListQuery },
      responses: {
        200: {
          description: 'ok',
          content: { 'application/json': { schema: z.object({ data: z.array(AgentSchema) }) } },
        },
        ...errorResponses(401, 422),
      },
    }),
    async (c) => {
      const q = c.req.valid('query');
      const accountId = c.get('principal').account.id;
      const list = (v: string | undefined) =>
        v
          ?.split(',')
          .map((s) => s.trim())
          .filter(Boolean);
      const flag = (v: 'true' | 'false' | undefined) => (v === undefined ? undefined : v === 'true');
      const rows = await listAgents(db, accountId, {
        search: q.search,
        runtimes: list(q.runtime),
        environmentIds: list(q.environment_id),
        hasSkills: flag(q.has_skills),
        hasMcp: flag(q.has_mcp),
      });
      const counts = await conversationCounts(
        db,
        rows.map((r) => r.id),
      );
      return c.json({ data: rows.map((r) => agentView(r, counts.get(r.id) ?? 0)) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/agents',
      summary: 'Create an agent',
      security: bearer,
      middleware: [auth] as const,
      request: { body: { content: { 'application/json': { schema: AgentCreateBody } }, required: true } },
      responses: {
        201: {
          description: 'created (the warnings say what would refuse its conversations at launch)',
          content: saved,
        },
        ...errorResponses(401, 422),
      },
    }),
    async (c) => {
      const b = c.req.valid('json');
      const accountId = c.get('principal').account.id;
      checkModel(b.runtime, b.model);
      const fields: AgentFields & AgentEnvironmentFields = {
        name: b.name,
        description: b.description,
        system: b.system,
        runtime: b.runtime,
        model: b.model,
        sandboxProvider: checkProvider(b.sandbox_provider),
        permissionPolicy: b.permission_policy,
        metadata: b.metadata,
        environmentId: await checkEnvironment(accountId, b.environment_id),
        skills: b.skills,
        mcpServers: b.mcp_servers,
        allowedEnvironmentIds: await checkAllowed(accountId, b.allowed_environment_ids),
        runnerId: await checkRunner(accountId, b.runner_id),
        credentialDelivery: b.credential_delivery,
        modelLimits: b.model_limits,
        customRuntime: b.custom_runtime,
        sessionSettings: b.session_settings,
        credentialSet: b.credential_set,
        warmPool: b.warm_pool,
      };
      checkCustom(b.runtime, b.custom_runtime, b.credential_delivery);
      checkDelivery(b.credential_delivery, fields.sandboxProvider, b.runtime, b.model, b.custom_runtime);
      const r = await createAgent(db, accountId, fields);
      if (!r.ok) throw fieldError('name', 'has already been taken');
      deps.agentChanged?.(accountId, r.agent.id);
      return c.json({ data: await warned(accountId, r.agent, 0) }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/agents/{id}',
      summary: 'One agent',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 200: { description: 'ok', content: ok }, ...errorResponses(401, 404) },
    }),
    async (c) => c.json({ data: await one(await load(c.get('principal').account.id, c.req.valid('param').id)) }, 200),
  );

  const patch = (method: 'patch' | 'put') =>
    app.openapi(
      createRoute({
        method,
        path: '/api/agents/{id}',
        summary: 'Update an agent (fields given are changed; sandbox_provider is validated only when it changes)',
        security: bearer,
        middleware: [auth] as const,
        request: {
          params: IdParam,
          body: { content: { 'application/json': { schema: AgentPatchBody } }, required: true },
        },
        responses: {
          200: { description: 'ok (the warnings say what would refuse its conversations at launch)', content: saved },
          ...errorResponses(401, 404, 422),
        },
      }),
      async (c) => {
        const accountId = c.get('principal').account.id;
        const current = await load(accountId, c.req.valid('param').id);
        const b = c.req.valid('json');
        const runtime = b.runtime ?? current.runtime;
        if (b.runtime !== undefined || b.model !== undefined) checkModel(runtime, b.model ?? current.model);
        const p: Partial<AgentFields & AgentEnvironmentFields> = {};
        if (b.name !== undefined) p.name = b.name;
        if (b.description !== undefined) p.description = b.description;
        if (b.system !== undefined) p.system = b.system;
        if (b.runtime !== undefined) p.runtime = b.runtime;
        if (b.model !== undefined) p.model = b.model;
        if (b.permission_policy !== undefined) p.permissionPolicy = b.permission_policy;
        if (b.metadata !== undefined) p.metadata = b.metadata;
        if (b.environment_id !== undefined) p.environmentId = await checkEnvironment(accountId, b.environment_id);
        if (b.skills !== undefined) p.skills = b.skills;
        if (b.mcp_servers !== undefined) p.mcpServers = b.mcp_servers;
        if (b.allowed_environment_ids !== undefined)
          p.allowedEnvironmentIds = await checkAllowed(accountId, b.allowed_environment_ids);
        if (b.runner_id !== undefined) p.runnerId = await checkRunner(accountId, b.runner_id);
        if (b.sandbox_provider !== undefined && b.sandbox_provider !== current.sandboxProvider)
          p.sandboxProvider = checkProvider(b.sandbox_provider);
        if (b.credential_delivery !== undefined) p.credentialDelivery = b.credential_delivery;
        if (b.model_limits !== undefined) p.modelLimits = b.model_limits;
        if (b.custom_runtime !== undefined) p.customRuntime = b.custom_runtime;
        if (b.session_settings !== undefined) p.sessionSettings = b.session_settings;
        if (b.credential_set !== undefined) p.credentialSet = b.credential_set;
        if (b.warm_pool !== undefined) p.warmPool = b.warm_pool;
        // Leaving runtime custom drops its launch unless another is given.
        const custom =
          b.custom_runtime !== undefined ? b.custom_runtime : runtime === 'custom' ? current.customRuntime : null;
        if (b.custom_runtime === undefined && runtime !== 'custom' && current.customRuntime) p.customRuntime = null;
        const delivery = p.credentialDelivery ?? current.credentialDelivery;
        checkCustom(runtime, custom, delivery);
        checkDelivery(
          delivery,
          p.sandboxProvider !== undefined ? p.sandboxProvider : current.sandboxProvider,
          runtime,
          b.model ?? current.model,
          custom,
        );
        const r = await updateAgent(db, accountId, current.id, p);
        if (!r.ok) throw fieldError('name', 'has already been taken');
        if (!r.agent) throw ApiError.notFound('agent');
        deps.agentChanged?.(accountId, r.agent.id);
        return c.json({ data: await warned(accountId, r.agent, await countOf(r.agent)) }, 200);
      },
    );
  patch('patch');
  patch('put');

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/agents/{id}',
      summary: 'Delete an agent; its conversations stay and refuse prompts with 422 no_agent',
      security: bearer,
      middleware: [auth] as const,
      request: { params: IdParam },
      responses: { 204: { description: 'deleted' }, ...errorResponses(401, 404) },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const accountId = c.get('principal').account.id;
      if (!isUuid(id) || !(await deleteAgent(db, accountId, id))) throw ApiError.notFound('agent');
      deps.agentChanged?.(accountId, id);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/catalog',
      summary: 'Runtimes, their models, and the sandbox providers this instance enables',
      security: bearer,
      middleware: [auth] as const,
      responses: {
        200: { description: 'ok', content: { 'application/json': { schema: z.object({ data: CatalogSchema }) } } },
        ...errorResponses(401),
      },
    }),
    async (c) =>
      c.json(
        {
          data: {
            runtimes: [...RUNTIMES],
            models: Object.fromEntries(RUNTIMES.map((r) => [r, [...RUNTIME_SPECS[r].models]])),
            model_providers: Object.fromEntries(RUNTIMES.map((r) => [r, [...RUNTIME_SPECS[r].modelProviders]])),
            sandbox_providers: {
              enabled: deps.registry.enabled(),
              default: deps.defaultProvider,
              known: [...KNOWN_PROVIDERS],
            },
            package_managers: ['apt', 'npm'],
          },
        },
        200,
      ),
  );

  return app;
}
