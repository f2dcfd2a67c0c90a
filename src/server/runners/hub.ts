/**
 * The runner hub's WebSocket end: the registration checks that run before the upgrade (so
 * refusals are plain HTTP statuses), the upgrade itself, and the host hooks that stamp
 * last_seen_at and publish presence.
 */
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  LocalRunnerHost,
  type RunnerConnection,
  type RunnerHost,
  type RunnerInfo,
} from '../../providers/runner/host.ts';
import { MAX_FRAME_BYTES, parseRunnerBackend, parseRunnerCapabilities } from '../../wire/index.ts';
import { authenticate, hasScope, isRunnerOnly, type Principal } from '../http/auth.ts';
import { ApiError, toApiError } from '../http/errors.ts';
import { EventBus, runnersTopic } from '../cluster/bus.ts';
import type { Db } from '../store/db.ts';
import { audit } from '../account/audit.ts';
import { findRunnerByName, runnerRegistrationSchema, touchRunner, upsertRunner } from './store.ts';
import { runnerNameOfKey } from './registration.ts';

export const RUNNER_WS_PATH = '/api/runners/ws';

/** The server end of a runner socket (src/providers/runner/connection.ts); null when it lost a registration race. */
export type AcceptRunnerSocket = (
  ws: WebSocket,
  info: RunnerInfo,
  host: RunnerHost,
  opts: { logger: Logger; heartbeatMs?: number; callTimeoutMs?: number },
) => RunnerConnection | null;

export interface RunnerHubDeps {
  readonly db: Db;
  readonly logger: Logger;
  readonly host: RunnerHost;
  readonly runnersEnabled: boolean;
}

/** Checks 0–1: a full-scope key (401/403), then whether runners are enabled (404). */
export async function runnerPreflight(deps: RunnerHubDeps, authorization: string | undefined): Promise<Principal> {
  const principal = await authenticate(deps.db, authorization, deps.logger);
  if (!hasScope(principal, 'full') && !hasScope(principal, 'runner')) {
    throw new ApiError(
      403,
      'insufficient_scope',
      'a runner needs a full-scope API key; sandbox keys may never attach a runner',
      {
        required_scope: 'full',
      },
    );
  }
  if (!deps.runnersEnabled)
    throw new ApiError(404, 'runners_disabled', 'self-hosted runners are disabled on this server');
  return principal;
}

/**
 * A key from "Add runner" connects as the runner it was issued for and no other, so a leaked runner key
 * cannot stand in for another machine of the account (full-scope keys may use any name, as upstream).
 */
export async function requireOwnName(
  deps: Pick<RunnerHubDeps, 'db'>,
  principal: Principal,
  name: string,
): Promise<void> {
  if (!isRunnerOnly(principal)) return;
  const own = await runnerNameOfKey(deps.db, principal.key.id);
  if (own === name) return;
  throw new ApiError(
    403,
    'runner_key_mismatch',
    own === undefined
      ? 'this runner key is not tied to any runner: add the runner again on the Runners page'
      : `this key was issued for runner ${JSON.stringify(own)} and cannot connect as ${JSON.stringify(name)}: start it with --name ${own}, or add ${JSON.stringify(name)} as a runner of its own on the Runners page`,
    { runner_name: own ?? null },
  );
}

/**
 * Checks 3–5: the query's fields (400), a runner of that name already online (409), then the
 * upsert that stamps connected_at and last_seen_at (a first registration is audited).
 */
