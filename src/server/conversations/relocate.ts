/**
 * Fork and move. A fork is a new conversation of the same agent that goes on from the checkpoint taken
 * after one of a conversation's turns, its history up to that turn copied; a move takes a checkpoint,
 * removes the sandbox and places its successor on another runner or provider, created by the next message.
 */
import { sql } from 'drizzle-orm';
import type { CheckpointRow } from '../checkpoints/service.ts';
import { describeError, type Handle, type KnownProvider, type SandboxAdapter } from '../../sandbox/index.ts';
import { RUNTIME_SPECS, SANDBOX_HOME } from '../runtimes/table.ts';
import { turns as turnsTable, type Conversation, type Turn, type UsageTotal } from '../store/conversation-schema.ts';
import { rowsOf } from '../store/engine-db.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import type { EngineCore, EngineParts } from './live.ts';
import {
  getConversation,
  insertSandbox,
  listTurns,
  openTurns,
  updateConversation,
  updateSandbox,
  type ConversationWithSandbox,
} from './store.ts';

/** Which turn a fork starts after: by id, by number, or (neither) the latest completed one. */
export interface ForkAt {
  readonly turnId?: string | undefined;
  readonly turnNumber?: number | undefined;
}

/** Where a move goes: a runner (id or name), or a provider (any of its placements). */
export interface MoveTo {
  readonly runner?: string | undefined;
  readonly provider?: KnownProvider | undefined;
}

export class Relocation {
  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  async fork(accountId: string, id: string, at: ForkAt): Promise<EngineResult<ConversationWithSandbox>> {
    const { db } = this.c.d;
    const row = await getConversation(db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    const parent = row.conversation;
    if (!parent.agentId) return refuse('no_agent', "the conversation's agent was deleted");
    const turns = await listTurns(db, id);
    const turn =
      at.turnId !== undefined
        ? turns.find((t) => t.id === at.turnId)
        : at.turnNumber !== undefined
          ? turns.find((t) => t.turnNumber === at.turnNumber)
          : turns.filter((t) => t.status === 'completed').at(-1);
    if (!turn) {
      if (at.turnId === undefined && at.turnNumber === undefined)
        return refuse('turn_not_completed', 'the conversation has no completed turn to fork from');
      return refuse('turn_not_found', `the conversation has no turn ${at.turnId ?? at.turnNumber}`);
    }
    const n = turn.turnNumber;
    if (turn.status !== 'completed')
      return refuse(
        'turn_not_completed',
        `turn ${n} is ${turn.status}: only a completed turn is checkpointed, so only one can be forked from`,
        { turn_number: n },
      );
    const checkpoints = this.c.d.checkpoints;
    const checkpoint = checkpoints ? await checkpoints.forTurn(id, turn.id) : null;
    if (!checkpoints || !checkpoint) {
      const kept = checkpoints ? await checkpoints.turnsKept(id) : new Set<string>();
      const forkable = turns.filter((t) => kept.has(t.id)).map((t) => t.turnNumber);
      return refuse(
        'no_checkpoint',
        `no checkpoint is kept for turn ${n} (the newest few are kept; turns that end while one is taken share the next)${
          forkable.length ? `; turns that can be forked from: ${forkable.join(', ')}` : ''
        }`,
        { turn_number: n, forkable_turns: forkable },
      );
    }
    // What the parent stored of turn N is in the database before it is copied.
    await this.c.events.flush();
    const copied = turns.filter((t) => t.turnNumber <= n);
    return this.p.provisioner.create(accountId, {
      agentId: parent.agentId,
      title: forkTitle(parent, n),
      environmentId: parent.environmentId ?? undefined,
      fork: {
        parent,
        turnCount: n,
        runtimeSessionId: checkpoint.sessionId ?? parent.runtimeSessionId,
        usageTotal: usageOf(copied),
        copy: async (forkId) => {
          const forkTurn = await this.#copyHistory(parent.id, forkId, copied, turn);
          await checkpoints.copy(checkpoint, { conversationId: forkId, accountId, turnId: forkTurn });
          this.c.events.stage(forkId, null, 'fork', 'done', {
            from_conversation_id: parent.id,
            from_turn_id: turn.id,
            from_turn_number: n,
            checkpoint_at: checkpoint.createdAt.toISOString(),
            detail: `forked from turn ${n}: its history so far is a copy, and its sandbox starts from the checkpoint taken after that turn`,
          });
        },
      },
    });
  }

  /**
   * Copies the turns and the events up to turn N's last one (new ids, in the same order), each turn id
   * in them replaced by its copy's; returns the copy of turn N's id.
   */
  async #copyHistory(parentId: string, forkId: string, copied: readonly Turn[], last: Turn): Promise<string> {
    return this.c.d.db.transaction(async (tx) => {
      const ids = new Map<string, string>();
      for (const t of copied) {
        const [made] = await tx
          .insert(turnsTable)
          .values({
            conversationId: forkId,
            turnNumber: t.turnNumber,
            prompt: t.prompt,
            status: t.status,
            stopReason: t.stopReason,
            reason: t.reason,
            exitCode: t.exitCode,
            usage: t.usage,
            model: t.model,
            startedAt: t.startedAt,
            endedAt: t.endedAt,
            insertedAt: t.insertedAt,
          })
          .returning({ id: turnsTable.id });
        ids.set(t.id, made!.id);
      }
      const map = JSON.stringify(Object.fromEntries(ids));
      await tx.execute(sql`
        INSERT INTO events (conversation_id, turn_id, kind, stream, data, stage, state, duration_ms, seq, ts)
        SELECT ${forkId}, m.value::uuid, e.kind, e.stream, e.data, e.stage, e.state, e.duration_ms, e.seq, e.ts
        FROM events e LEFT JOIN jsonb_each_text(${map}::jsonb) m ON m.key = e.turn_id::text
        WHERE e.conversation_id = ${parentId}
          AND e.id <= (SELECT max(id) FROM events WHERE conversation_id = ${parentId} AND turn_id = ${last.id})
        ORDER BY e.id`);
      // Stage events name turns in their data too (turn_id, from_turn): those read as the fork's turns.
      const stages = rowsOf<{ id: string | number; data: string }>(
        await tx.execute(sql`SELECT id, data FROM events WHERE conversation_id = ${forkId} AND kind = 'stage'`),
      );
      for (const s of stages) {
        let data = s.data;
        for (const [from, to] of ids) data = data.replaceAll(from, to);
        if (data !== s.data) await tx.execute(sql`UPDATE events SET data = ${data} WHERE id = ${s.id}`);
      }
      return ids.get(last.id)!;
    });
  }

