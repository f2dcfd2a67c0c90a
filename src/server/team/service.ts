/**
 * The team: an agent's teammate is its conversation on the `fountain:team`
 * channel. Roster with presence and preview, add, rename, remove, and messages that wake a parked
 * teammate or replace a finished one; the scheduler delivers through the same `message`.
 */
import type { Logger } from 'pino';
import { getAgent } from '../agents/store.ts';
import type { Agent, Turn } from '../store/conversation-schema.ts';
import { getConversationById, type ConversationWithSandbox } from '../conversations/store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { replyText } from '../conversations/events-store.ts';
import { deleteAgentSchedules, lastTurn, setTitle, teamConversations, unbindTeam, usageTotal } from './store.ts';
import { TEAM_CHANNEL } from '../store/team-schema.ts';
import { teamTopic, type EventBus } from '../cluster/bus.ts';
import { publishConversationsChanged } from '../conversations/changes.ts';
import type { ConversationEngine } from '../conversations/engine.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import { presenceOf, type Presence } from './presence.ts';
import type { ConversationView } from '../conversations/views.ts';

/** Longest preview text; the full reply is in the conversation. */
export const PREVIEW_MAX = 200;
/** A message to a teammate still starting waits this long before answering 503 provisioning. */
const STARTING_WAIT_MS = 3000;

export interface Teammate {
  readonly agent: Agent;
  readonly name: string;
  /** Newest live conversation, else the newest finished one. */
  readonly conversation: ConversationView;
  readonly presence: Presence;
  readonly usageTotal: { input: number; output: number };
  readonly lastTurn: Turn | null;
  readonly preview: { kind: 'you' | 'them' | 'typing'; text: string } | null;
  readonly history: readonly ConversationWithSandbox[];
}

export interface TeamDeps {
  readonly db: EngineDb;
  readonly engine: ConversationEngine;
  readonly bus: EventBus;
  readonly logger: Logger;
  /** Audit sink (`team.renamed`, …); the server's audit log. */
  readonly audit: (
    accountId: string,
    action: string,
    subjectId: string,
    data?: Record<string, unknown>,
  ) => Promise<void>;
}

export type Delivery = { readonly conversationId: string; readonly fresh: boolean };

const finished = (s: string): boolean => s === 'terminated' || s === 'failed';

const clip = (s: string): string => (s.length > PREVIEW_MAX ? `${s.slice(0, PREVIEW_MAX - 1)}…` : s);

export class TeamService {
  readonly #d: TeamDeps;

  constructor(deps: TeamDeps) {
    this.#d = deps;
  }

  changed(accountId: string): void {
    this.#d.bus.publish(teamTopic(accountId), { type: 'team_changed', accountId });
  }

