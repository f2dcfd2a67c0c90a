/**
 * The public JSON shapes of conversations, turns and events: the API schemas, the
 * view types inferred from them, and the views built from rows plus what only the live registry knows.
 */
import { TurnImageViewSchema, turnImagesView } from './prompt-images.ts';
import { join } from 'node:path';
import { z } from '@hono/zod-openapi';
import type { Block } from './blocks.ts';
import { labelList } from './labels.ts';
import {
  CONVERSATION_STATUSES,
  type Conversation,
  type EventRow,
  type SandboxRow,
  type SessionOffered,
  type Turn,
} from '../store/conversation-schema.ts';
import type { RunnerSummary } from '../core/placement.ts';

export const RunnerRefSchema = z.object({
  id: z.string(),
  name: z.string(),
  hostname: z.string().nullable(),
  online: z.boolean(),
  path: z.string().nullable(),
});

export const SandboxSchema = z
  .object({
    id: z.string(),
    provider: z.string(),
    name: z.string(),
    // Upstream clients read the sandbox's name under this key; `name` is the neutral one.
    sprite_name: z.string().openapi({ deprecated: true, description: 'The same as `name`, for upstream clients.' }),
    status: z.string(),
    url: z.string().nullable(),
    runner: RunnerRefSchema.nullable(),
  })
  .openapi('Sandbox');

export const CostSchema = z.object({ amount: z.number(), currency: z.string() });

/** A turn's usage as its agent reported it (tokens from the prompt reply, context window and cost from `usage_update`). */
export const TurnUsageSchema = z
  .object({
    input: z.number(),
    output: z.number(),
    cache_read: z.number().optional(),
    cache_write: z.number().optional(),
    context: z.object({ used: z.number(), size: z.number() }).optional(),
    cost: CostSchema.optional().openapi({
      description: "As the agent reported it in the turn's last usage_update (ACP: the session's cost so far)",
    }),
  })
  .openapi('TurnUsage');

export const UsageTotalSchema = z
  .object({
    input: z.number(),
    output: z.number(),
    cache_read: z.number().optional(),
    cache_write: z.number().optional(),
    cost: CostSchema.optional().openapi({ description: 'The last cost the agent reported' }),
  })
  .openapi('UsageTotal');

export const SessionOfferedSchema = z
  .object({
    options: z.array(
      z.object({
        id: z.string(),
        name: z.string(),
        type: z.string(),
        values: z.array(z.string()),
        current: z.union([z.string(), z.boolean()]).nullable(),
      }),
    ),
    modes: z.array(z.object({ id: z.string(), name: z.string() })),
    current_mode: z.string().nullable(),
  })
  .openapi('SessionOffered');

export type SessionOfferedView = z.infer<typeof SessionOfferedSchema>;

export const offeredView = (o: SessionOffered | null): SessionOfferedView | null =>
  o
    ? {
        options: o.options.map((x) => ({ ...x, values: [...x.values] })),
        modes: o.modes.map((m) => ({ ...m })),
        current_mode: o.currentMode,
      }
    : null;
export const QueuePlaceSchema = z
  .object({
    position: z.number().int().openapi({ description: '1 = next in line (FIFO per account)' }),
    expires_at: z.string().openapi({ description: 'When it fails unless it started by then' }),
    turn_id: z
      .string()
      .nullable()
      .openapi({ description: 'The waiting turn; null for a conversation created without a prompt' }),
    kind: z.enum(['prompt', 'conversation']).openapi({
      description:
        'prompt: a turn waits for a running-turn slot; conversation: a new conversation waits for its sandbox',
    }),
  })
  .openapi('QueuePlace');

/** A waiting conversation's place in line, as the store reports it. */
export interface QueuePlace {
  readonly position: number;
  readonly expiresAt: Date;
  readonly turnId: string | null;
  readonly kind: 'prompt' | 'conversation';
}

export function queuePlaceView(q: QueuePlace | undefined): z.infer<typeof QueuePlaceSchema> | null {
  return q ? { position: q.position, expires_at: q.expiresAt.toISOString(), turn_id: q.turnId, kind: q.kind } : null;
}

