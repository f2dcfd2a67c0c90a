/**
 * The capacity queue: per-account limits on running turns and sandboxes. A prompt or a new conversation
 * beyond them is stored as waiting, FIFO per account, and started as capacity frees, by whichever node
 * takes the account's lock first; one past its expiry fails in words, a cancelled one never starts.
 */
import type { QueueEntry, QueueKind } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import type { EngineCore } from './live.ts';
import {
  enqueue,
  fits,
  lockAccount,
  removeEntry,
  removeEntryOf,
  takeExpired,
  waitingOf,
  accountsWaiting,
  positionsOf,
  type Limits,
} from './queue-store.ts';
import { updateConversation, updateSandbox } from './store.ts';
import { admitQueuedTurn, endQueuedTurn } from './turn/queued.ts';

type Tx = Parameters<Parameters<EngineDb['transaction']>[0]>[0];

/** What the caller stores under the account's lock, told whether it waits. */
export type Store<T> = (tx: Tx, queued: boolean) => Promise<T & { conversationId: string; turnId: string | null }>;

export type Admitted<T> =
  | { readonly queued: false; readonly value: T }
  | { readonly queued: true; readonly value: T; readonly position: number; readonly expiresAt: Date };

/** What a drain took from the queue, for the engine to start. */
export interface Taken {
  readonly accountId: string;
  readonly conversationId: string;
  readonly turnId: string | null;
  readonly kind: QueueKind;
}

export interface CapacityHooks {
  /** Starts what was taken: a prompt on the node driving its conversation, a conversation's provisioning here. */
  start(taken: Taken): Promise<void>;
  /** A queued new conversation expired or was cancelled: it ends without a sandbox. */
  endConversation(entry: QueueEntry, how: 'expired' | 'cancelled', reason: string): Promise<void>;
}

export class Capacity {
  #timer: NodeJS.Timeout | null = null;
  #draining: Promise<void> | null = null;
  #again = false;
  #hooks: CapacityHooks | null = null;

  constructor(private readonly c: EngineCore) {}

  get defaults(): Limits {
    return { maxRunningTurns: this.c.d.config.maxRunningTurns, maxSandboxes: this.c.d.config.maxSandboxes };
  }

  /**
   * Under the account's lock: stores what `store` writes, waiting (and enqueued) when something already
   * waits for the account or a limit it needs is reached, else holding its capacity at once.
   */
  async admit<T>(
    accountId: string,
    needs: { turn: boolean; sandbox: boolean; kind: QueueKind },
    store: Store<T>,
  ): Promise<Admitted<T>> {
    const r = await this.c.d.db.transaction(async (tx) => {
      const load = await lockAccount(tx, accountId, this.defaults);
      const queued = !load || load.waiting > 0 || !fits(load, needs);
      const value = await store(tx, queued);
      if (!queued) return { queued: false as const, value };
      const entry = await enqueue(tx, {
        accountId,
        conversationId: value.conversationId,
        turnId: value.turnId,
        kind: needs.kind,
        expiresAt: new Date(Date.now() + this.c.d.config.queueExpiryMs),
      });
      return { queued: true as const, value, position: (load?.waiting ?? 0) + 1, expiresAt: entry.expiresAt };
    });
    if (r.queued) {
      this.c.events.stage(r.value.conversationId, r.value.turnId, 'queue', 'started', {
        ...(r.value.turnId ? { turn_id: r.value.turnId } : {}),
        position: r.position,
        expires_at: r.expiresAt.toISOString(),
      });
      this.c.changed(accountId);
    }
    return r;
  }

