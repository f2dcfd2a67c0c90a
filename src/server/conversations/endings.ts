/**
 * How a conversation ends or hands over: terminate (its turn interrupted, its sandbox destroyed, its
 * token revoked), team rotation onto the same sandbox, and delete.
 */
import { conversationImageDigests, forgetImages } from './image-blobs.ts';
import type { KnownProvider } from '../../sandbox/index.ts';
import { describeError } from '../../sandbox/index.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import type { EngineCore, EngineParts } from './live.ts';
import {
  deleteConversationRows,
  getConversation,
  getConversationById,
  insertConversationOn,
  openTurns,
  updateConversation,
  updateSandbox,
  type ConversationWithSandbox,
} from './store.ts';
import { endUndrivenTurn } from './turn/rows.ts';

export class Endings {
  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  /** `deleting`: the conversation goes next, so no checkpoint is taken of it now. */
  async terminate(accountId: string, id: string, o: { readonly deleting?: boolean } = {}): Promise<EngineResult<void>> {
    const row = await getConversation(this.c.d.db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    if (row.conversation.status === 'terminated') return accept(undefined);
    this.p.provisioner.cancel(id);
    // The lock waits for a running provisioning step; the cancelled flag makes it stop early.
    await this.c.lock.run(id, () => this.#terminateLocked(id, o.deleting === true));
    return accept(undefined);
  }

  async #terminateLocked(id: string, deleting: boolean): Promise<void> {
    this.p.launcher.forget(id);
    const db = this.c.d.db;
    const row = await getConversationById(db, id);
    if (!row || row.conversation.status === 'terminated') return;
    const live = this.c.live.get(id);
    if (live?.turn) {
      await this.p.turns.dispatch(live, live.turn, { type: 'terminate' });
    }
    // What waits in the capacity queue never starts.
    await this.p.capacity.cancel(id, 'terminate');
    for (const t of await openTurns(db, id)) {
      await endUndrivenTurn(db, t.id, 'interrupted', 'terminated');
    }
    if (live) await live.proc?.stop();
    this.c.live.delete(id);
    const s = row.sandbox;
    let destroyError: string | null = null;
    // A `pending` sandbox (placed by a move, or of a conversation that waited in the queue) was never created.
    if (
      s &&
      s.status !== 'terminated' &&
      s.status !== 'pending' &&
      this.c.d.registry.isRegistered(s.provider as KnownProvider)
    ) {
      const adapter = this.c.d.registry.adapterFor(s.provider as KnownProvider);
      // An archive being made reads the sandbox: removing it under the archive fails both.
      await this.c.d.checkpoints?.beforeDestroy(id, { keep: !deleting });
      const d = await adapter.lifecycle.destroy(live?.handle ?? adapter.buildHandle(s.name));
      if (!d.ok) destroyError = describeError(d.error);
    }
    const now = new Date();
    if (s) await updateSandbox(db, s.id, { status: 'terminated', terminatedAt: now });
    await updateConversation(db, id, { status: 'terminated', lastActiveAt: now });
    this.c.changed(row.conversation.accountId);
    await this.c.sandboxTokens.revoke(id, now);
    this.c.events.stage(id, null, 'terminate', 'done', destroyError ? { destroy_error: destroyError } : {});
    await this.c.events.flush();
    this.c.freed();
  }

  /**
   * A new conversation that waited in the capacity queue and expired (failed, in words) or was cancelled
   * (terminated): no sandbox was created, so none is destroyed.
   */
  async endQueued(id: string, how: 'expired' | 'cancelled', reason: string): Promise<void> {
    await this.c.lock.run(id, async () => {
      const db = this.c.d.db;
      const row = await getConversationById(db, id);
      if (!row || row.conversation.status !== 'pending') return;
      const now = new Date();
      const failed = how === 'expired';
      if (row.sandbox) await updateSandbox(db, row.sandbox.id, { status: failed ? 'failed' : 'terminated' });
      await updateConversation(db, id, {
        status: failed ? 'failed' : 'terminated',
        ...(failed ? { failureReason: reason } : {}),
        lastActiveAt: now,
      });
      await this.c.sandboxTokens.revoke(id, now);
      if (failed) this.c.events.stage(id, null, 'provision', 'failed', { reason, error: 'queue_expired' });
      else this.c.events.stage(id, null, 'terminate', 'done', { reason });
      this.c.changed(row.conversation.accountId);
    });
  }

  /**
   * Team rotation: a fresh conversation (new agent session) on the same sandbox, its files kept; the
   * old conversation is released — terminated, its sandbox left up for the successor. A sandbox that
   * is gone gives the successor a new one.
   */
  async rotate(
    accountId: string,
    id: string,
    input: { title?: string; channelId?: string },
  ): Promise<EngineResult<ConversationWithSandbox>> {
    if (this.c.live.get(id)?.turn)
      return refuse('conversation_busy', 'a turn is running; wait for it or interrupt it first');
    return this.c.lock.run(id, async (): Promise<EngineResult<ConversationWithSandbox>> => {
      const db = this.c.d.db;
      const row = await getConversation(db, accountId, id);
      if (!row) return refuse('not_found', 'conversation not found');
      const conv = row.conversation;
      if (!conv.agentId) return refuse('no_agent', "the conversation's agent was deleted");
      if (conv.status === 'pending')
        return refuse('provisioning', "The conversation's sandbox is still starting; try again shortly.");
      if (this.c.live.get(id)?.turn || conv.status === 'running')
        return refuse('conversation_busy', 'a turn is running; wait for it or interrupt it first');
      const fresh = { agentId: conv.agentId, title: input.title, channelId: input.channelId };
      const s = row.sandbox;
      if (
        !s ||
        s.status === 'terminated' ||
        s.status === 'failed' ||
        conv.status === 'terminated' ||
        conv.status === 'failed'
      ) {
        const created = await this.p.provisioner.create(accountId, fresh);
        if (created.ok && conv.status !== 'terminated' && conv.status !== 'failed')
          await this.#terminateLocked(id, false);
        return created;
      }
      const live = this.c.live.get(id);
      this.c.live.delete(id);
      // The old agent exits on stdin EOF; a parked sandbox has none running.
      await live?.proc?.stop();
      const successor = await insertConversationOn(
        db,
        {
          accountId,
          agentId: conv.agentId,
          title: input.title ?? null,
          status: 'idle',
          runtime: conv.runtime,
          permissionPolicy: conv.permissionPolicy,
          source: 'api',
          channelId: input.channelId ?? null,
          // The successor keeps the sandbox, so it keeps what the sandbox was provisioned with.
          environmentId: conv.environmentId,
          launchSecrets: conv.launchSecrets,
        },
        s,
      );
      await updateConversation(db, id, { status: 'terminated', lastActiveAt: new Date() });
      // One change for the list: the successor appears, the old one is finished.
      this.c.changed(accountId);
      await this.c.sandboxTokens.revoke(id);
      this.c.events.stage(id, null, 'terminate', 'done', {
        event: 'released',
        successor_id: successor.conversation.id,
      });
      // The old conversation's log says where it went before the successor is answered.
      await this.c.events.flush();
      return accept(successor);
    });
  }

  /** Tears the sandbox down and deletes the rows (turns and events cascade). */
  async delete(accountId: string, id: string): Promise<EngineResult<void>> {
    const t = await this.terminate(accountId, id, { deleting: true });
    if (!t.ok) return t;
    await this.c.events.flush();
    const row = await getConversationById(this.c.d.db, id);
    if (row) {
      const images = await conversationImageDigests(this.c.d.db, id);
      const remove = () => deleteConversationRows(this.c.d.db, id, row.sandbox?.id ?? null);
      // Its checkpoints' blobs go with it (unless a fork's checkpoint names them too).
      if (this.c.d.checkpoints) await this.c.d.checkpoints.removeWith(id, remove);
      else await remove();
      // Its images go with it, unless another conversation's turn sent the same bytes.
      await forgetImages(this.c.d.db, this.c.d.images, images).catch((e: unknown) =>
        this.c.log.warn({ err: String(e), conversation: id }, 'could not remove the images of a deleted conversation'),
      );
      this.c.changed(accountId);
    }
    return accept(undefined);
  }
}
