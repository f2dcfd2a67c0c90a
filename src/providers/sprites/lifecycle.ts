/**
 * Sprites lifecycle: name-keyed sprites, adopt on 409/400, paged listing that refuses a partial
 * view, and suspend as "end every session and let the sprite hibernate by itself".
 */

import {
  err,
  ok,
  sandboxError,
  type CreateOptions,
  type Handle,
  type SandboxInfo,
  type SandboxResult,
} from '../../sandbox/index.ts';

import { isReplayer } from './shim.ts';
import { type SpritesCore, LABELS, MAX_LIST_PAGES, statusOf, rawOf } from './core.ts';
import type { SandboxLifecycle, SandboxProcesses } from '../../sandbox/index.ts';

export class SpritesLifecycle implements SandboxLifecycle {
  readonly #c: SpritesCore;
  /** Resume proves the sprite is awake with one trivial exec. */
  readonly #processes: SandboxProcesses;

  constructor(c: SpritesCore, processes: SandboxProcesses) {
    this.#c = c;
    this.#processes = processes;
  }

  create(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    return this.#c.total(async () => {
      const token = this.#c.token();
      if (!token.ok) return token;
      const r = await this.#c.api.createSprite(token.value, name, LABELS);
      if (!r.ok) return r;
      if (r.value.sprite) return ok(this.#c.handleFor(name, token.value));
      // A name that exists comes back 409 (reported) or 400 (seen): adopt it if it is there.
      const existing = await this.#c.api.getSprite(token.value, name);
      if (existing.ok) return ok(this.#c.handleFor(name, token.value));
      if (existing.error.code === 'not_found') return err(sandboxError('invalid', `create_rejected_${r.value.status}`));
      return existing;
    });
  }

  createNew(name: string, _opts?: CreateOptions): Promise<SandboxResult<Handle>> {
    return this.#c.total(async () => {
      const token = this.#c.token();
      if (!token.ok) return token;
      const r = await this.#c.api.createSprite(token.value, name, LABELS);
      if (!r.ok) return r;
      if (!r.value.sprite) {
        return err(
          r.value.status === 409 ? sandboxError('already_exists') : sandboxError('invalid', 'create_rejected_400'),
        );
      }
      if (!r.value.sprite.id) return err(sandboxError('provider', 'bad_reply_sprite_id', { provider: 'sprites' }));
      return ok({ ...this.#c.handleFor(name, token.value), instanceId: r.value.sprite.id });
    });
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      const r = await this.#c.api.getSprite(token.value, handle.name);
      if (!r.ok) return r;
      return ok({ status: statusOf(r.value.status), raw: rawOf(r.value) });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      this.#c.letGo(handle.name);
      return this.#c.api.deleteSprite(token.value, handle.name);
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#c.total(async () => {
      const token = this.#c.token();
      if (!token.ok) return token;
      const prefix = this.#c.cfg.namePrefix;
      const names = new Set<string>();
      const seen = new Set<string>();
      let continuation: string | null = null;
      for (let page = 0; page < MAX_LIST_PAGES; page++) {
        const r = await this.#c.api.listPage(token.value, prefix, this.#c.cfg.pageSize, continuation);
        if (!r.ok) return r;
        for (const s of r.value.sprites) if (s.name.startsWith(prefix)) names.add(s.name);
        if (!r.value.has_more) return ok([...names]);
        // More pages promised but no way to reach them: refuse rather than return a partial view.
        const next = r.value.next_continuation_token;
        if (!next || seen.has(next)) return err(sandboxError('truncated'));
        seen.add(next);
        continuation = next;
      }
      return err(sandboxError('truncated'));
    });
  }

  /**
   * Sprites has no suspend call: it hibernates a sprite that has been idle ~30 s, keeping the
   * disk but not the processes. A live session keeps it awake (and billed), so suspend ends
   * every session in the sprite and drops our sockets; hibernation then follows on its own.
   */
  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      const sessions = await this.#c.api.listSessions(token.value, handle.name);
      if (!sessions.ok) return sessions;
      // Replayers end with their shim; killing one that already ended answers 410. A kill that
      // fails leaves one session running (kept awake, not lost): a failed suspend would instead
      // become a destroy of the sprite and its disk, so it never fails on one session.
      for (const s of sessions.value) {
        if (isReplayer(s.command)) continue;
        const k = await this.#c.api.killSession(token.value, handle.name, String(s.id), 'TERM', 10_000);
        if (!k.ok || k.value === 'unconfirmed') {
          this.#c.cfg.logger?.warn(
            { provider: 'sprites', sessionId: String(s.id), code: k.ok ? 'unconfirmed' : k.error.code },
            'suspend: a session did not end',
          );
        }
      }
      this.#c.letGo(handle.name);
      return ok(undefined);
    });
  }

  /** Resuming is implicit in Sprites (any exec wakes the sprite); one trivial exec proves it is back. */
  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#c.total(async () => {
      const token = this.#c.token(handle);
      if (!token.ok) return token;
      const g = await this.#c.api.getSprite(token.value, handle.name);
      if (!g.ok) return g;
      // A fast command may close without its exit frame (sprites-py#16): one more probe decides.
      let woke = await this.#processes.exec(handle, 'true', []);
      if (!woke.ok && woke.error.code === 'closed_before_exit') woke = await this.#processes.exec(handle, 'true', []);
      if (!woke.ok) return woke;
      return ok(this.#c.buildHandle(handle.name, handle.private));
    });
  }
}
