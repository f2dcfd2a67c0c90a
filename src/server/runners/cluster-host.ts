/**
 * The RunnerHost for several nodes sharing one PostgreSQL: a registrations table says which node
 * holds each runner's socket; calls to a runner held elsewhere go to that node over NOTIFY.
 *
 * Over 400 lines on purpose: the registry, the proxies, the calls in flight and the forwarded
 * streams are one state that every cluster message changes together (a presence message ends the
 * calls and streams of its runner); split, each part would need the others' private maps.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { alreadyConnectedReason } from '../../providers/runner/connection.ts';
import type {
  OutgoingRequest,
  RunnerConnection,
  RunnerHost,
  RunnerInfo,
  SessionListener,
} from '../../providers/runner/host.ts';
import { RUNNER_DISCONNECTED, RUNNER_TIMEOUT } from '../../providers/runner/errors.ts';
import { err, fail, ok, sandboxError, type SandboxResult } from '../../sandbox/index.ts';
import { CLOSE, decodeBase64, encodeBase64 } from '../../wire/index.ts';
import { clusterMessageSchema, type ClusterMessage, type ParsedClusterMessage } from '../cluster/messages.ts';
import { NotifyTransport, ORPHAN_MESSAGE_TTL_S } from '../cluster/transport.ts';
import type { PgNotify } from '../cluster/notify.ts';
import { EventBus, runnersTopic } from '../cluster/bus.ts';
import type { Db } from '../store/db.ts';
import { touchRunner } from './store.ts';

/** What a node-to-node request came back with. */
export type NodeReply =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly reason: string };

export interface ClusterHostOptions {
  /** The node's identity (cluster/node.ts), minted once by the composition root. */
  readonly nodeId: string;
  /** The node's one notification connection. */
  readonly notify: PgNotify;
  readonly schema: string | undefined;
  readonly db: Db;
  readonly bus: EventBus;
  readonly logger: Logger;
  /** Node heartbeat and registry refresh interval; registrations expire after `EXPIRY_BEATS` of them. */
  readonly heartbeatMs: number;
  /** A remote call without its own timeout waits this long (plus a grace) before runner_timeout. */
  readonly callTimeoutMs: number;
  /**
   * FOUNTAIN_NODE_EXPIRY_MS: a node whose server_nodes heartbeat is older is lost, and the streams this
   * node forwards to it end (its turns were adopted by another node, which attached on its own).
   */
  readonly nodeExpiryMs: number;
}

/** A node that misses this many heartbeats in a row has its registrations expired by any other node. */
export const EXPIRY_BEATS = 3;
/** The owning node times the call itself; the caller's own guard only covers that node dying. */
const REMOTE_GRACE_MS = 5_000;
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Registration {
  readonly info: RunnerInfo;
  readonly nodeId: string;
  readonly token: string;
}

interface RegistrationRow {
  runner_id: string;
  node_id: string;
  conn_token: string;
  account_id: string;
  name: string;
  connected_at: Date;
  capabilities: RunnerInfo['capabilities'] | null;
}

const fromRow = (r: RegistrationRow): Registration => ({
  nodeId: r.node_id,
  token: r.conn_token,
  info: {
    runnerId: r.runner_id,
    accountId: r.account_id,
    name: r.name,
    connectedAt: new Date(r.connected_at),
    ...(r.capabilities ? { capabilities: r.capabilities } : {}),
  },
});

interface OutboundCall {
  readonly proxy: RemoteRunnerConnection;
  readonly resolve: (r: SandboxResult<Record<string, unknown>>) => void;
  timer: NodeJS.Timeout | undefined;
}

interface RemoteSubscription {
  readonly proxy: RemoteRunnerConnection;
  readonly listener: SessionListener;
  sessionId: string | undefined;
}

interface ServedSubscription {
  readonly runnerId: string;
  readonly from: string;
  readonly forward: SessionListener;
  sessionId: string | undefined;
}

