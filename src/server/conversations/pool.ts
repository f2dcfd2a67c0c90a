/**
 * Warm pools (issue 32): per agent, `warm_pool` conversations provisioned ahead (sandbox, environment
 * steps, runtime installed, agent process through ACP initialize and session/new), taken by the next.
 *
 * A member is an ordinary conversation row of the agent's account with `pool_agent_id` set, hidden from
 * listings: so it counts toward the account's limits, parks, wakes, survives a restart and is terminated
 * like any other (no sandbox is ever outside a row). Taking one clears the mark in one UPDATE under
 * SKIP LOCKED, so two conversations (on two nodes) never get the same member; filling happens under the
 * account's capacity lock, so two nodes never fill one pool past its size.
 */
import { createHash } from 'node:crypto';
import { and, asc, desc, eq, gt, inArray, isNotNull, sql } from 'drizzle-orm';
import { agents, conversations, type Agent } from '../store/conversation-schema.ts';
import type { EngineResult } from '../core/engine-errors.ts';
import type { EngineCore } from './live.ts';
import type { CreateConversationInput } from './provisioner.ts';
import { deleteConversationRows } from './store.ts';

/** Member statuses that hold (or are getting) a sandbox; a failed member is removed and a new one made. */
export const MEMBER_STATUSES = ['pending', 'idle', 'running'] as const;

/** Thrown inside the admission transaction when the pool is full or the account has no room: nothing is stored. */
export class PoolFull extends Error {
  constructor() {
    super('the warm pool is full or the account has no sandbox to spare');
  }
}

/** What a member asks of the admission: the agent's configuration key and the pool's size. */
export interface PoolSlot {
  readonly key: string;
  readonly size: number;
}

/**
 * The agent's launch configuration, as one key: a member made under another key is stale (drained).
 * The name, description, metadata and warm_pool itself change nothing a sandbox holds.
 */
export function poolKey(a: Agent): string {
  const launch = [
    a.runtime,
    a.model,
    a.system,
    a.sandboxProvider,
    a.permissionPolicy,
    a.environmentId,
    a.skills,
    a.mcpServers,
    a.runnerId,
    a.credentialDelivery,
    a.credentialSet,
    a.customRuntime,
    a.sessionSettings,
  ];
  return createHash('sha256').update(JSON.stringify(launch)).digest('hex').slice(0, 32);
}

/** Whether a new conversation may take a member: only one that launches exactly as the member was made. */
export function takeable(agent: Agent, input: CreateConversationInput): boolean {
  return (
    agent.warmPool > 0 &&
    input.fork === undefined &&
    input.parentId === undefined &&
    input.channelId === undefined &&
    input.permissionPolicy === undefined &&
    // A picked branch is cloned at provisioning: a member holds the repository's default.
    input.branch === undefined &&
    input.repository === undefined &&
    // A member's agent was launched with the agent's model.
    (input.model === undefined || input.model === agent.model) &&
    (input.secrets === undefined || Object.keys(input.secrets).length === 0) &&
    (input.environmentId === undefined || input.environmentId === agent.environmentId)
  );
}

type Tx = Parameters<Parameters<EngineCore['d']['db']['transaction']>[0]>[0];

/** Live members of the agent made under `key`, counted inside the admission's transaction. */
export async function countMembers(tx: Tx, agentId: string, key: string): Promise<number> {
  const [r] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(conversations)
    .where(
      and(
        eq(conversations.poolAgentId, agentId),
        eq(conversations.poolKey, key),
        inArray(conversations.status, [...MEMBER_STATUSES]),
      ),
    );
  return r?.n ?? 0;
}

export interface PoolHooks {
  create(accountId: string, input: CreateConversationInput): Promise<EngineResult<unknown>>;
  terminate(accountId: string, id: string): Promise<EngineResult<void>>;
}

export class WarmPool {
  #timer: NodeJS.Timeout | null = null;
  #pass: Promise<void> | null = null;
  #again = false;

  constructor(
    private readonly c: EngineCore,
    private readonly hooks: PoolHooks,
  ) {}

  /** Looks at the pools now and every `poolIntervalMs` (a failed fill is retried then). */
  start(): void {
    this.#timer = setInterval(() => this.refill(), this.c.d.config.poolIntervalMs);
    this.#timer.unref();
    this.refill();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#again = false;
    await this.#pass;
  }

