/**
 * What every part of the Sprites adapter shares: the REST client, the token a handle carries,
 * the live commands and their frame delivery (so suspend and destroy can let go of their sockets),
 * and the total guard.
 */
import { randomUUID } from 'node:crypto';
import {
  Private,
  err,
  ok,
  sandboxError,
  type Command,
  type FrameSink,
  type Handle,
  type SandboxError,
  type SandboxInfo,
  type SandboxResult,
  type Session,
  type StreamFrame,
} from '../../sandbox/index.ts';
import { SpritesApi, type RawSession, type Sprite } from './api.ts';
import { resolveSpritesConfig, type ResolvedSpritesConfig, type SpritesOptions } from './config.ts';
import { ExecSocket, type ExecEvent } from './exec-socket.ts';

import { displayCommand } from './shim.ts';

/** What a Sprites handle keeps in its private part: the bearer token it was made with. */
export interface SpritesPrivate {
  readonly token: string;
}

export interface CommandState {
  readonly ref: string;
  readonly sprite: string;
  readonly token: Private<string>;
  readonly owner: FrameSink;
  sessionId: string;
  /** Carries stdin (the spawn socket itself, or the native attach socket). */
  stdinSocket: ExecSocket | null;
  sockets: ExecSocket[];
  /** Frames wait here until the caller has the Command in hand. */
  held: StreamFrame[] | null;
  done: boolean;
  stopped: boolean;
  /** Set on attach: the replayer session to reap when the attacher lets go. */
  replaySessionId?: string;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const LABELS = ['fountain'];
export const MAX_LIST_PAGES = 10_000;
export const DOMAIN = /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?$/;
export const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/;
export const internal = (): SandboxError => sandboxError('provider', 'internal_error', { provider: 'sprites' });

export const toDate = (v: string | number | null | undefined): Date | null => {
  if (v === null || v === undefined) return null;
  const d = typeof v === 'number' ? new Date(v < 1e12 ? v * 1000 : v) : new Date(v);
  return Number.isNaN(d.getTime()) ? null : d;
};

export const statusOf = (s: string | undefined): SandboxInfo['status'] => {
  if (s === 'running') return 'running';
  // Hibernated sprites: disk kept, processes gone, any call wakes them.
  if (s === 'cold' || s === 'warm' || s === 'hibernated' || s === 'suspended' || s === 'stopped') return 'suspended';
  return 'unknown';
};

export class SpritesCore {
  readonly provider = 'sprites' as const;

  readonly cfg: ResolvedSpritesConfig;

  readonly api: SpritesApi;

  readonly commands = new Map<string, CommandState>();

  constructor(opts: SpritesOptions = {}) {
    this.cfg = resolveSpritesConfig(opts);
    this.api = new SpritesApi(this.cfg);
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'sprites', name } : { provider: 'sprites', name, private: priv };
  }

  handleFor(name: string, token: Private<string>): Handle {
    return { provider: 'sprites', name, private: new Private<SpritesPrivate>({ token: token.reveal() }) };
  }

  /** The handle's own token when it carries one, else the configured one. */
  token(handle?: Handle): SandboxResult<Private<string>> {
    const p = handle?.private?.reveal();
    if (typeof p === 'object' && p !== null && typeof (p as { token?: unknown }).token === 'string') {
      const t = (p as SpritesPrivate).token.trim();
      if (t) return ok(new Private(t));
    }
    return this.cfg.token ? ok(this.cfg.token) : err(sandboxError('denied', 'missing_token'));
  }

  /** Every public operation runs through here: nothing escapes as a rejection. */
  async total<T>(fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (e) {
      this.cfg.logger?.error(
        { provider: 'sprites', err: e instanceof Error ? e.name : typeof e },
        'sprites adapter internal error',
      );
      return err(internal());
    }
  }

  newState(sprite: string, token: Private<string>, owner: FrameSink): CommandState {
    return {
      ref: randomUUID(),
      sprite,
      token,
      owner,
      sessionId: '',
      stdinSocket: null,
      sockets: [],
      held: [],
      done: false,
      stopped: false,
    };
  }

  /** Hands the Command out; frames that arrived meanwhile are released after the caller resumes. */
  register(state: CommandState): Command {
    this.commands.set(state.ref, state);
    setImmediate(() => {
      const held = state.held ?? [];
      state.held = null;
      for (const f of held) this.emit(state, f);
    });
    return { provider: 'sprites', ref: state.ref, private: new Private({ sessionId: state.sessionId }) };
  }

  deliver(state: CommandState, frame: StreamFrame): void {
    if (state.held) state.held.push(frame);
    else this.emit(state, frame);
  }

  emit(state: CommandState, frame: StreamFrame): void {
    if (state.stopped) return;
    try {
      state.owner(frame);
    } catch (e) {
      this.cfg.logger?.warn({ provider: 'sprites', err: e instanceof Error ? e.name : typeof e }, 'frame owner threw');
    }
  }

  terminal(state: CommandState, frame: StreamFrame): void {
    if (state.done) return;
    state.done = true;
    this.deliver(state, frame);
    for (const s of state.sockets) s.close();
    this.commands.delete(state.ref);
  }

  onEvent(state: CommandState, ev: ExecEvent): void {
    if (state.done) return;
    if (ev.type === 'stdout' || ev.type === 'stderr')
      this.deliver(state, { type: ev.type, ref: state.ref, data: ev.data });
    else if (ev.type === 'exit') this.terminal(state, { type: 'exit', ref: state.ref, code: ev.code });
    else if (!state.stopped) this.terminal(state, { type: 'error', ref: state.ref, error: ev.error });
  }

  /** `endReplayer`: also end the replayer session (not when its shim is being ended anyway). */
  stop(state: CommandState, endReplayer = true): void {
    state.stopped = true;
    state.done = true;
    for (const s of state.sockets) s.close();
    this.commands.delete(state.ref);
    if (endReplayer && state.replaySessionId) {
      void this.api.killSession(state.token, state.sprite, state.replaySessionId, 'KILL', 5000).catch(() => undefined);
    }
  }

  /** Drops every local socket into a sprite (its remote processes are not touched here). */
  letGo(sprite: string): void {
    for (const state of [...this.commands.values()]) if (state.sprite === sprite) this.stop(state, false);
  }
}

export const rawOf = (s: Sprite): Record<string, unknown> => {
  const raw: Record<string, unknown> = { name: s.name };
  if (s.id !== undefined) raw.id = s.id;
  if (s.status !== undefined) raw.status = s.status;
  if (s.url !== undefined) raw.url = s.url;
  if (s.created_at !== undefined) raw.created_at = s.created_at;
  if (s.updated_at !== undefined) raw.updated_at = s.updated_at;
  return raw;
};

export const toSession = (s: RawSession): Session => ({
  id: String(s.id),
  command: s.command ? displayCommand(s.command) : null,
  createdAt: toDate(s.created) ?? new Date(0),
  lastActivityAt: toDate(s.last_activity),
  tty: s.tty ?? false,
});