export class ClusterRunnerHost implements RunnerHost {
  readonly nodeId: string;
  readonly #opts: ClusterHostOptions;
  readonly #log: Logger;
  #transport!: NotifyTransport;
  /** Sockets this node holds. */
  readonly #local = new Map<string, RunnerConnection>();
  /** Whether this node's row won the registration (false: another node holds the runner). */
  readonly #claims = new WeakMap<RunnerInfo, Promise<boolean>>();
  readonly #tokens = new WeakMap<RunnerInfo, string>();
  /** Live registrations cluster-wide, this node's included: the synchronous view the interface needs. */
  #registry = new Map<string, Registration>();
  readonly #proxies = new Map<string, RemoteRunnerConnection>();
  readonly #outbound = new Map<string, OutboundCall>();
  readonly #remoteSubs = new Map<string, RemoteSubscription>();
  readonly #served = new Map<string, ServedSubscription>();
  readonly #work = new Set<Promise<unknown>>();
  /** Node-to-node requests of other features (commands to a conversation's owner), by correlation id. */
  readonly #requests = new Map<string, { resolve: (r: NodeReply) => void; timer: NodeJS.Timeout }>();
  #serveRequest: ((payload: unknown) => Promise<unknown>) | null = null;
  #unreconnect: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  private constructor(opts: ClusterHostOptions) {
    this.nodeId = opts.nodeId;
    this.#opts = opts;
    this.#log = opts.logger.child({ node: this.nodeId });
  }

  static async start(opts: ClusterHostOptions): Promise<ClusterRunnerHost> {
    const host = new ClusterRunnerHost(opts);
    host.#transport = await NotifyTransport.open({
      notify: opts.notify,
      schema: opts.schema,
      nodeId: host.nodeId,
      logger: host.#log,
      onMessage: (_channel, body) => host.#onMessage(body),
    });
    try {
      await host.#refresh();
    } catch (e) {
      await host.#transport.close();
      throw e;
    }
    host.#timer = setInterval(() => host.#track(host.#refresh()), opts.heartbeatMs);
    host.#timer.unref();
    // Presence and calls sent while the connection was down are gone: re-read the registry at once.
    host.#unreconnect = opts.notify.onReconnect(() => host.#track(host.#refresh()));
    return host;
  }

  get #ttlMs(): number {
    return this.#opts.heartbeatMs * EXPIRY_BEATS;
  }

  register(conn: RunnerConnection): boolean {
    const info = conn.info;
    if (this.#stopped || this.#local.has(info.runnerId)) return false;
    const known = this.#registry.get(info.runnerId);
    if (known && known.nodeId !== this.nodeId) return false;
    const token = randomUUID();
    this.#local.set(info.runnerId, conn);
    this.#registry.set(info.runnerId, { info, nodeId: this.nodeId, token });
    this.#tokens.set(info, token);
    // The table is the arbiter: two nodes may both pass the cached check, only one row wins.
    const claim = this.#transport
      .query(
        `INSERT INTO runner_registrations (runner_id, node_id, conn_token, account_id, name, connected_at, capabilities, heartbeat_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, now())
         ON CONFLICT (runner_id) DO UPDATE SET node_id = EXCLUDED.node_id, conn_token = EXCLUDED.conn_token,
           account_id = EXCLUDED.account_id, name = EXCLUDED.name, connected_at = EXCLUDED.connected_at,
           capabilities = EXCLUDED.capabilities, heartbeat_at = now()
         WHERE runner_registrations.node_id = $2 OR runner_registrations.heartbeat_at < now() - make_interval(secs => $8)
         RETURNING runner_id`,
        [
          info.runnerId,
          this.nodeId,
          token,
          info.accountId,
          info.name,
          info.connectedAt,
          info.capabilities ? JSON.stringify(info.capabilities) : null,
          this.#ttlMs / 1000,
        ],
      )
      .then(
        (r) => r.rowCount === 1,
        (e: unknown) => {
          this.#log.error({ err: String(e), runnerId: info.runnerId }, 'runner registration row not written');
          return false;
        },
      )
      .then((won) => {
        if (!won && this.#local.get(info.runnerId) === conn) {
          this.#local.delete(info.runnerId);
          if (this.#registry.get(info.runnerId)?.token === token) this.#registry.delete(info.runnerId);
          conn.close(CLOSE.alreadyConnected, alreadyConnectedReason(info.name));
        }
        return won;
      });
    this.#claims.set(info, claim);
    this.#track(claim);
    return true;
  }

  unregister(conn: RunnerConnection): void {
    const info = conn.info;
    if (this.#local.get(info.runnerId) !== conn) return;
    this.#local.delete(info.runnerId);
    const token = this.#tokens.get(info);
    if (this.#registry.get(info.runnerId)?.token === token) this.#registry.delete(info.runnerId);
    this.#track(
      this.#transport
        .query('DELETE FROM runner_registrations WHERE runner_id = $1 AND conn_token = $2', [info.runnerId, token])
        .catch((e: unknown) =>
          this.#log.warn({ err: String(e), runnerId: info.runnerId }, 'runner registration row not removed'),
        ),
    );
  }

  whereis(runnerId: string): RunnerConnection | undefined {
    const local = this.#local.get(runnerId);
    if (local) return local;
    const reg = this.#registry.get(runnerId);
    if (!reg || reg.nodeId === this.nodeId || this.#stopped) return undefined;
    let proxy = this.#proxies.get(runnerId);
    if (!proxy || proxy.token !== reg.token) {
      proxy = new RemoteRunnerConnection(this, reg);
      this.#proxies.set(runnerId, proxy);
    }
    return proxy;
  }

  online(accountId?: string): RunnerInfo[] {
    return [...this.#registry.values()]
      .map((r) => r.info)
      .filter((i) => accountId === undefined || i.accountId === accountId)
      .sort((a, b) => b.connectedAt.getTime() - a.connectedAt.getTime() || a.name.localeCompare(b.name));
  }

  /** Only the runners whose sockets this node holds (what shutdown closes). */
  localRunners(): RunnerInfo[] {
    return [...this.#local.values()].map((c) => c.info);
  }

  heartbeat(info: RunnerInfo): void {
    this.#track(
      Promise.all([
        touchRunner(this.#opts.db, info.runnerId),
        this.#transport.query(
          'UPDATE runner_registrations SET heartbeat_at = now() WHERE runner_id = $1 AND node_id = $2',
          [info.runnerId, this.nodeId],
        ),
      ]).catch((e: unknown) =>
        this.#log.warn({ err: String(e), runnerId: info.runnerId }, 'could not stamp runner heartbeat'),
      ),
    );
  }

  presence(info: RunnerInfo, state: 'online' | 'offline'): void {
    const claim = this.#claims.get(info) ?? Promise.resolve(false);
    const token = this.#tokens.get(info) ?? '';
    this.#track(
      claim.then(async (won) => {
        if (!won) return;
        this.#deliver(info, state);
        if (state === 'offline') this.#log.info({ runner: info.name, runnerId: info.runnerId }, 'runner disconnected');
        await this.#send('broadcast', {
          k: 'presence',
          node: this.nodeId,
          token,
          state,
          info: { ...info, connectedAt: info.connectedAt.toISOString() } as never,
        });
      }),
    );
  }

  /** Closes this node's sockets (1001), removes its rows, announces them offline, and leaves the cluster. */
  async shutdown(): Promise<void> {
    if (this.#stopped) return;
    if (this.#timer) clearInterval(this.#timer);
    this.#unreconnect?.();
    for (const conn of [...this.#local.values()]) conn.close(CLOSE.goingAway, 'server shutting down');
    this.#stopped = true;
    for (const [cid, r] of [...this.#requests]) {
      clearTimeout(r.timer);
      this.#requests.delete(cid);
      r.resolve({ ok: false, reason: 'this node is stopping' });
    }
    for (const id of [...this.#outbound.keys()]) this.#settle(id, fail('unavailable', RUNNER_DISCONNECTED));
    for (const [cid, sub] of [...this.#remoteSubs]) this.#dropSub(cid, sub, 'disconnected');
    while (this.#work.size) await Promise.allSettled([...this.#work]);
    await this.#transport
      .query('DELETE FROM runner_registrations WHERE node_id = $1', [this.nodeId])
      .catch(() => undefined);
    await this.#transport.close();
  }

  // --- calls from this node to a runner held elsewhere -----------------------------------------

  /** @internal used by RemoteRunnerConnection */
  remoteCall(
    proxy: RemoteRunnerConnection,
    request: OutgoingRequest,
    opts: { timeoutMs?: number | null; listener?: SessionListener },
  ): Promise<SandboxResult<Record<string, unknown>>> {
    if (this.#stopped || this.#registry.get(proxy.info.runnerId)?.token !== proxy.token) {
      return Promise.resolve(fail('unavailable', RUNNER_DISCONNECTED));
    }
    const cid = randomUUID();
    return new Promise((resolve) => {
      const call: OutboundCall = { proxy, resolve, timer: undefined };
      this.#outbound.set(cid, call);
      if (opts.listener) this.#remoteSubs.set(cid, { proxy, listener: opts.listener, sessionId: undefined });
      const limit = opts.timeoutMs === undefined ? this.#opts.callTimeoutMs : opts.timeoutMs;
      if (limit !== null && limit + REMOTE_GRACE_MS <= MAX_TIMER_MS) {
        call.timer = setTimeout(
          () => this.#settle(cid, fail('unavailable', RUNNER_TIMEOUT)),
          Math.max(0, limit) + REMOTE_GRACE_MS,
        );
      }
      const msg: ClusterMessage = {
        k: 'call',
        from: this.nodeId,
        cid,
        runnerId: proxy.info.runnerId,
        request: request as Record<string, unknown> & { op: string },
        sub: opts.listener !== undefined,
        ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      };
      this.#send(proxy.nodeId, msg).catch(() => this.#settle(cid, fail('unavailable', RUNNER_DISCONNECTED)));
    });
  }

  /** @internal */
  remoteUnsubscribe(proxy: RemoteRunnerConnection, sessionId: string, listener: SessionListener): void {
    for (const [cid, sub] of this.#remoteSubs) {
      if (sub.proxy.info.runnerId !== proxy.info.runnerId || sub.listener !== listener || sub.sessionId !== sessionId)
        continue;
      this.#remoteSubs.delete(cid);
      this.#track(this.#send(proxy.nodeId, { k: 'unsub', cid, runnerId: proxy.info.runnerId }).catch(() => undefined));
    }
  }

  /** @internal */
  remoteClose(proxy: RemoteRunnerConnection, code: number, reason: string): void {
    // Not routable from here any more, even before the owner confirms with its offline presence.
    if (this.#registry.get(proxy.info.runnerId)?.token === proxy.token) this.#registry.delete(proxy.info.runnerId);
    this.#failRunner(proxy.info.runnerId);
    this.#track(
      this.#send(proxy.nodeId, { k: 'close', runnerId: proxy.info.runnerId, token: proxy.token, code, reason }).catch(
        (e: unknown) => this.#log.warn({ err: String(e), runnerId: proxy.info.runnerId }, 'remote close not sent'),
      ),
    );
  }

  #settle(cid: string, result: SandboxResult<Record<string, unknown>>): void {
    const call = this.#outbound.get(cid);
    if (!call) return;
    this.#outbound.delete(cid);
    if (call.timer) clearTimeout(call.timer);
    const sub = this.#remoteSubs.get(cid);
    if (sub) {
      const sessionId = result.ok ? result.value.session_id : undefined;
      if (typeof sessionId === 'string' && sessionId.length > 0) sub.sessionId = sessionId;
      else this.#remoteSubs.delete(cid);
    }
    call.resolve(result);
  }

  #dropSub(cid: string, sub: RemoteSubscription, how: 'disconnected'): void {
    this.#remoteSubs.delete(cid);
    if (how === 'disconnected') guard(this.#log, () => sub.listener.disconnected(RUNNER_DISCONNECTED));
  }

  /** The runner left its node (or the node died): every call and stream through a proxy ends. */
  #failRunner(runnerId: string): void {
    for (const [cid, call] of [...this.#outbound])
      if (call.proxy.info.runnerId === runnerId) this.#settle(cid, fail('unavailable', RUNNER_DISCONNECTED));
    for (const [cid, sub] of [...this.#remoteSubs])
      if (sub.proxy.info.runnerId === runnerId) this.#dropSub(cid, sub, 'disconnected');
    this.#proxies.delete(runnerId);
  }

  // --- messages from other nodes ----------------------------------------------------------------

  #onMessage(body: string): void {
    let parsed: ParsedClusterMessage;
    try {
      const r = clusterMessageSchema.safeParse(JSON.parse(body));
      if (!r.success) throw new Error(r.error.message);
      parsed = r.data;
    } catch (e) {
      this.#log.warn({ err: e instanceof Error ? e.message : String(e) }, 'ignoring a malformed cluster message');
      return;
    }
    const m = parsed;
    switch (m.k) {
      case 'call':
        this.#track(this.#serve(m));
        return;
      case 'reply':
        this.#settle(
          m.cid,
          m.result.ok
            ? ok(m.result.value)
            : err(
                sandboxError(m.result.error.code, m.result.error.detail, {
                  ...(m.result.error.retryAfterMs !== undefined ? { retryAfterMs: m.result.error.retryAfterMs } : {}),
                  ...(m.result.error.provider !== undefined ? { provider: m.result.error.provider } : {}),
                }),
              ),
        );
        return;
      case 'out': {
        const sub = this.#remoteSubs.get(m.cid);
        const data = decodeBase64(m.data);
        if (sub && data) guard(this.#log, () => sub.listener.output(m.stream, data));
        return;
      }
      case 'exit': {
        const sub = this.#remoteSubs.get(m.cid);
        this.#remoteSubs.delete(m.cid);
        if (sub) guard(this.#log, () => sub.listener.exit(m.code));
        return;
      }
      case 'disc': {
        const sub = this.#remoteSubs.get(m.cid);
        if (sub) this.#dropSub(m.cid, sub, 'disconnected');
        return;
      }
      case 'unsub':
        this.#endServed(m.cid);
        return;
      case 'close': {
        const conn = this.#local.get(m.runnerId);
        if (conn && this.#tokens.get(conn.info) === m.token) conn.close(m.code, m.reason);
        return;
      }
      case 'req':
        this.#track(this.#answer(m.from, m.cid, m.payload));
        return;
      case 'res': {
        const r = this.#requests.get(m.cid);
        if (!r) return;
        clearTimeout(r.timer);
        this.#requests.delete(m.cid);
        r.resolve(m.ok ? { ok: true, value: m.value } : { ok: false, reason: m.reason ?? 'the other node failed' });
        return;
      }
      case 'presence': {
        if (m.node === this.nodeId) return;
        const info: RunnerInfo = { ...m.info, ...(m.info.capabilities ? { capabilities: m.info.capabilities } : {}) };
        if (m.state === 'online') {
          if (!this.#local.has(info.runnerId))
            this.#registry.set(info.runnerId, { info, nodeId: m.node, token: m.token });
        } else {
          if (this.#registry.get(info.runnerId)?.token === m.token) this.#registry.delete(info.runnerId);
          this.#failRunner(info.runnerId);
        }
        this.#deliver(info, m.state);
        return;
      }
    }
  }

  #endServed(cid: string): void {
    const served = this.#served.get(cid);
    if (!served) return;
    this.#served.delete(cid);
    if (served.sessionId) this.#local.get(served.runnerId)?.unsubscribe(served.sessionId, served.forward);
  }

  /**
   * Ends the streams this node forwards to lost nodes: a node killed mid-stream never unsubscribes, and
   * its agent's output would otherwise go on crossing NOTIFY to nobody. A node with no row at all (one
   * that left cleanly unsubscribed first; an older version writes none) keeps its streams.
   */
  async forgetLostNodes(): Promise<void> {
    const from = [...new Set([...this.#served.values()].map((s) => s.from))];
    if (from.length === 0) return;
    const lost = await this.#transport.query<{ node_id: string }>(
      'SELECT node_id FROM server_nodes WHERE node_id = ANY($1) AND heartbeat_at < now() - make_interval(secs => $2)',
      [from, this.#opts.nodeExpiryMs / 1000],
    );
    const gone = new Set(lost.rows.map((r) => r.node_id));
    for (const [cid, served] of [...this.#served]) {
      if (!gone.has(served.from)) continue;
      this.#log.info(
        { node: served.from, runnerId: served.runnerId, session: served.sessionId },
        'stream to a lost node ended',
      );
      this.#endServed(cid);
    }
  }

  async #serve(m: Extract<ParsedClusterMessage, { k: 'call' }>): Promise<void> {
    const conn = this.#local.get(m.runnerId);
    let result: SandboxResult<Record<string, unknown>>;
    if (!conn) result = fail('unavailable', RUNNER_DISCONNECTED);
    else {
      let served: ServedSubscription | undefined;
      if (m.sub) {
        const send = (msg: ClusterMessage): void => {
          this.#track(
            this.#send(m.from, msg).catch((e: unknown) =>
              this.#log.warn({ err: String(e) }, 'stream frame not forwarded'),
            ),
          );
        };
        const forward: SessionListener = {
          output: (stream, data) => send({ k: 'out', cid: m.cid, stream, data: encodeBase64(data) }),
          exit: (code) => {
            this.#served.delete(m.cid);
            send({ k: 'exit', cid: m.cid, code });
          },
          disconnected: () => {
            this.#served.delete(m.cid);
            send({ k: 'disc', cid: m.cid });
          },
        };
        served = { runnerId: m.runnerId, from: m.from, forward, sessionId: undefined };
        this.#served.set(m.cid, served);
      }
      const opts = {
        ...(m.timeoutMs !== undefined ? { timeoutMs: m.timeoutMs } : {}),
        ...(served ? { listener: served.forward } : {}),
      };
      result = await conn.call(m.request as unknown as OutgoingRequest, opts);
      if (served) {
        const sid = result.ok ? result.value.session_id : undefined;
        if (typeof sid === 'string') served.sessionId = sid;
        else this.#served.delete(m.cid);
      }
    }
    await this.#send(m.from, { k: 'reply', cid: m.cid, result }).catch((e: unknown) =>
      this.#log.warn({ err: String(e), cid: m.cid }, 'reply to a remote call not sent'),
    );
  }

  // --- requests of other features ---------------------------------------------------------------

  /** Serves requests other nodes send to this one (commands to the conversations it drives). */
  serveRequests(handler: (payload: unknown) => Promise<unknown>): void {
    this.#serveRequest = handler;
  }

  /** Sends a request to one node and waits for its answer; `ok: false` when it cannot be had in time. */
  request(node: string, payload: Record<string, unknown>, timeoutMs: number): Promise<NodeReply> {
    if (this.#stopped) return Promise.resolve({ ok: false, reason: 'this node is stopping' });
    const cid = randomUUID();
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => {
          this.#requests.delete(cid);
          resolve({ ok: false, reason: `server node ${node} did not answer within ${timeoutMs} ms` });
        },
        Math.min(timeoutMs, MAX_TIMER_MS),
      );
      this.#requests.set(cid, { resolve, timer });
      this.#send(node, { k: 'req', from: this.nodeId, cid, payload }).catch((e: unknown) => {
        clearTimeout(timer);
        this.#requests.delete(cid);
        resolve({
          ok: false,
          reason: `could not reach server node ${node}: ${e instanceof Error ? e.message : String(e)}`,
        });
      });
    });
  }

  async #answer(from: string, cid: string, payload: unknown): Promise<void> {
    let reply: ClusterMessage;
    try {
      if (!this.#serveRequest) throw new Error('this node serves no requests');
      reply = { k: 'res', cid, ok: true, value: await this.#serveRequest(payload) };
    } catch (e) {
      reply = { k: 'res', cid, ok: false, reason: e instanceof Error ? e.message : String(e) };
    }
    await this.#send(from, reply);
  }

  // --- plumbing ---------------------------------------------------------------------------------

  #send(to: string, msg: ClusterMessage): Promise<void> {
    return this.#transport.send(to, JSON.stringify(msg));
  }

  /**
   * Presence reaches this node's subscribers only: other nodes hear it from the `presence` message,
   * after their registry changed, so it crosses nodes exactly once and is never ahead of whereis().
   */
  #deliver(info: RunnerInfo, state: 'online' | 'offline'): void {
    this.#opts.bus.deliver(runnersTopic(info.accountId), {
      type: state === 'online' ? 'runner_online' : 'runner_offline',
      accountId: info.accountId,
      runnerId: info.runnerId,
      name: info.name,
      ...(state === 'offline' ? { connectedAt: info.connectedAt.toISOString() } : {}),
    });
  }

  #track<T>(p: Promise<T>): void {
    const q = p
      .catch((e: unknown) => this.#log.error({ err: String(e) }, 'cluster host task failed'))
      .finally(() => this.#work.delete(q));
    this.#work.add(q);
  }

  /** The node heartbeat: keeps this node's rows alive, reaps expired ones, and reloads the registry. */
  async #refresh(): Promise<void> {
    if (this.#stopped) return;
    const ttl = this.#ttlMs / 1000;
    await this.#transport.query('UPDATE runner_registrations SET heartbeat_at = now() WHERE node_id = $1', [
      this.nodeId,
    ]);
    const reaped = await this.#transport.query<RegistrationRow>(
      'DELETE FROM runner_registrations WHERE heartbeat_at < now() - make_interval(secs => $1) RETURNING *',
      [ttl],
    );
    for (const row of reaped.rows) {
      const reg = fromRow(row);
      this.#log.warn(
        { runnerId: reg.info.runnerId, node: reg.nodeId },
        'runner registration expired (its node stopped heartbeating)',
      );
      await this.#send('broadcast', {
        k: 'presence',
        node: 'reaper',
        token: reg.token,
        state: 'offline',
        info: { ...reg.info, connectedAt: reg.info.connectedAt.toISOString() } as never,
      });
    }
    await this.#transport.query(`DELETE FROM cluster_messages WHERE created_at < now() - make_interval(secs => $1)`, [
      ORPHAN_MESSAGE_TTL_S,
    ]);
    await this.forgetLostNodes();
    const live = await this.#transport.query<RegistrationRow>('SELECT * FROM runner_registrations');
    const next = new Map<string, Registration>();
    for (const row of live.rows) next.set(row.runner_id, fromRow(row));
    // A local socket whose claim is still in flight has no row yet: keep it.
    for (const conn of this.#local.values()) {
      const token = this.#tokens.get(conn.info);
      if (!next.has(conn.info.runnerId) && token)
        next.set(conn.info.runnerId, { info: conn.info, nodeId: this.nodeId, token });
    }
    for (const [runnerId, proxy] of [...this.#proxies]) {
      if (next.get(runnerId)?.token !== proxy.token) this.#failRunner(runnerId);
    }
    this.#registry = next;
  }
}

function guard(log: Logger, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    log.error({ err: e instanceof Error ? e.message : String(e) }, 'session listener failed');
  }
}

/** Stands in for a runner socket held by another node; every method travels over NOTIFY. */
class RemoteRunnerConnection implements RunnerConnection {
  readonly info: RunnerInfo;
  readonly nodeId: string;
  readonly token: string;
  readonly #host: ClusterRunnerHost;

  constructor(host: ClusterRunnerHost, reg: Registration) {
    this.#host = host;
    this.info = reg.info;
    this.nodeId = reg.nodeId;
    this.token = reg.token;
  }

  call(
    request: OutgoingRequest,
    opts: { timeoutMs?: number | null; listener?: SessionListener } = {},
  ): Promise<SandboxResult<Record<string, unknown>>> {
    return this.#host.remoteCall(this, request, opts);
  }

  unsubscribe(sessionId: string, listener: SessionListener): void {
    this.#host.remoteUnsubscribe(this, sessionId, listener);
  }

  close(code: number, reason: string): void {
    this.#host.remoteClose(this, code, reason);
  }
}
