/**
 * The team roster as the web UI shows it, derived from the account's agents and each one's latest
 * conversation (newest live, else newest finished), with presence by the table of team/presence.ts.
 */
import type { ConversationEngine } from '../conversations/engine.ts';
import type { TeamService } from '../team/service.ts';
import { PREVIEW_MAX } from '../team/service.ts';
import type { ConversationView } from '../conversations/views.ts';
import { listAgents } from '../agents/service.ts';
import type { Agent, SandboxStatus, Turn } from '../store/conversation-schema.ts';
import { presenceOf as teamPresence, type Presence, type PresenceState } from '../team/presence.ts';

export type { Presence } from '../team/presence.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { lastTurnAndReply } from '../team/reads.ts';

export interface Teammate {
  readonly agent: Agent;
  readonly conversation: ConversationView | null;
  readonly presence: Presence;
  /** "on mac-mini" for a runner sandbox, "on daytona" for a hosted one (never a path on the host). */
  readonly where: string | null;
  readonly preview: Preview;
}

/**
 * The last exchange in a line: the reply as it streams in (`them`), `typing` before its first word,
 * `asking` while a permission request waits (text: the tool), `you` when a finished turn had no reply.
 */
export type Preview = { readonly kind: 'you' | 'them' | 'typing' | 'asking'; readonly text: string } | null;

const clip = (s: string): string => (s.length > PREVIEW_MAX ? `${s.slice(0, PREVIEW_MAX - 1)}…` : s);

export function previewOf(turn: Turn | null, reply: string): Preview {
  if (!turn) return null;
  if (turn.pendingPermission) return { kind: 'asking', text: turn.pendingPermission.tool };
  const text = reply.trim();
  if (text) return { kind: 'them', text: clip(text) };
  return turn.status === 'pending' || turn.status === 'running'
    ? { kind: 'typing', text: '' }
    : { kind: 'you', text: clip(turn.prompt) };
}

/** The roster's words where they say more than the API's label (what a message to the teammate will do). */
const ROSTER_LABELS: Partial<Record<PresenceState, string>> = {
  failed: 'stopped after an error · a message starts afresh',
  offline: 'ended · a message starts a new conversation',
};

/** The presence table of team/presence.ts, read off the conversation's view. */
export function presenceOf(c: ConversationView | null): Presence {
  if (!c) return { state: 'offline', label: 'not started · a message starts it' };
  const s = c.sandbox;
  const p = teamPresence({
    status: c.status,
    sandbox: s ? { provider: s.provider, status: s.status as SandboxStatus } : null,
    runnerOnline: s?.runner ? s.runner.online : true,
  });
  return { state: p.state, label: ROSTER_LABELS[p.state] ?? p.label };
}

export function whereOf(c: ConversationView | null): string | null {
  const s = c?.sandbox;
  if (!s) return null;
  if (s.provider === 'runner') {
    if (!s.runner) return 'on a runner';
    return `on ${s.runner.name || s.runner.hostname || 'a runner'}`;
  }
  return `on ${s.provider}`;
}

const LIVE = new Set(['pending', 'running', 'idle']);

/** The conversation a message to this agent goes to: the newest live one, else the newest. */
export function currentConversation(convs: readonly ConversationView[]): ConversationView | null {
  return convs.find((c) => LIVE.has(c.status)) ?? convs[0] ?? null;
}

/** Most recently active first; agents that never ran come last, by name. */
export async function buildRoster(db: EngineDb, engine: ConversationEngine, accountId: string): Promise<Teammate[]> {
  const agents = await listAgents(db, accountId);
  const mates = await Promise.all(
    agents.map(async (agent) => {
      const conversation = currentConversation(await engine.list(accountId, { agentId: agent.id }));
      const { turn, reply } = conversation ? await lastTurnAndReply(db, conversation.id) : { turn: null, reply: '' };
      return {
        agent,
        conversation,
        presence: presenceOf(conversation),
        where: whereOf(conversation),
        preview: previewOf(turn, reply),
      };
    }),
  );
  return mates.sort((a, b) => {
    const ta = a.conversation?.last_active_at ?? '';
    const tb = b.conversation?.last_active_at ?? '';
    return ta === tb ? a.agent.name.localeCompare(b.agent.name) : tb.localeCompare(ta);
  });
}

/** The Team page's two lists: the team as `GET /api/team` has it, and the account's other agents. */
export interface TeamRoster {
  /** On the team (added with "Add to team" or `POST /api/team`): each shows its team conversation. */
  readonly members: readonly Teammate[];
  /** Not on the team: each shows its latest conversation of any kind. */
  readonly others: readonly Teammate[];
}

export async function buildTeamRoster(
  db: EngineDb,
  engine: ConversationEngine,
  team: Pick<TeamService, 'roster'> | undefined,
  accountId: string,
): Promise<TeamRoster> {
  const everyone = await buildRoster(db, engine, accountId);
  if (!team) return { members: [], others: everyone };
  const members: Teammate[] = (await team.roster(accountId)).map((t) => ({
    agent: t.agent,
    conversation: t.conversation,
    presence: presenceOf(t.conversation),
    where: whereOf(t.conversation),
    preview: t.lastTurn?.pendingPermission ? { kind: 'asking', text: t.lastTurn.pendingPermission.tool } : t.preview,
  }));
  const ids = new Set(members.map((m) => m.agent.id));
  return { members, others: everyone.filter((m) => !ids.has(m.agent.id)) };
}
