/**
 * The host seam between the runner provider and whatever holds live runner sockets:
 * a registry of connections keyed by runner id, plus the heartbeat and presence hooks.
 */
import type { SandboxResult } from '../../sandbox/index.ts';
import type { Request, RunnerCapability } from '../../wire/index.ts';

/** What the provider knows about a connected runner. */
export interface RunnerInfo {
  readonly runnerId: string;
  readonly accountId: string;
  readonly name: string;
  readonly connectedAt: Date;
  /** What the daemon advertised in its dial (`capabilities=`); absent: the upstream set, suspend and attach. */
  readonly capabilities?: readonly RunnerCapability[];
}

/** A request without its id: the connection numbers requests itself. */
export type OutgoingRequest = Request extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

/** Receives one subscription's stream frames (already base64-decoded), then its end. */
export interface SessionListener {
  output(stream: 'stdout' | 'stderr', data: Buffer): void;
  exit(code: number): void;
  /** The socket closed with the subscription live: no exit follows. */
  disconnected(detail: 'runner_disconnected'): void;
}

/**
 * The server end of one runner's WebSocket. Implemented in connection.ts; a remote node's
 * proxy may implement it too, so callers never assume the socket is in this process.
 */
export interface RunnerConnection {
  readonly info: RunnerInfo;
  /**
   * Sends a request and resolves with the reply's result. Transport failures are
   * `unavailable(runner_disconnected | runner_timeout)`, never `not_found`.
   * For spawn and attach, `listener` is subscribed before the reply resolves, so no frame is missed.
   */
  call(
    request: OutgoingRequest,
    opts?: { timeoutMs?: number | null; listener?: SessionListener },
  ): Promise<SandboxResult<Record<string, unknown>>>;
  /** Drops one listener; when a session has none left the connection sends `detach` (id 0). */
  unsubscribe(sessionId: string, listener: SessionListener): void;
  /** Closes the socket with a close code (4404 runner deleted, 4409 already connected, ...). */
  close(code: number, reason: string): void;
}

export interface RunnerHost {
  /** False when a connection for this runner id is already registered (the caller closes with 4409). */
  register(conn: RunnerConnection): boolean;
  /** Removes the connection only if it is the one registered (a late close must not evict a newer socket). */
  unregister(conn: RunnerConnection): void;
  whereis(runnerId: string): RunnerConnection | undefined;
  /** Online runners, most recently connected first, then by name; optionally for one account. */
  online(accountId?: string): RunnerInfo[];
  /**
   * Called every heartbeat interval while the socket is up; the platform stamps last_seen_at.
   * May be async (typed void so any hook fits): the connection catches and logs a rejection.
   */
  heartbeat(info: RunnerInfo): void;
  /** Called after register (online) and after unregister (offline). May be async, like heartbeat. */
  presence(info: RunnerInfo, state: 'online' | 'offline'): void;
}

export interface LocalRunnerHostHooks {
  heartbeat?(info: RunnerInfo): void;
  presence?(info: RunnerInfo, state: 'online' | 'offline'): void;
}

/** The in-process registry: enough for one node, and the reference the tests use. */
export class LocalRunnerHost implements RunnerHost {
  readonly #conns = new Map<string, RunnerConnection>();
  readonly #hooks: LocalRunnerHostHooks;

  constructor(hooks: LocalRunnerHostHooks = {}) {
    this.#hooks = hooks;
  }

  register(conn: RunnerConnection): boolean {
    if (this.#conns.has(conn.info.runnerId)) return false;
    this.#conns.set(conn.info.runnerId, conn);
    return true;
  }

  unregister(conn: RunnerConnection): void {
    if (this.#conns.get(conn.info.runnerId) === conn) this.#conns.delete(conn.info.runnerId);
  }

  whereis(runnerId: string): RunnerConnection | undefined {
    return this.#conns.get(runnerId);
  }

  online(accountId?: string): RunnerInfo[] {
    return [...this.#conns.values()]
      .map((c) => c.info)
      .filter((i) => accountId === undefined || i.accountId === accountId)
      .sort((a, b) => b.connectedAt.getTime() - a.connectedAt.getTime() || a.name.localeCompare(b.name));
  }

  /** Passes an async hook's promise through, so the connection can catch its rejection. */
  heartbeat(info: RunnerInfo): void {
    return this.#hooks.heartbeat?.(info);
  }

  presence(info: RunnerInfo, state: 'online' | 'offline'): void {
    return this.#hooks.presence?.(info, state);
  }
}