  /** The roster, most recently active first. */
  async roster(accountId: string): Promise<Teammate[]> {
    const byAgent = new Map<string, ConversationWithSandbox[]>();
    for (const row of await teamConversations(this.#d.db, accountId)) {
      const id = row.conversation.agentId!;
      byAgent.set(id, [...(byAgent.get(id) ?? []), row]);
    }
    const out: Teammate[] = [];
    for (const [agentId, rows] of byAgent) {
      const t = await this.#teammate(accountId, agentId, rows);
      if (t) out.push(t);
    }
    return out.sort((a, b) => b.conversation.last_active_at.localeCompare(a.conversation.last_active_at));
  }

  async get(accountId: string, agentId: string): Promise<Teammate | undefined> {
    const rows = await teamConversations(this.#d.db, accountId, agentId);
    return rows.length ? this.#teammate(accountId, agentId, rows) : undefined;
  }

  async #teammate(accountId: string, agentId: string, rows: ConversationWithSandbox[]): Promise<Teammate | undefined> {
    const agent = await getAgent(this.#d.db, accountId, agentId);
    if (!agent) return undefined;
    const current = rows.find((r) => !finished(r.conversation.status)) ?? rows[0]!;
    const view = await this.#d.engine.view(current);
    const presence = presenceOf({
      status: current.conversation.status,
      sandbox: current.sandbox ? { provider: current.sandbox.provider, status: current.sandbox.status } : null,
      runnerOnline: view.sandbox?.runner?.online ?? false,
    });
    const turn = (await lastTurn(this.#d.db, current.conversation.id)) ?? null;
    let preview: Teammate['preview'] = null;
    if (turn) {
      if (turn.status === 'pending' || turn.status === 'running') preview = { kind: 'typing', text: '' };
      else {
        const reply = (await replyText(this.#d.db, current.conversation.id, turn.id)).trim();
        preview = reply ? { kind: 'them', text: clip(reply) } : { kind: 'you', text: clip(turn.prompt) };
      }
    }
    return {
      agent,
      name: current.conversation.title ?? agent.name,
      conversation: view,
      presence,
      usageTotal: await usageTotal(
        this.#d.db,
        rows.map((r) => r.conversation.id),
      ),
      lastTurn: turn,
      preview,
      history: rows,
    };
  }

  /** Puts the agent on the team (opens its conversation); `created` false when it already was. */
  async add(accountId: string, agentId: string, name: string | undefined): Promise<EngineResult<{ created: boolean }>> {
    const agent = await getAgent(this.#d.db, accountId, agentId);
    if (!agent) return refuse('not_found', 'agent not found');
    if ((await teamConversations(this.#d.db, accountId, agentId)).length > 0) return accept({ created: false });
    const r = await this.#d.engine.create(accountId, {
      agentId,
      title: name?.trim() || undefined,
      channelId: TEAM_CHANNEL,
    });
    if (!r.ok) return r;
    await this.#d.audit(accountId, 'team.added', agentId, { conversation_id: r.value.id });
    this.changed(accountId);
    return accept({ created: true });
  }

  /** Renames the teammate (the current conversation's title); null or blank falls back to the agent's name. */
  async rename(accountId: string, agentId: string, name: string | null): Promise<EngineResult<void>> {
    const rows = await teamConversations(this.#d.db, accountId, agentId);
    const current = rows.find((r) => !finished(r.conversation.status)) ?? rows[0];
    if (!current) return refuse('not_found', 'the agent is not on the team');
    const title = name?.trim() ? name.trim() : null;
    await setTitle(this.#d.db, current.conversation.id, title);
    await this.#d.audit(accountId, 'team.renamed', agentId, { name: title });
    this.changed(accountId);
    // The teammate's name is its conversation's title: conversation lists change too.
    publishConversationsChanged(this.#d.bus, accountId);
    return accept(undefined);
  }

  /** Terminates the live conversation, unbinds every team conversation of the agent, deletes its schedules. */
  async remove(accountId: string, agentId: string): Promise<EngineResult<{ scheduleIds: string[] }>> {
    const rows = await teamConversations(this.#d.db, accountId, agentId);
    if (rows.length === 0) return refuse('not_found', 'the agent is not on the team');
    for (const r of rows) {
      if (!finished(r.conversation.status)) await this.#d.engine.terminate(accountId, r.conversation.id);
    }
    await unbindTeam(this.#d.db, accountId, agentId);
    const scheduleIds = await deleteAgentSchedules(this.#d.db, accountId, agentId);
    await this.#d.audit(accountId, 'team.removed', agentId, { schedules: scheduleIds.length });
    this.changed(accountId);
    return accept({ scheduleIds });
  }

  /**
   * Delivers a message: a finished conversation is replaced by a fresh one seeded with it (name
   * carried over); a teammate whose runner is away answers `runner_offline` (nothing can wake it);
   * otherwise the engine wakes the sandbox if parked and queues the turn.
   */
  async message(accountId: string, agentId: string, prompt: string): Promise<EngineResult<Delivery>> {
    const rows = await teamConversations(this.#d.db, accountId, agentId);
    const current = rows.find((r) => !finished(r.conversation.status)) ?? rows[0];
    if (!current) return refuse('not_found', 'the agent is not on the team');
    const conv = current.conversation;
    if (finished(conv.status)) {
      const r = await this.#d.engine.create(accountId, {
        agentId,
        title: conv.title ?? undefined,
        prompt,
        channelId: TEAM_CHANNEL,
      });
      if (!r.ok) return r;
      await this.#d.audit(accountId, 'team.conversation.replaced', agentId, {
        previous: conv.id,
        conversation_id: r.value.id,
      });
      this.changed(accountId);
      return accept({ conversationId: r.value.id, fresh: true });
    }
    const view = await this.#d.engine.view(current);
    if (conv.status === 'idle' && current.sandbox?.provider === 'runner' && !(view.sandbox?.runner?.online ?? false)) {
      return refuse('runner_offline', "The teammate's machine is offline; it wakes when the runner reconnects.");
    }
    if (conv.status === 'pending' && !(await this.#leftPending(conv.id))) {
      return refuse('provisioning', "The teammate's computer is still starting; try again shortly.");
    }
    const r = await this.#d.engine.prompt(accountId, conv.id, prompt);
    if (!r.ok) return r;
    return accept({ conversationId: conv.id, fresh: false });
  }

  /** Rotation: the teammate starts over in a fresh conversation on the same sandbox (its files kept). */
  async rotate(accountId: string, agentId: string, name: string | undefined): Promise<EngineResult<ConversationView>> {
    const rows = await teamConversations(this.#d.db, accountId, agentId);
    const current = rows.find((r) => !finished(r.conversation.status)) ?? rows[0];
    if (!current) return refuse('not_found', 'the agent is not on the team');
    const previous = current.conversation;
    const title = name?.trim() || previous.title || undefined;
    const r = await this.#d.engine.rotate(accountId, previous.id, { title, channelId: TEAM_CHANNEL });
    if (!r.ok) return r;
    await this.#d.audit(accountId, 'team.conversation.rotated', agentId, {
      previous: previous.id,
      conversation_id: r.value.id,
    });
    this.changed(accountId);
    return r;
  }

  async #leftPending(conversationId: string): Promise<boolean> {
    const deadline = Date.now() + STARTING_WAIT_MS;
    for (;;) {
      const row = await getConversationById(this.#d.db, conversationId);
      if (!row || row.conversation.status !== 'pending') return true;
      if (Date.now() >= deadline) return false;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** A fresh, channel-less conversation of the agent seeded with the prompt (a one-off schedule run). */
  async fresh(
    accountId: string,
    agentId: string,
    title: string | undefined,
    prompt: string,
  ): Promise<EngineResult<Delivery>> {
    const r = await this.#d.engine.create(accountId, { agentId, title, prompt });
    return r.ok ? accept({ conversationId: r.value.id, fresh: true }) : r;
  }
}