  async move(accountId: string, id: string, to: MoveTo): Promise<EngineResult<ConversationWithSandbox>> {
    if (this.c.live.get(id)?.turn) return refuse('conversation_busy', 'a turn is running; wait for it or interrupt it');
    return this.c.lock.run(id, () => this.#moveLocked(accountId, id, to));
  }

  async #moveLocked(accountId: string, id: string, to: MoveTo): Promise<EngineResult<ConversationWithSandbox>> {
    const { db, registry, placement } = this.c.d;
    const row = await getConversation(db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    const conv = row.conversation;
    if (conv.status === 'terminated' || conv.status === 'failed')
      return refuse('conversation_terminated', `the conversation is ${conv.status}; there is nothing to move`);
    if (conv.status === 'pending')
      return refuse('provisioning', "The conversation's sandbox is still starting; try again shortly.");
    if (this.c.live.get(id)?.turn || conv.status === 'running' || (await openTurns(db, id)).length > 0)
      return refuse('conversation_busy', 'a turn is running; wait for it or interrupt it');

    const provider: KnownProvider = to.provider ?? 'runner';
    if (!registry.isEnabled(provider))
      return refuse('sandbox_provider_disabled', `sandbox provider ${provider} is not configured on this instance`);
    const runner = to.runner === undefined ? undefined : await placement.runner(accountId, to.runner);
    if (to.runner !== undefined) {
      if (!runner) return refuse('runner_not_found', `no runner ${JSON.stringify(to.runner)} in this account`);
      if (!runner.online)
        return {
          ok: false,
          error: {
            code: 'runner_offline',
            message: `Runner ${JSON.stringify(runner.name)} is not connected; start it with \`fountain runner\`, or move elsewhere.`,
            extras: { runner_id: runner.id, runner_name: runner.name },
            status: 409,
          },
        };
    }
    const old = row.sandbox;
    const oldHost = old ? await placement.host(accountId, old) : null;
    if (old && old.status !== 'terminated' && old.status !== 'failed' && old.provider === provider) {
      if (runner ? oldHost?.id === runner.id : provider !== 'runner')
        return refuse(
          'already_there',
          `the conversation already runs ${runner ? `on runner ${JSON.stringify(runner.name)}` : `on ${provider}`}`,
        );
    }
    const name = await placement.mint(accountId, provider, runner?.id ?? null);
    if (!name.ok)
      return name.error.code === 'runner_offline' ? { ok: false, error: { ...name.error, status: 409 } } : name;

    // A fresh checkpoint when the sandbox answers; else the newest kept one.
    const reach = await this.#reach(row);
    const checkpoints = this.c.d.checkpoints;
    const home = RUNTIME_SPECS[conv.runtime].home;
    const lastDone = (await listTurns(db, id)).filter((t) => t.status === 'completed').at(-1);
    let checkpoint: CheckpointRow | null = null;
    if (reach && checkpoints && home.startsWith(SANDBOX_HOME)) {
      const taken = await checkpoints.take(
        { conversationId: id, accountId, adapter: reach.adapter, handle: reach.handle, home },
        lastDone?.id ?? null,
      );
      if (!taken.ok)
        return refuse(
          'checkpoint_failed',
          `no checkpoint of the sandbox could be taken, so nothing moved: ${taken.message}`,
        );
      checkpoint = taken.row;
    } else {
      checkpoint = checkpoints ? await checkpoints.latest(id) : null;
      if (!checkpoint && lastDone)
        return refuse(
          'no_checkpoint',
          'the sandbox cannot be reached and no checkpoint of it is kept: moving it now would lose what it holds',
        );
    }

    const live = this.c.live.get(id);
    if (live) {
      await live.proc?.stop();
      this.c.live.delete(id);
    }
    let left: string | null = null;
    if (reach) {
      const d = await reach.adapter.lifecycle.destroy(reach.handle);
      if (!d.ok) left = describeError(d.error);
    } else if (old && old.status !== 'terminated' && old.status !== 'failed' && old.status !== 'pending') {
      left = 'its host could not be reached';
    }
    if (left) this.c.log.warn({ conversation: id, reason: left }, 'the moved sandbox could not be removed');
    const now = new Date();
    if (old) await updateSandbox(db, old.id, { status: 'terminated', terminatedAt: now, agentSessionId: null });
    // Created by the next message, where its name routes it (provisioner.ts, a placed sandbox).
    const placed = await insertSandbox(db, { accountId, provider, name: name.value, status: 'pending' });
    await updateConversation(db, id, { sandboxId: placed.id, lastActiveAt: now });
    const target = runner ?? (await placement.host(accountId, placed));
    this.c.events.stage(id, null, 'sandbox', 'done', {
      event: 'moved',
      from: old ? { provider: old.provider, runner_id: oldHost?.id ?? null, runner_name: oldHost?.name ?? null } : null,
      to: { provider, runner_id: target?.id ?? null, runner_name: target?.name ?? null },
      checkpoint_turn: checkpoint?.turnId ?? null,
      checkpoint_at: checkpoint?.createdAt.toISOString() ?? null,
      ...(left ? { left_behind: left } : {}),
      detail: 'the next message starts the sandbox there from this checkpoint',
    });
    // The answer promises the move is recorded: a client reading the log next finds the note.
    await this.c.events.flush();
    this.c.changed(accountId);
    return accept({ conversation: { ...conv, sandboxId: placed.id }, sandbox: placed });
  }

  /** The sandbox as it is now when it answers (woken if it sleeps); null when it is gone or its host away. */
  async #reach(row: ConversationWithSandbox): Promise<{ adapter: SandboxAdapter; handle: Handle } | null> {
    const live = this.c.live.get(row.conversation.id);
    if (live) return { adapter: live.adapter, handle: live.handle };
    const s = row.sandbox;
    if (!s || !['ready', 'suspended', 'starting'].includes(s.status)) return null;
    if (!this.c.d.registry.isRegistered(s.provider as KnownProvider)) return null;
    const adapter = this.c.d.registry.adapterFor(s.provider as KnownProvider);
    const handle = adapter.buildHandle(s.name);
    const resume = adapter.lifecycle.resume?.bind(adapter.lifecycle);
    if (s.status === 'suspended' && resume) {
      const r = await resume(handle);
      return r.ok ? { adapter, handle: r.value } : null;
    }
    const probe = await adapter.lifecycle.get(handle);
    return probe.ok ? { adapter, handle } : null;
  }
}

/** The fork's title says where it came from (the list shows it beside its parent). */
function forkTitle(parent: Conversation, n: number): string {
  const base = (parent.title ?? parent.firstPrompt ?? 'conversation').replace(/\s+/g, ' ').trim();
  const suffix = ` · fork at turn ${n}`;
  const room = 120 - suffix.length;
  return `${base.length > room ? `${base.slice(0, room - 1)}…` : base}${suffix}`;
}

/** The copied turns' usage summed (the cost an agent reports is its session's so far: the last one). */
function usageOf(turns: readonly Turn[]): UsageTotal {
  const total: UsageTotal = { input: 0, output: 0 };
  for (const t of turns) {
    if (!t.usage) continue;
    total.input += t.usage.input;
    total.output += t.usage.output;
    if (t.usage.cache_read) total.cache_read = (total.cache_read ?? 0) + t.usage.cache_read;
    if (t.usage.cache_write) total.cache_write = (total.cache_write ?? 0) + t.usage.cache_write;
    if (t.usage.cost) total.cost = t.usage.cost;
  }
  return total;
}