export async function registerRunner(
  deps: RunnerHubDeps,
  principal: Principal,
  query: URLSearchParams,
): Promise<RunnerInfo> {
  const raw: Record<string, string> = {};
  for (const field of ['name', 'hostname', 'os', 'arch', 'version', 'root']) {
    const v = query.get(field);
    if (v !== null && (v !== '' || field === 'name')) raw[field] = v;
  }
  // What the daemon's backend can do (a namespace runner has network_policy); absent: the upstream set.
  const capabilities = parseRunnerCapabilities(query.get('capabilities'));
  const parsed = runnerRegistrationSchema.safeParse({
    ...raw,
    capabilities,
    backend: parseRunnerBackend(query.get('backend')),
  });
  if (!parsed.success) throw ApiError.validation(parsed.error, 400, 'invalid_runner');
  const reg = parsed.data;
  await requireOwnName(deps, principal, reg.name);
  const accountId = principal.account.id;
  const existing = await findRunnerByName(deps.db, accountId, reg.name);
  if (existing && deps.host.whereis(existing.id)) {
    throw new ApiError(409, 'runner_already_connected', `a runner named ${reg.name} is already connected`);
  }
  const { runner, inserted } = await upsertRunner(deps.db, accountId, reg);
  if (inserted) {
    await audit(deps.db, {
      accountId,
      actor: 'api',
      action: 'runner.registered',
      subjectId: runner.id,
      data: { name: runner.name },
    });
  }
  return {
    runnerId: runner.id,
    accountId,
    name: runner.name,
    connectedAt: runner.connectedAt ?? new Date(),
    capabilities,
  };
}

function refuse(socket: Duplex, e: ApiError): void {
  const payload = JSON.stringify(e.body());
  const extra = Object.entries(e.headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.end(
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? ''}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(payload)}\r\n${extra}Connection: close\r\n\r\n${payload}`,
  );
}

export interface UpgradeOptions extends RunnerHubDeps {
  readonly accept: AcceptRunnerSocket;
  readonly heartbeatMs: number;
  readonly callTimeoutMs: number;
}

export interface UpgradeHandler {
  (req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Closes the WebSocket server (live runner sockets are closed by whoever owns the host). */
  close(): void;
}

/** Handles the node server's 'upgrade' event: only the runner endpoint upgrades; everything else is refused. */
export function createUpgradeHandler(opts: UpgradeOptions): UpgradeHandler {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  const log = opts.logger;

  const handle = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', (err) => log.debug({ err }, 'runner upgrade socket error'));
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== RUNNER_WS_PATH) return refuse(socket, ApiError.notFound('route'));
    if (req.method !== 'GET') return refuse(socket, new ApiError(405, 'method_not_allowed', 'use GET'));
    (async () => {
      const principal = await runnerPreflight(opts, req.headers.authorization);
      if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket') {
        throw new ApiError(400, 'not_a_websocket', 'this endpoint only accepts a WebSocket upgrade');
      }
      return registerRunner(opts, principal, url.searchParams);
    })().then(
      (info) => {
        if (socket.destroyed) return;
        wss.handleUpgrade(req, socket, head, (ws) => {
          const conn = opts.accept(ws, info, opts.host, {
            logger: log,
            heartbeatMs: opts.heartbeatMs,
            callTimeoutMs: opts.callTimeoutMs,
          });
          if (conn)
            log.info({ runner: info.name, runnerId: info.runnerId, accountId: info.accountId }, 'runner connected');
        });
      },
      (e: unknown) => {
        const apiError = toApiError(e, log);
        log.info({ status: apiError.status, error: apiError.code }, 'runner registration refused');
        if (!socket.destroyed) refuse(socket, apiError);
      },
    );
  };
  return Object.assign(handle, { close: () => wss.close() });
}

/** The in-process host, with heartbeats stamping last_seen_at and presence going to the event bus. */
export function createRunnerHost(deps: { db: Db; bus: EventBus; logger: Logger }): LocalRunnerHost {
  return new LocalRunnerHost({
    heartbeat: (info) => {
      touchRunner(deps.db, info.runnerId).catch((err: unknown) =>
        deps.logger.warn({ err, runnerId: info.runnerId }, 'could not stamp runner last_seen_at'),
      );
    },
    presence: (info, state) => {
      deps.bus.publish(runnersTopic(info.accountId), {
        type: state === 'online' ? 'runner_online' : 'runner_offline',
        accountId: info.accountId,
        runnerId: info.runnerId,
        name: info.name,
        ...(state === 'offline' ? { connectedAt: info.connectedAt.toISOString() } : {}),
      });
      if (state === 'offline') deps.logger.info({ runner: info.name, runnerId: info.runnerId }, 'runner disconnected');
    },
  });
}
