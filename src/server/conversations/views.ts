/**
 * The public JSON shapes of conversations, turns and events (platform-api.md §5), built from rows
 * plus what only the live registry knows (is the sandbox's runner online?).
 */
import { join } from 'node:path';
import type { Block } from './blocks.ts';
import type { Conversation, ConversationStatus, EventRow, SandboxRow, Turn, UsageTotal } from '../store/conversation-schema.ts';

/** What the engine needs to know about a runner to show it; `root` is the runner's sandbox root. */
export interface RunnerSummary {
  readonly id: string;
  readonly name: string;
  readonly hostname: string | null;
  readonly root: string | null;
  readonly online: boolean;
}

export interface SandboxView {
  id: string;
  provider: string;
  name: string;
  sprite_name: string;
  status: string;
  url: string | null;
  runner: { id: string; name: string; hostname: string | null; online: boolean; path: string | null } | null;
}

export interface ConversationView {
  id: string;
  title: string | null;
  /** Where the title came from: the user (or API), or the agent's session_info_update; null when there is none. */
  title_source: 'user' | 'agent' | null;
  first_prompt: string | null;
  sandbox_id: string | null;
  sandbox: SandboxView | null;
  agent_id: string | null;
  environment_id: string | null;
  permission_policy: Record<string, string>;
  runtime: string;
  acp: true;
  status: ConversationStatus;
  failure_reason: string | null;
  runtime_session_id: string | null;
  source: string;
  parent_conversation_id: null;
  channel_id: string | null;
  turn_count: number;
  last_active_at: string;
  last_read_at: string | null;
  unread: boolean;
  usage_total: UsageTotal;
  inserted_at: string;
  updated_at: string;
}

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
      ? { id: runner.id, name: runner.name, hostname: runner.hostname, online: runner.online, path: runner.root ? join(runner.root, s.name) : null }
      : null,
  };
}

export function conversationView(c: Conversation, sandbox: SandboxView | null): ConversationView {
  return {
    id: c.id,
    title: c.title,
    title_source: c.title === null ? null : c.titleFromAgent ? 'agent' : 'user',
    first_prompt: c.firstPrompt,
    sandbox_id: c.sandboxId,
    sandbox,
    agent_id: c.agentId,
    environment_id: c.environmentId,
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
    inserted_at: c.insertedAt.toISOString(),
    updated_at: c.updatedAt.toISOString(),
  };
}

export interface TurnView {
  id: string;
  turn_number: number;
  prompt: string;
  status: string;
  stop_reason: string | null;
  reason: string | null;
  exit_code: number | null;
  pending_permission: Turn['pendingPermission'];
  started_at: string | null;
  ended_at: string | null;
  inserted_at: string;
  image_count: number;
  usage: Turn['usage'];
  model: string | null;
}

export function turnView(t: Turn): TurnView {
  return {
    id: t.id,
    turn_number: t.turnNumber,
    prompt: t.prompt,
    status: t.status,
    stop_reason: t.stopReason,
    reason: t.reason,
    exit_code: t.exitCode,
    pending_permission: t.pendingPermission,
    started_at: iso(t.startedAt),
    ended_at: iso(t.endedAt),
    inserted_at: t.insertedAt.toISOString(),
    image_count: 0,
    usage: t.usage,
    model: t.model,
  };
}

export interface EventView {
  id: number;
  kind: EventRow['kind'];
  stream: string;
  data: string;
  stage: string | null;
  state: string | null;
  duration_ms: number | null;
  turn_id: string | null;
  ts: string;
  /** With `?blocks=true` (§7.3). */
  blocks?: Block[];
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