export const ConversationSchema = z
  .object({
    id: z.string(),
    title: z.string().nullable(),
    title_source: z
      .enum(['user', 'agent'])
      .nullable()
      .openapi({ description: "user: given at creation; agent: the agent's session_info_update (it may retitle)" }),
    first_prompt: z.string().nullable(),
    sandbox_id: z.string().nullable(),
    sandbox: SandboxSchema.nullable(),
    agent_id: z.string().nullable(),
    environment_id: z
      .string()
      .nullable()
      .openapi({ description: "The environment this conversation overrides its agent's with; null: the agent's" }),
    repository_branch: z
      .object({ url: z.string(), branch: z.string() })
      .nullable()
      .openapi({ description: "The environment repository's branch picked at creation; null: the environment's ref" }),
    model: z.string().nullable().openapi({
      description:
        "The model its launches use (`provider/id`): the one picked at creation, else its agent's; null when the agent was deleted",
      example: 'anthropic/claude-sonnet-4-5',
    }),
    permission_policy: z.record(z.string(), z.string()),
    runtime: z.string(),
    acp: z.boolean(),
    status: z.enum(CONVERSATION_STATUSES),
    failure_reason: z.string().nullable(),
    runtime_session_id: z.string().nullable(),
    source: z.string(),
    parent_conversation_id: z.null(),
    channel_id: z.string().nullable(),
    turn_count: z.number().int(),
    last_active_at: z.string(),
    last_read_at: z.string().nullable(),
    unread: z.boolean(),
    usage_total: UsageTotalSchema,
    session_settings: z
      .object({ options: z.record(z.string(), z.string()).optional(), mode: z.string().optional() })
      .openapi({ description: "Its own session settings, over its agent's (PATCH /api/conversations/{id}/settings)" }),
    session_offered: SessionOfferedSchema.nullable().openapi({
      description: 'The session options and modes its runtime listed when its session last started; null before',
    }),
    labels: z.array(z.string()).openapi({
      description: 'Labels, `key` or `key=value`, sorted by key (at most 32)',
      example: ['bug', 'team=infra'],
    }),
    queue: QueuePlaceSchema.nullable().openapi({
      description:
        "Set while a prompt of this conversation (or the conversation itself) waits for the account's capacity; null otherwise",
    }),
    inserted_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('Conversation');

export const PendingPermissionSchema = z.object({
  request_id: z.string(),
  acp_id: z.union([z.string(), z.number(), z.null()]),
  tool: z.string(),
  kind: z.string().nullable(),
  options: z.array(z.object({ option_id: z.string(), name: z.string(), kind: z.string() })),
  asked_at: z.string(),
});

export const TurnSchema = z
  .object({
    id: z.string(),
    turn_number: z.number().int(),
    prompt: z.string(),
    status: z.string().openapi({
      description: 'queued (waiting for capacity), pending, running, completed, failed, interrupted',
    }),
    queue_position: z.number().int().nullable().openapi({ description: 'While queued: 1 = next in line' }),
    queue_expires_at: z.string().nullable().openapi({ description: 'While queued: when it fails unless started' }),
    stop_reason: z.string().nullable(),
    reason: z.string().nullable(),
    exit_code: z.number().int().nullable(),
    pending_permission: PendingPermissionSchema.nullable(),
    started_at: z.string().nullable(),
    ended_at: z.string().nullable(),
    inserted_at: z.string(),
    image_count: z.number().int(),
    images: z.array(TurnImageViewSchema).openapi({ description: 'The images sent with the prompt, in order' }),
    usage: TurnUsageSchema.nullable(),
    model: z.string().nullable().openapi({ description: 'The model the turn ran with, as its agent named it' }),
  })
  .openapi('Turn');

export const EventSchema = z
  .object({
    id: z.number().int(),
    kind: z.enum(['output', 'stage']),
    stream: z.string(),
    data: z.string(),
    stage: z.string().nullable(),
    state: z.string().nullable(),
    duration_ms: z.number().int().nullable(),
    turn_id: z.string().nullable(),
    ts: z.string(),
    blocks: z
      .array(
        z.object({ kind: z.enum(['text', 'thinking', 'tool_use', 'tool_update', 'tool_result', 'raw']) }).passthrough(),
      )
      .optional()
      .openapi({
        description:
          'With ?blocks=true: what the event means. Tool blocks carry `tool`, the call merged with every update so far: id, tool_name, title, kind, status, raw_input, raw_output, content (text, diff, terminal), locations.',
      }),
  })
  .openapi('LogEvent');

export type SandboxView = z.infer<typeof SandboxSchema>;
export type ConversationView = z.infer<typeof ConversationSchema>;
export type TurnView = z.infer<typeof TurnSchema>;
export type EventView = z.infer<typeof EventSchema>;

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

export function sandboxView(s: SandboxRow, runner: RunnerSummary | null): SandboxView {
  return {
    id: s.id,
    provider: s.provider,
    name: s.name,
    sprite_name: s.name,
    status: s.status,
    url: null,
    runner: runner
      ? {
          id: runner.id,
          name: runner.name,
          hostname: runner.hostname,
          online: runner.online,
          path: runner.root ? join(runner.root, s.name) : null,
        }
      : null,
  };
}

export function conversationView(
  c: Conversation,
  sandbox: SandboxView | null,
  queue?: QueuePlace | undefined,
  agentModel: string | null = null,
): ConversationView {
  return {
    id: c.id,
    title: c.title,
    title_source: c.title === null ? null : c.titleFromAgent ? 'agent' : 'user',
    first_prompt: c.firstPrompt,
    sandbox_id: c.sandboxId,
    sandbox,
    agent_id: c.agentId,
    environment_id: c.environmentId,
    repository_branch: c.repositoryBranch ?? null,
    model: c.model ?? agentModel,
    permission_policy: c.permissionPolicy,
    runtime: c.runtime,
    acp: true,
    status: c.status,
    failure_reason: c.failureReason,
    runtime_session_id: c.runtimeSessionId,
    source: c.source,
    parent_conversation_id: null,
    channel_id: c.channelId,
    turn_count: c.turnCount,
    last_active_at: c.lastActiveAt.toISOString(),
    last_read_at: iso(c.lastReadAt),
    unread: c.lastReadAt === null || c.lastActiveAt > c.lastReadAt,
    usage_total: c.usageTotal,
    session_settings: c.sessionSettings,
    session_offered: offeredView(c.sessionOffered),
    labels: labelList(c.labels),
    queue: queuePlaceView(queue),
    inserted_at: c.insertedAt.toISOString(),
    updated_at: c.updatedAt.toISOString(),
  };
}

export function turnView(t: Turn, queue?: QueuePlace | undefined): TurnView {
  const waiting = t.status === 'queued' && queue?.turnId === t.id ? queue : undefined;
  return {
    id: t.id,
    turn_number: t.turnNumber,
    prompt: t.prompt,
    status: t.status,
    queue_position: waiting?.position ?? null,
    queue_expires_at: waiting ? waiting.expiresAt.toISOString() : null,
    stop_reason: t.stopReason,
    reason: t.reason,
    exit_code: t.exitCode,
    pending_permission: t.pendingPermission,
    started_at: iso(t.startedAt),
    ended_at: iso(t.endedAt),
    inserted_at: t.insertedAt.toISOString(),
    image_count: t.images.length,
    images: turnImagesView(t.conversationId, t.id, t.images),
    usage: t.usage,
    model: t.model,
  };
}

export function eventView(e: EventRow, blocks?: Block[]): EventView {
  return {
    ...(blocks ? { blocks } : {}),
    id: e.id,
    kind: e.kind,
    stream: e.stream,
    data: e.data,
    stage: e.stage,
    state: e.state,
    duration_ms: e.durationMs,
    turn_id: e.turnId,
    ts: e.ts.toISOString(),
  };
}
