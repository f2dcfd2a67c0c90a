/**
 * E2B lifecycle: names emulated with metadata and adopt-on-list (duplicates converge on the
 * oldest), pause/connect for suspend/resume.
 */

import type { CreateOptions, Handle, SandboxInfo, SandboxResult } from '../../sandbox/index.ts';
import { fail, ok } from '../../sandbox/index.ts';
import { type E2BCore, NAME_KEY, LABEL_KEY, targetSchema, targets } from './core.ts';
import type { SandboxLifecycle } from '../../sandbox/index.ts';

export class E2BLifecycle implements SandboxLifecycle {
  readonly #c: E2BCore;

  constructor(c: E2BCore) {
    this.#c = c;
  }

  create(name: string, opts: CreateOptions = {}): Promise<SandboxResult<Handle>> {
    return this.#c.guard('create', async () => {
      const found = await this.#c.lookup(name);
      if (!found.ok) return found;
      if (found.value[0]) return this.#c.handleFor(name, found.value[0].sandboxID);
      const created = await this.#c.api.createSandbox({
        templateID: opts.image ?? this.#c.o.template,
        timeout: this.#c.o.sandboxTimeoutS,
        metadata: { [LABEL_KEY]: '1', [NAME_KEY]: name },
        envVars: Object.fromEntries(opts.env ?? []),
        secure: true,
        autoPause: true,
      });
      if (!created.ok) return created;
      return this.#converge(name, created.value.sandboxID, created.value);
    });
  }

  /**
   * Two creates can both miss the lookup. Re-list and keep the oldest; kill the rest. Every
   * creator applies the same rule, so they all end up on one sandbox.
   */
  async #converge(
    name: string,
    mine: string,
    fresh: { envdAccessToken?: string | null; domain?: string | null },
  ): Promise<SandboxResult<Handle>> {
    const all = await this.#c.lookup(name);
    if (!all.ok) {
      this.#c.o.logger?.warn(
        { name, code: all.error.code },
        'e2b: could not re-list after create; duplicates may remain',
      );
      return this.#c.handleFor(name, mine, {
        envdAccessToken: fresh.envdAccessToken ?? null,
        domain: fresh.domain ?? null,
      });
    }
    const list = all.value;
    const winner = list[0]?.sandboxID ?? mine;
    const losers = list.filter((s) => s.sandboxID !== winner).map((s) => s.sandboxID);
    // Ours may not be listed yet; if it is not the winner it goes too.
    if (winner !== mine && !list.some((s) => s.sandboxID === mine)) losers.push(mine);
    for (const id of losers) {
      const k = await this.#c.api.killSandbox(id);
      if (!k.ok) this.#c.o.logger?.warn({ name, sandboxId: id, code: k.error.code }, 'e2b: could not kill a duplicate');
    }
    if (winner === mine)
      return this.#c.handleFor(name, mine, {
        envdAccessToken: fresh.envdAccessToken ?? null,
        domain: fresh.domain ?? null,
      });
    return this.#c.handleFor(name, winner);
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#c.guard('get', async () => {
      const found = await this.#c.lookup(handle.name);
      if (!found.ok) return found;
      const s = found.value[0];
      if (!s) return fail('not_found', `no e2b sandbox named ${handle.name}`);
      const status = s.state === 'running' ? 'running' : s.state === 'paused' ? 'suspended' : 'unknown';
      return ok({
        status,
        raw: {
          sandboxId: s.sandboxID,
          state: s.state,
          templateId: s.templateID ?? null,
          startedAt: s.startedAt,
          endAt: s.endAt ?? null,
        },
      });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.guard('destroy', async () => {
      const found = await this.#c.lookup(handle.name);
      if (!found.ok) return found;
      const ids = new Set(found.value.map((s) => s.sandboxID));
      const t = targetSchema.safeParse(handle.private?.reveal());
      if (t.success) ids.add(t.data.sandboxId);
      for (const id of ids) {
        const k = await this.#c.api.killSandbox(id);
        if (!k.ok) return k;
      }
      return ok(undefined);
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#c.guard('list_all_names', async () => {
      const all = await this.#c.api.listSandboxes({ [LABEL_KEY]: '1' });
      if (!all.ok) return all;
      const names = new Set<string>();
      for (const s of all.value) {
        const n = s.metadata?.[NAME_KEY];
        if (n) names.add(n);
      }
      return ok([...names]);
    });
  }

  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.guard('suspend', async () => {
      const t = await this.#c.target(handle);
      if (!t.ok) return t;
      // Every envd stream drops at the pause anyway, but one envd has not yet seen close is
      // snapshotted and wedges its process's output fan-out after resume (infra#3292): close
      // them first. Their commands end in closed_before_exit and reattach later.
      const mine = [...this.#c.live].filter((l) => targets.get(l)?.sandboxId === t.value.sandboxId);
      await Promise.all(mine.map((l) => l.drop('sandbox paused')));
      const p = await this.#c.api.pauseSandbox(t.value.sandboxId);
      return p.ok ? ok(undefined) : p;
    });
  }

  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#c.guard('resume', async () => {
      const found = await this.#c.lookup(handle.name);
      if (!found.ok) return found;
      const s = found.value[0];
      if (!s) return fail('not_found', `no e2b sandbox named ${handle.name}`);
      const c = await this.#c.api.connectSandbox(s.sandboxID, this.#c.o.sandboxTimeoutS);
      if (!c.ok) return c;
      // The token and domain may change across a pause: take them from this reply.
      const fresh =
        c.value.envdAccessToken === undefined
          ? undefined
          : { envdAccessToken: c.value.envdAccessToken, domain: c.value.domain };
      return this.#c.handleFor(handle.name, c.value.sandboxID || s.sandboxID, fresh);
    });
  }
}
