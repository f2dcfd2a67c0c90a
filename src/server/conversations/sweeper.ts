/**
 * The idle sweeper: reclaims sandboxes past their max lifetime, then parks idle ones
 * past the idle timeout — suspend where the provider can, destroy otherwise.
 */
import type { KnownProvider } from '../../sandbox/index.ts';
import { capabilitiesOf, checkLifecycle, describeError, idleAction } from '../../sandbox/index.ts';
import { RUNTIME_SPECS, SANDBOX_HOME } from '../runtimes/table.ts';
import type { EngineCore, EngineParts } from './live.ts';
import { agedCandidates, getConversationById, idleCandidates, updateSandbox } from './store.ts';

export class Sweeper {
  #timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  start(): void {
    const cfg = this.c.d.config;
    if (cfg.idleTimeoutMs <= 0 && cfg.maxLifetimeMs <= 0) return;
    this.#timer = setInterval(
      () => void this.sweep().catch((e) => this.c.log.error({ err: e }, 'idle sweep failed')),
      cfg.sweepIntervalMs,
    );
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** Returns how many sandboxes it reclaimed or parked. */
  async sweep(now = new Date()): Promise<number> {
    if (this.c.stopped) return 0;
    let parked = await this.#reclaimAged(now);
    if (this.c.d.config.idleTimeoutMs <= 0) {
      if (parked > 0) this.c.freed();
      return parked;
    }
    const cutoff = new Date(now.getTime() - this.c.d.config.idleTimeoutMs);
    for (const row of await idleCandidates(this.c.d.db, cutoff)) {
      const id = row.conversation.id;
      if (this.c.live.get(id)?.turn) continue;
      if (await this.c.lock.run(id, () => this.#park(id, cutoff))) parked++;
    }
    // A parked sandbox no longer holds a slot of its account's sandbox limit.
    if (parked > 0) this.c.freed();
    return parked;
  }

  async #reclaimAged(now: Date): Promise<number> {
    const max = this.c.d.config.maxLifetimeMs;
    if (max <= 0) return 0;
    let reclaimed = 0;
    for (const row of await agedCandidates(this.c.d.db, new Date(now.getTime() - max))) {
      const id = row.conversation.id;
      if (await this.c.lock.run(id, () => this.#reclaim(id, now))) reclaimed++;
    }
    return reclaimed;
  }

  /** Max lifetime: destroys even a busy sandbox; the conversation stays idle. */
  async #reclaim(id: string, now: Date): Promise<boolean> {
    const row = await getConversationById(this.c.d.db, id);
    const s = row?.sandbox;
    if (!row || !s || s.status !== 'ready') return false;
    const live = this.c.live.get(id);
    // A running conversation whose turn this node does not hold is another node's to reclaim.
    if (row.conversation.status !== 'idle' && !(row.conversation.status === 'running' && live?.turn)) return false;
    const limits = { idleTimeoutMs: this.c.d.config.idleTimeoutMs, maxLifetimeMs: this.c.d.config.maxLifetimeMs };
    const verdict = checkLifecycle(
      limits,
      s.lastResumedAt ?? s.insertedAt,
      row.conversation.lastActiveAt,
      !!live?.turn,
      now,
    );
    if (verdict.kind !== 'expired' || verdict.reason !== 'max_lifetime') return false;
    if (!this.c.d.registry.isRegistered(s.provider as KnownProvider)) return false;
    const adapter = this.c.d.registry.adapterFor(s.provider as KnownProvider);
    const handle = live?.handle ?? adapter.buildHandle(s.name);
    if (live?.turn)
      await this.p.turns.dispatch(live, live.turn, {
        type: 'failed',
        error: 'the sandbox reached its maximum lifetime',
      });
    if (live) {
      await live.proc?.stop();
      this.c.live.delete(id);
    }
    const d = await adapter.lifecycle.destroy(handle);
    if (!d.ok) {
      // An offline runner cannot destroy; the row stays ready and the next sweep tries again.
      this.c.log.warn({ conversation: id, err: describeError(d.error) }, 'max-lifetime destroy failed');
      return false;
    }
    await updateSandbox(this.c.d.db, s.id, { status: 'terminated', terminatedAt: new Date(), agentSessionId: null });
    this.c.events.stage(id, null, 'sandbox', 'done', {
      event: 'reclaimed',
      reason: 'max_lifetime',
      message: 'the sandbox reached its maximum lifetime and was destroyed; the next prompt starts a fresh one',
    });
    return true;
  }

  async #park(id: string, cutoff: Date): Promise<boolean> {
    const row = await getConversationById(this.c.d.db, id);
    const s = row?.sandbox;
    if (
      !row ||
      !s ||
      row.conversation.status !== 'idle' ||
      s.status !== 'ready' ||
      row.conversation.lastActiveAt >= cutoff
    )
      return false;
    const live = this.c.live.get(id);
    // Nothing is parked while a turn or a permission request is open.
    if (live?.turn) return false;
    if (!this.c.d.registry.isRegistered(s.provider as KnownProvider)) return false;
    const adapter = this.c.d.registry.adapterFor(s.provider as KnownProvider);
    const handle = live?.handle ?? adapter.buildHandle(s.name);
    if (live) {
      await live.proc?.stop();
      this.c.live.delete(id);
    }
    // With the agent stopped, what it writes as it exits is on disk: the checkpoint a lost sandbox restores.
    const spec = RUNTIME_SPECS[row.conversation.runtime];
    const home = spec.home;
    if (this.c.d.checkpoints && home.startsWith(SANDBOX_HOME))
      await this.c.d.checkpoints.atPark({
        cwd: spec.cwd,
        relocateSessions: spec.relocateSessions,
        conversationId: id,
        accountId: row.conversation.accountId,
        adapter,
        handle,
        home,
      });
    const suspend = adapter.lifecycle.suspend?.bind(adapter.lifecycle);
    if (suspend && idleAction(capabilitiesOf(adapter, handle)) === 'suspend') {
      const r = await suspend(handle);
      if (r.ok) {
        await updateSandbox(this.c.d.db, s.id, { status: 'suspended', agentSessionId: null });
        this.c.events.stage(id, null, 'sandbox', 'done', {
          event: 'suspended',
          reason: 'idle',
          message: 'parked after the idle timeout; the next prompt wakes it',
        });
        return true;
      }
      if (this.c.d.placement.hostAway(r.error)) {
        // An offline host can neither suspend nor destroy; its disk stays, and so does the row.
        this.c.log.info({ conversation: id }, 'idle park deferred: runner offline');
        return false;
      }
      this.c.log.warn({ conversation: id, err: describeError(r.error) }, 'suspend failed; destroying instead');
    }
    const d = await adapter.lifecycle.destroy(handle);
    if (!d.ok) {
      this.c.log.warn({ conversation: id, err: describeError(d.error) }, 'idle destroy failed');
      return false;
    }
    await updateSandbox(this.c.d.db, s.id, { status: 'terminated', terminatedAt: new Date(), agentSessionId: null });
    this.c.events.stage(id, null, 'sandbox', 'done', {
      event: 'reclaimed',
      reason: 'idle',
      message: 'the sandbox was destroyed after the idle timeout; the next prompt starts a fresh one',
    });
    return true;
  }
}
