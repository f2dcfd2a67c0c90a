/**
 * The Drizzle tables of the conversation engine: agents, sandboxes, conversations, turns and events.
 * Mirrored by migrations/0010_conversations.sql, which also holds the foreign keys to accounts.
 */
import { sql } from 'drizzle-orm';
import {
  bigserial,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import type { McpServer, Skill } from './environment-schema.ts';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

export const RUNTIMES = ['claude', 'codex', 'gemini', 'opencode', 'demo', 'custom'] as const;
export type Runtime = (typeof RUNTIMES)[number];

export const VERDICTS = ['auto_allow', 'ask', 'auto_deny'] as const;
export type Verdict = (typeof VERDICTS)[number];
/** Key → verdict; keys are tool titles, ACP tool kinds, or `default`. */
export type PermissionPolicy = Record<string, Verdict>;

/** What the model gateway holds an agent or an account to; an absent field is no limit. */
export interface ModelLimits {
  readonly tokens_per_conversation?: number;
  readonly tokens_per_day?: number;
  readonly tokens_per_month?: number;
  /** Currency budgets in US dollars, costed with the gateway's price table. */
  readonly usd_per_conversation?: number;
  readonly usd_per_day?: number;
  readonly usd_per_month?: number;
  readonly requests_per_minute?: number;
  /** Agents only: the models it may call (`provider/model` or the bare id); absent: any. */
  readonly models?: string[];
}

/** A `custom` runtime's launch (migration 0085): any agent speaking ACP on stdio. */
export interface CustomRuntime {
  /** The argv, run in the sandbox with HOME as its directory. */
  readonly command: string[];
  /** What is installed before the first launch: an npm package `name@version` or an apt package; null: nothing. */
  readonly install: { readonly npm: string } | { readonly apt: string } | null;
  /** Process env beyond the sandbox's (never a credential: those are named in `credentials`). */
  readonly env: Record<string, string>;
  /** The account's inference credentials it gets, each as the env variable named (and its base URL as another). */
  readonly credentials: Array<{ readonly provider: string; readonly env: string; readonly base_url_env?: string }>;
}

/** One image of a turn's prompt: its blob digest, type and size in bytes. */
export interface TurnImage {
  readonly digest: string;
  readonly media_type: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
  readonly size: number;
}

/** ACP session settings (migration 0085): config option values by option id, and a session mode. */
export interface SessionSettings {
  readonly options?: Record<string, string>;
  readonly mode?: string;
}

/** What a runtime listed at its last session/new or session/load. */
export interface SessionOffered {
  readonly options: Array<{
    readonly id: string;
    readonly name: string;
    readonly type: string;
    readonly values: string[];
    readonly current: string | boolean | null;
  }>;
  readonly modes: Array<{ readonly id: string; readonly name: string }>;
  readonly currentMode: string | null;
}

export const agents = pgTable(
  'agents',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    accountId: uuid('account_id').notNull(),
    name: text('name').notNull(),
    description: text('description').notNull().default(''),
    system: text('system').notNull().default(''),
    runtime: text('runtime', { enum: RUNTIMES }).notNull(),
    model: text('model').notNull(),
    /** Null: the instance default (SANDBOX_PROVIDER). */
    sandboxProvider: text('sandbox_provider'),
    permissionPolicy: jsonb('permission_policy').$type<PermissionPolicy>().notNull().default(sql`'{}'::jsonb`),
    metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default(sql`'{}'::jsonb`),
    /** The environment its sandboxes are provisioned with (migration 0065); null: none. */
    environmentId: uuid('environment_id'),
    skills: jsonb('skills').$type<Skill[]>().notNull().default(sql`'[]'::jsonb`),
    mcpServers: jsonb('mcp_servers').$type<Record<string, McpServer>>().notNull().default(sql`'{}'::jsonb`),
    /** Environments a conversation may pick instead: null any of the account's, [] none. */
    allowedEnvironmentIds: jsonb('allowed_environment_ids').$type<string[] | null>(),
    /** The runner its new sandboxes go to (migration 0066); null: the most recently connected online runner. */
    runnerId: uuid('runner_id'),
    /** How its runtime gets the model credential (migration 0080): through the model gateway, or in its env. */
    credentialDelivery: text('credential_delivery', { enum: ['gateway', 'direct'] })
      .notNull()
      .default('gateway'),
    /** Token budgets, requests per minute and the model allow-list the gateway holds it to. */
    modelLimits: jsonb('model_limits').$type<ModelLimits>().notNull().default(sql`'{}'::jsonb`),
    /** The `custom` runtime's launch; null for the built-in runtimes. */
    customRuntime: jsonb('custom_runtime').$type<CustomRuntime | null>(),
    /** Session settings its conversations start with. */
    sessionSettings: jsonb('session_settings').$type<SessionSettings>().notNull().default(sql`'{}'::jsonb`),
    /** The name of the account's credential set it uses (migration 0085); `default` is the one set before sets existed. */
    credentialSet: text('credential_set').notNull().default('default'),
    /** Sandboxes kept provisioned for its next conversations (migration 0090); 0: none. */
    warmPool: integer('warm_pool').notNull().default(0),
    insertedAt: ts('inserted_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('agents_account_name_idx').on(t.accountId, t.name)],
);

export const SANDBOX_STATUSES = ['pending', 'starting', 'ready', 'suspended', 'terminated', 'failed'] as const;
export type SandboxStatus = (typeof SANDBOX_STATUSES)[number];

export const sandboxes = pgTable(
  'sandboxes',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    accountId: uuid('account_id').notNull(),
    provider: text('provider').notNull(),
    /** The minted sandbox name (the contract's handle name). */
    name: text('name').notNull(),
    status: text('status', { enum: SANDBOX_STATUSES }).notNull().default('pending'),
    /** The runner-side session id of the running agent process (for re-attach after a restart). */
    agentSessionId: text('agent_session_id'),
    /** What each provisioning step last ran with (step -> hash), so a wake redoes only what changed. */
    provisioned: jsonb('provisioned').$type<Record<string, string>>().notNull().default(sql`'{}'::jsonb`),
    lastResumedAt: ts('last_resumed_at'),
    terminatedAt: ts('terminated_at'),
    insertedAt: ts('inserted_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('sandboxes_provider_name_idx').on(t.provider, t.name)],
);

export const CONVERSATION_STATUSES = ['pending', 'running', 'idle', 'failed', 'terminated'] as const;
export type ConversationStatus = (typeof CONVERSATION_STATUSES)[number];

/** A branch of one of the environment's repositories, picked when the conversation was created. */
export interface RepositoryBranch {
  readonly url: string;
  readonly branch: string;
}

export const conversations = pgTable(
  'conversations',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    accountId: uuid('account_id').notNull(),
    /** Null once the agent was deleted (prompts then answer 422 no_agent). */
    agentId: uuid('agent_id'),
    sandboxId: uuid('sandbox_id'),
    title: text('title'),
    /** The title came from the agent's `session_info_update` (migration 0070); a user's title is never replaced. */
    titleFromAgent: boolean('title_from_agent').notNull().default(false),
    firstPrompt: text('first_prompt'),
    status: text('status', { enum: CONVERSATION_STATUSES }).notNull().default('pending'),
    runtime: text('runtime', { enum: RUNTIMES }).notNull(),
    permissionPolicy: jsonb('permission_policy').$type<PermissionPolicy>().notNull().default(sql`'{}'::jsonb`),
    /** The ACP sessionId from session/new, for session/load after a wake. */
    runtimeSessionId: text('runtime_session_id'),
    source: text('source', { enum: ['ui', 'api', 'agent'] })
      .notNull()
      .default('api'),
    /** A client's channel; `fountain:team` binds the conversation to its agent's teammate (migration 0040). */
    channelId: text('channel_id'),
    /** The environment this conversation overrides its agent's with; null: the agent's (migration 0065). */
    environmentId: uuid('environment_id'),
    /** Secrets attached at launch, sealed as one JSON object; they win over the environment's on collision. */
    launchSecrets: text('launch_secrets'),
    /** The branch of an environment repository picked at creation (migration 0086); null: the environment's ref. */
    repositoryBranch: jsonb('repository_branch').$type<RepositoryBranch | null>(),
    /** The model picked at creation (migration 0092), `provider/id`; null: the agent's, as it is at each launch. */
    model: text('model'),
    failureReason: text('failure_reason'),
    /** The conversation whose sandbox token created this one (migration 0060); null for a user's. */
    parentConversationId: uuid('parent_conversation_id'),
    /** The server node that created the conversation: while it is `pending`, the node provisioning it (migration 0050). */
    nodeId: text('node_id'),
    turnCount: integer('turn_count').notNull().default(0),
    /** The next JSON-RPC id the current agent process expects (ids are consecutive per process). */
    acpNextId: integer('acp_next_id'),
    /** Sums of its turns' usage (migration 0070). */
    /** Session settings over its agent's (migration 0085). */
    sessionSettings: jsonb('session_settings').$type<SessionSettings>().notNull().default(sql`'{}'::jsonb`),
    /** The options and modes its runtime listed at its last session start; null before the first. */
    sessionOffered: jsonb('session_offered').$type<SessionOffered | null>(),
    usageTotal: jsonb('usage_total').$type<UsageTotal>().notNull().default(sql`'{"input": 0, "output": 0}'::jsonb`),
    lastActiveAt: ts('last_active_at').notNull().defaultNow(),
    lastReadAt: ts('last_read_at'),
    /** Labels, key → value ('' for a bare key); at most 32 (migration 0082). */
    labels: jsonb('labels').$type<Record<string, string>>().notNull().default(sql`'{}'::jsonb`),
    /** Set while the row is a warm-pool member of this agent (migration 0090): hidden from listings. */
    poolAgentId: uuid('pool_agent_id'),
    /** The agent's launch configuration the pool member was made with; another one is stale. */
    poolKey: text('pool_key'),
    /** Whether its agent advertised image prompts at its last initialize (migration 0087); null: not yet known. */
    acceptsImages: boolean('accepts_images'),
    insertedAt: ts('inserted_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [index('conversations_account_idx').on(t.accountId, t.insertedAt)],
);

/** `queued`: waiting in the account's capacity queue (migration 0085); `pending` holds its capacity, not yet running. */
export const TURN_STATUSES = ['queued', 'pending', 'running', 'completed', 'failed', 'interrupted'] as const;
export type TurnStatus = (typeof TURN_STATUSES)[number];

/** A permission request held for the user; `asked_at` fixes its deadline across restarts. */
export interface PendingPermission {
  request_id: string;
  /** The agent's JSON-RPC id of the session/request_permission. */
  acp_id: string | number | null;
  tool: string;
  kind: string | null;
  options: Array<{ option_id: string; name: string; kind: string }>;
  asked_at: string;
}

/** Money as the agent reports it (ACP `usage_update.cost`). */
export interface UsageCost {
  amount: number;
  currency: string;
}

/**
 * A turn's usage as its agent reported it: tokens from the prompt reply (0 when the agent reported only
 * its context window), the context window from the last `usage_update`, and the cost it reported.
 */
export interface TurnUsage {
  input: number;
  output: number;
  cache_read?: number;
  cache_write?: number;
  /** The context window after the turn: tokens used of its size. */
  context?: { used: number; size: number };
  /** The cost the agent reported in this turn's last `usage_update` (ACP defines it as the session's cost so far). */
  cost?: UsageCost;
}

/** A conversation's running total: token sums over its turns, and the last cost reported. */
export interface UsageTotal {
  input: number;
  output: number;
  cache_read?: number;
  cache_write?: number;
  cost?: UsageCost;
}

export const turns = pgTable(
  'turns',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    conversationId: uuid('conversation_id').notNull(),
    turnNumber: integer('turn_number').notNull(),
    prompt: text('prompt').notNull(),
    status: text('status', { enum: TURN_STATUSES }).notNull().default('pending'),
    stopReason: text('stop_reason'),
    reason: text('reason'),
    exitCode: integer('exit_code'),
    /** The JSON-RPC id of this turn's session/prompt: the journal boundary for re-attach. */
    acpPromptId: integer('acp_prompt_id'),
    pendingPermission: jsonb('pending_permission').$type<PendingPermission>(),
    /** The server node driving the turn while it is open; another node adopts it only once this one's heartbeat expired. */
    nodeId: text('node_id'),
    usage: jsonb('usage').$type<TurnUsage>(),
    /** The images sent with the prompt, in order (migration 0087); the bytes are blobs under their digests. */
    images: jsonb('images').$type<TurnImage[]>().notNull().default(sql`'[]'::jsonb`),
    /** The model the agent process was told to use for this turn (`provider/model`). */
    model: text('model'),
    startedAt: ts('started_at'),
    endedAt: ts('ended_at'),
    insertedAt: ts('inserted_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('turns_conversation_number_idx').on(t.conversationId, t.turnNumber)],
);

export const EVENT_KINDS = ['output', 'stage'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];
export const EVENT_STREAMS = ['stdout', 'stderr', 'acp', ''] as const;
export type EventStream = (typeof EVENT_STREAMS)[number];
export const STAGE_STATES = ['started', 'done', 'failed', 'interrupted'] as const;
export type StageState = (typeof STAGE_STATES)[number];

export const events = pgTable(
  'events',
  {
    /** Monotonic: the paging cursor and the SSE id. */
    id: bigserial('id', { mode: 'number' }).primaryKey(),
    conversationId: uuid('conversation_id').notNull(),
    turnId: uuid('turn_id'),
    kind: text('kind', { enum: EVENT_KINDS }).notNull(),
    stream: text('stream', { enum: EVENT_STREAMS }).notNull().default(''),
    /** Output bytes as text, or the JSON-encoded metadata of a stage event. */
    data: text('data').notNull().default(''),
    stage: text('stage'),
    state: text('state', { enum: STAGE_STATES }),
    durationMs: integer('duration_ms'),
    /** Output only: the line (acp, stdout) or chunk (stderr) ordinal in the agent process's output; reattach skips up to it. */
    seq: integer('seq'),
    ts: ts('ts').notNull().defaultNow(),
  },
  (t) => [index('events_conversation_idx').on(t.conversationId, t.id)],
);

/** One row per live server node; a row whose heartbeat is older than the expiry (or no row) is a lost node. */
export const serverNodes = pgTable('server_nodes', {
  nodeId: text('node_id').primaryKey(),
  startedAt: ts('started_at').notNull().defaultNow(),
  heartbeatAt: ts('heartbeat_at').notNull().defaultNow(),
});

export const conversationSchema = { agents, sandboxes, conversations, turns, events, serverNodes };

export type Agent = typeof agents.$inferSelect;
export type SandboxRow = typeof sandboxes.$inferSelect;
export type Conversation = typeof conversations.$inferSelect;
export type Turn = typeof turns.$inferSelect;
export type EventRow = typeof events.$inferSelect;
export type NewEvent = typeof events.$inferInsert;

/** An account's own capacity limits (migration 0085); null is the server's default. Its row is admission's lock. */
export const accountLimits = pgTable('account_limits', {
  accountId: uuid('account_id').primaryKey(),
  maxRunningTurns: integer('max_running_turns'),
  maxSandboxes: integer('max_sandboxes'),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

export const QUEUE_KINDS = ['prompt', 'conversation'] as const;
export type QueueKind = (typeof QUEUE_KINDS)[number];

/** What waits for capacity, FIFO per account: a prompt (its turn `queued`) or a new conversation (its sandbox not created). */
export const capacityQueue = pgTable(
  'capacity_queue',
  {
    id: uuid('id').primaryKey().defaultRandom(),
    accountId: uuid('account_id').notNull(),
    conversationId: uuid('conversation_id').notNull(),
    turnId: uuid('turn_id'),
    kind: text('kind', { enum: QUEUE_KINDS }).notNull(),
    enqueuedAt: ts('enqueued_at').notNull().default(sql`clock_timestamp()`),
    expiresAt: ts('expires_at').notNull(),
  },
  (t) => [
    index('capacity_queue_account_idx').on(t.accountId, t.enqueuedAt, t.id),
    uniqueIndex('capacity_queue_conversation_idx').on(t.conversationId),
  ],
);
export type QueueEntry = typeof capacityQueue.$inferSelect;