  /** Starts a pass (drain what is stale, fill what is short) unless one runs; then one more after it. */
  refill(): void {
    if (this.c.stopped) return;
    if (this.#pass) {
      this.#again = true;
      return;
    }
    this.#pass = this.#run()
      .catch((e) => this.c.log.error({ err: e }, 'a warm pool pass failed'))
      .finally(() => {
        this.#pass = null;
        if (this.#again && !this.c.stopped) {
          this.#again = false;
          this.refill();
        }
      });
  }

  /** Resolves when no pass runs (tests and the bench wait for a filled pool through the API instead). */
  async settled(): Promise<void> {
    while (this.#pass) await this.#pass;
  }

  /**
   * Takes a member for a new conversation of `agent` (null when none is ready): the row becomes the
   * conversation, with its sandbox, agent process, session and sandbox token. A member on this node is
   * preferred (its agent process is here); a parked one is woken by the first prompt like any other.
   */
  async take(accountId: string, agent: Agent, input: CreateConversationInput): Promise<string | null> {
    if (!takeable(agent, input)) return null;
    const db = this.c.d.db;
    const pick = db
      .select({ id: conversations.id })
      .from(conversations)
      .where(
        and(
          eq(conversations.accountId, accountId),
          eq(conversations.poolAgentId, agent.id),
          eq(conversations.poolKey, poolKey(agent)),
          eq(conversations.status, 'idle'),
        ),
      )
      .orderBy(sql`(${conversations.nodeId} = ${this.c.nodeId}) desc`, desc(conversations.lastActiveAt))
      .limit(1)
      .for('update', { skipLocked: true });
    const now = new Date();
    const [row] = await db
      .update(conversations)
      .set({
        poolAgentId: null,
        poolKey: null,
        title: input.title ?? null,
        model: input.model ?? null,
        insertedAt: now,
        updatedAt: now,
        lastActiveAt: now,
      })
      .where(and(inArray(conversations.id, pick), isNotNull(conversations.poolAgentId)))
      .returning({ id: conversations.id });
    if (row) this.refill();
    return row?.id ?? null;
  }

  async #run(): Promise<void> {
    const db = this.c.d.db;
    const members = await db
      .select({
        id: conversations.id,
        accountId: conversations.accountId,
        agentId: conversations.poolAgentId,
        key: conversations.poolKey,
        status: conversations.status,
        failureReason: conversations.failureReason,
        sandboxId: conversations.sandboxId,
      })
      .from(conversations)
      .where(and(isNotNull(conversations.poolAgentId), inArray(conversations.status, [...MEMBER_STATUSES, 'failed'])))
      .orderBy(asc(conversations.insertedAt));
    const ids = [...new Set(members.map((m) => m.agentId!))];
    const pooled = await db
      .select()
      .from(agents)
      .where(ids.length > 0 ? sql`${gt(agents.warmPool, 0)} or ${inArray(agents.id, ids)}` : gt(agents.warmPool, 0));
    const byId = new Map(pooled.map((a) => [a.id, a]));
    const fresh = new Map<string, number>();
    for (const m of members) {
      if (this.c.stopped) return;
      if (m.status === 'failed') {
        // Its sandbox is gone already; the row would only clutter the table. The next fill makes another.
        this.c.log.warn({ agent: m.agentId, reason: m.failureReason }, 'a warm pool member failed to provision');
        await deleteConversationRows(db, m.id, m.sandboxId);
        continue;
      }
      const agent = byId.get(m.agentId!);
      const n = fresh.get(m.agentId!) ?? 0;
      // Stale (the agent changed or is gone) or beyond the pool's size now: terminated, sandbox and all.
      if (!agent || m.key !== poolKey(agent) || n >= agent.warmPool) {
        this.c.log.info({ agent: m.agentId, conversation: m.id }, 'draining a warm pool member');
        await this.hooks.terminate(m.accountId, m.id);
        continue;
      }
      fresh.set(m.agentId!, n + 1);
    }
    for (const agent of pooled) {
      let short = agent.warmPool - (fresh.get(agent.id) ?? 0);
      while (short-- > 0 && !this.c.stopped) {
        try {
          const r = await this.hooks.create(agent.accountId, {
            agentId: agent.id,
            pool: { key: poolKey(agent), size: agent.warmPool },
          });
          if (!r.ok) {
            this.c.log.warn({ agent: agent.id, err: r.error.message }, 'could not fill a warm pool');
            break;
          }
        } catch (e) {
          if (e instanceof PoolFull) break;
          throw e;
        }
      }
    }
  }
}
