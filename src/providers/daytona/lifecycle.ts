/**
 * Daytona lifecycle: labelled, name-keyed sandboxes; create adopts (and starts a parked one),
 * stop for suspend, start for resume, waiting on the platform's states.
 */

import type { CreateOptions, Handle, SandboxInfo, SandboxResult } from '../../sandbox/index.ts';
import { fail, ok } from '../../sandbox/index.ts';
import type { SandboxDto } from './schemas.ts';
import { type DaytonaCore, FOUNTAIN_LABELS, GONE_STATES, PARKED_STATES, FAILED_STATES, sleep } from './core.ts';
import type { SandboxLifecycle } from '../../sandbox/index.ts';

export class DaytonaLifecycle implements SandboxLifecycle {
  readonly #c: DaytonaCore;

  constructor(c: DaytonaCore) {
    this.#c = c;
  }

  create(name: string, opts: CreateOptions = {}): Promise<SandboxResult<Handle>> {
    return this.#c.guard('create', async () => {
      const env = Object.fromEntries(opts.env ?? []);
      const snapshot = opts.image?.trim() || this.#c.cfg.snapshot;
      for (let attempt = 0; attempt < 4; attempt++) {
        const r = await this.#c.client.createSandbox({
          name,
          ...(snapshot ? { snapshot } : {}),
          labels: FOUNTAIN_LABELS,
          ...(Object.keys(env).length > 0 ? { env } : {}),
          // Daytona stops an idle sandbox after 15 min by default and counts only API traffic as
          // activity, so a long agent turn would be parked under it; Fountain owns suspend.
          autoStopInterval: 0,
          autoDeleteInterval: -1,
        });
        if (!r.ok) return r;
        let sandbox: SandboxDto;
        if (r.value.kind === 'created') sandbox = r.value.sandbox;
        else {
          // 409: the name exists in the organisation. Adopt it, unless it is on its way out.
          const g = await this.#c.client.getSandbox(name);
          if (!g.ok && g.error.code === 'not_found') continue;
          if (!g.ok) return g;
          if (GONE_STATES.has(g.value.state ?? '')) {
            const gone = await this.#waitGone(name);
            if (!gone.ok) return gone;
            continue;
          }
          sandbox = g.value;
        }
        const started = await this.#ensureStarted(sandbox);
        if (!started.ok) return started;
        return ok(this.#c.handleFor(name, started.value));
      }
      return fail('unavailable', 'create: name kept conflicting with a sandbox being deleted');
    });
  }

  get(handle: Handle): Promise<SandboxResult<SandboxInfo>> {
    return this.#c.guard('get', async () => {
      const r = await this.#c.client.getSandbox(handle.name);
      if (!r.ok) return r;
      const s = r.value;
      const state = s.state ?? 'unknown';
      if (GONE_STATES.has(state)) return fail('not_found');
      const status = state === 'started' ? 'running' : PARKED_STATES.has(state) ? 'suspended' : 'unknown';
      // Only non-secret fields: the DTO's env may carry the agent's credentials.
      const raw: Record<string, unknown> = { id: s.id, name: s.name ?? handle.name, state };
      if (s.desiredState !== undefined) raw.desiredState = s.desiredState;
      if (s.errorReason) raw.errorReason = s.errorReason;
      if (s.snapshot) raw.snapshot = s.snapshot;
      return ok({ status, raw });
    });
  }

  destroy(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.guard('destroy', async () => {
      this.#c.forget(handle.name);
      const r = await this.#c.client.deleteSandbox(handle.name);
      if (!r.ok) return r;
      if (r.value === 'absent') return ok(undefined);
      const gone = await this.#waitGone(handle.name);
      return gone.ok ? ok(undefined) : gone;
    });
  }

  listAllNames(): Promise<SandboxResult<string[]>> {
    return this.#c.guard('list_all_names', async () => {
      const names = new Set<string>();
      const seen = new Set<string>();
      let cursor: string | null = null;
      for (let page = 0; page < 1000; page++) {
        const r = await this.#c.client.listSandboxes(FOUNTAIN_LABELS, cursor, 200);
        if (!r.ok) return r;
        for (const s of r.value.items) if (!GONE_STATES.has(s.state ?? '')) names.add(s.name ?? s.id);
        const next = r.value.nextCursor ?? null;
        if (!next) return ok([...names]);
        // A cursor that comes back twice would loop forever; refuse rather than return a partial set.
        if (seen.has(next)) return fail('truncated');
        seen.add(next);
        cursor = next;
      }
      return fail('truncated');
    });
  }

  suspend(handle: Handle): Promise<SandboxResult<void>> {
    return this.#c.guard('suspend', async () => {
      this.#c.forget(handle.name);
      const g = await this.#c.client.getSandbox(handle.name);
      if (!g.ok) return g;
      const state = g.value.state ?? '';
      if (GONE_STATES.has(state)) return fail('not_found');
      if (PARKED_STATES.has(state)) return ok(undefined);
      if (state !== 'stopping') {
        // Stop keeps the disk; it also kills every process and the daemon's sessions.
        const s = await this.#c.client.lifecycle(g.value.id, 'stop');
        if (!s.ok) return s;
      }
      const w = await this.#c.waitState(handle.name, (st) => PARKED_STATES.has(st));
      return w.ok ? ok(undefined) : w;
    });
  }

  resume(handle: Handle): Promise<SandboxResult<Handle>> {
    return this.#c.guard('resume', async () => {
      this.#c.forget(handle.name);
      const g = await this.#c.client.getSandbox(handle.name);
      if (!g.ok) return g;
      if (GONE_STATES.has(g.value.state ?? '')) return fail('not_found');
      const started = await this.#ensureStarted(g.value);
      if (!started.ok) return started;
      // The toolbox proxy may differ after a start: the fresh handle carries the re-read URL.
      return ok(this.#c.handleFor(handle.name, started.value));
    });
  }

  async #ensureStarted(s: SandboxDto): Promise<SandboxResult<SandboxDto>> {
    const state = s.state ?? '';
    if (state === 'started') return ok(s);
    if (FAILED_STATES.has(state))
      return fail('provider', `sandbox ${state}: ${s.errorReason ?? ''}`.trim(), { provider: 'daytona' });
    if (PARKED_STATES.has(state)) {
      const st = await this.#c.client.lifecycle(s.id, 'start');
      if (!st.ok) return st;
    }
    return this.#c.waitState(s.name ?? s.id, (st) => st === 'started');
  }

  async #waitGone(name: string): Promise<SandboxResult<void>> {
    const deadline = Date.now() + this.#c.cfg.lifecycleTimeoutMs;
    for (;;) {
      const g = await this.#c.client.getSandbox(name);
      if (!g.ok && g.error.code === 'not_found') return ok(undefined);
      if (g.ok && g.value.state === 'destroyed') return ok(undefined);
      if (!g.ok && (g.error.code === 'denied' || g.error.code === 'invalid')) return g;
      if (Date.now() >= deadline) return fail('unavailable', 'destroy_timeout');
      await sleep(this.#c.cfg.statePollMs);
    }
  }
}