  /** Starts the periodic drain (expiry, and capacity another node freed without telling this one). */
  start(hooks: CapacityHooks): void {
    this.#hooks = hooks;
    const tick = () => {
      this.#timer = setTimeout(() => {
        void this.drain().finally(() => {
          if (!this.c.stopped) tick();
        });
      }, this.c.d.config.queuePollMs);
      this.#timer.unref?.();
    };
    tick();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#draining;
  }

  /** Capacity freed on this node (a turn ended, a sandbox parked or went away): look at the queue now. */
  freed(): void {
    if (this.#hooks && !this.c.stopped) void this.drain();
  }

  /** One pass over every account that has something waiting; a call during a pass runs one more pass. */
  drain(): Promise<void> {
    if (this.#draining) {
      this.#again = true;
      return this.#draining;
    }
    this.#draining = (async () => {
      do {
        this.#again = false;
        try {
          for (const accountId of await accountsWaiting(this.c.d.db)) await this.#drainAccount(accountId);
        } catch (e) {
          this.c.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'draining the capacity queue failed');
        }
      } while (this.#again && !this.c.stopped);
    })().finally(() => {
      this.#draining = null;
    });
    return this.#draining;
  }

  async #drainAccount(accountId: string): Promise<void> {
    const hooks = this.#hooks;
    if (!hooks) return;
    const pass = await this.c.d.db.transaction(async (tx) => {
      // Another node holding the lock is admitting for this account: it leaves the queue consistent.
      const load = await lockAccount(tx, accountId, this.defaults, true);
      if (!load) return null;
      const expired = await takeExpired(tx, accountId);
      let { running, sandboxes } = load;
      const taken: Taken[] = [];
      for (const e of await waitingOf(tx, accountId)) {
        const needs = { turn: e.turnId !== null, sandbox: e.kind === 'conversation' || !e.sandboxActive };
        // FIFO: the head waits for what it needs; nothing behind it passes.
        if (!fits({ ...load, running, sandboxes }, needs)) break;
        if (!(await removeEntry(tx, e.id))) continue;
        // A new conversation is provisioned (and its first turn driven) here; a prompt by its conversation's node.
        const driver = e.kind === 'conversation' ? this.c.nodeId : 'conversation';
        if (e.turnId && !(await admitQueuedTurn(tx, e.turnId, driver))) continue;
        if (e.kind === 'conversation' && e.sandboxId) await updateSandbox(tx, e.sandboxId, { status: 'starting' });
        if (e.kind === 'conversation') await updateConversation(tx, e.conversationId, { nodeId: this.c.nodeId });
        if (needs.turn) running++;
        if (needs.sandbox) sandboxes++;
        taken.push({ accountId, conversationId: e.conversationId, turnId: e.turnId, kind: e.kind });
      }
      return { expired, taken };
    });
    if (!pass) return;
    const now = Date.now();
    for (const e of pass.expired) {
      const waited = now - e.enqueuedAt.getTime();
      // A new conversation ends before its first turn: whoever sees the turn ended finds the conversation ended too.
      if (e.kind === 'conversation') {
        const reason = `the conversation waited ${Math.max(1, Math.round(waited / 60_000))} min in the queue for capacity and expired without starting`;
        await hooks.endConversation(e, 'expired', reason);
      }
      if (e.turnId) await endQueuedTurn(this.c, e.conversationId, e.turnId, { type: 'expired', waitedMs: waited });
    }
    for (const t of pass.taken) {
      this.c.events.stage(t.conversationId, t.turnId, 'queue', 'done', t.turnId ? { turn_id: t.turnId } : {});
    }
    if (pass.expired.length > 0 || pass.taken.length > 0) {
      this.c.changed(accountId);
      await this.#announcePositions(accountId);
    }
    for (const t of pass.taken) {
      try {
        await hooks.start(t);
      } catch (e) {
        this.c.log.error({ err: describeErr(e), conversation: t.conversationId }, 'starting an admitted turn failed');
      }
    }
  }

  /** Those still waiting learn their new place in line (their streams carry it). */
  async #announcePositions(accountId: string): Promise<void> {
    const waiting = await waitingOf(this.c.d.db, accountId);
    waiting.slice(0, 100).forEach((e, i) =>
      this.c.events.stage(e.conversationId, e.turnId, 'queue', 'started', {
        event: 'position',
        ...(e.turnId ? { turn_id: e.turnId } : {}),
        position: i + 1,
        expires_at: e.expiresAt.toISOString(),
      }),
    );
  }

  /**
   * Takes a conversation's waiting prompt or creation out of the queue, ending it as cancelled; false
   * when nothing of it waits.
   */
  async cancel(conversationId: string, how: 'interrupt' | 'terminate'): Promise<boolean> {
    const entry = await removeEntryOf(this.c.d.db, conversationId);
    if (!entry) return false;
    // As at expiry: the conversation ends before its first turn.
    if (entry.kind === 'conversation' && how === 'interrupt')
      await this.#hooks?.endConversation(entry, 'cancelled', 'cancelled while queued; it never started');
    if (entry.turnId)
      await endQueuedTurn(
        this.c,
        conversationId,
        entry.turnId,
        how === 'interrupt' ? { type: 'interrupt', hasProcess: false } : { type: 'terminate' },
      );
    this.c.changed(entry.accountId);
    void this.#announcePositions(entry.accountId);
    return true;
  }

  /** The place in line of each waiting conversation among `ids`. */
  positions(ids: readonly string[]): ReturnType<typeof positionsOf> {
    return positionsOf(this.c.d.db, ids);
  }
}

const describeErr = (e: unknown): string => (e instanceof Error ? e.message : String(e));
