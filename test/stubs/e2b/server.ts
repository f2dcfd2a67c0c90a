/**
 * A local stand-in for E2B on loopback: the control plane (REST, X-API-Key) and envd (real Connect
 * over HTTP/1.1, served by @connectrpc/connect-node from E2B's published process and filesystem
 * services, running real child processes), reproducing E2B's quirks so the adapter's workarounds
 * are tested for real.
 *
 * Quirks reproduced:
 * - no names: identity only through metadata filters on GET /v2/sandboxes, paged with X-Next-Token;
 * - POST /sandboxes without `timeout` lives 15 s; expiry pauses (autoPause) or kills;
 * - pause drops every open envd stream; processes are frozen (SIGSTOP) and thawed on connect;
 * - `Connect-Timeout-Ms: 0` is a deadline already passed (connect-go): envd starts the process,
 *   then ends the stream with deadline_exceeded before `start`; the process runs on unobserved;
 * - any other `Connect-Timeout-Ms` on Start is the process lifetime (#500);
 * - the spawn race (#693): a process is registered, and `start` sent, only after `startDelayMs`;
 *   SendInput before that is `not_found`;
 * - every command runs as `/bin/sh -c 'exec "$@"' -- cmd args`, so a missing binary is exit 127;
 *   stdin is open unless Start says `stdin: false`; a missing cwd is invalid_argument;
 * - output fans out to every subscriber in turn (envd's MultiplexedChannel); output with no
 *   subscriber is discarded (#1640, #2639); a stream still open when the sandbox is paused
 *   becomes a ghost after resume that never reads, so the whole fan-out of that process stalls
 *   (`ghostStallMs`, ~15 min at E2B: infra#3292, E2B#1587): 64 events queue, then the process's
 *   stdout pipe fills and the process blocks on its writes;
 * - proto3: `exitCode: 0` is omitted from the end event on the wire;
 * - PUT /network replaces the whole policy; with no matching rule the firewall allows;
 *   `denyOut` takes IPs and CIDRs only.
 * Processes see their sandbox's own /home (a bind mount in a private mount namespace) when
 * `unshare` works here; otherwise HOME points into the sandbox directory.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { z } from 'zod';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter, HandlerContext } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { FileType, Filesystem } from '../../../src/providers/e2b/gen/filesystem_pb.ts';
import { Process, ProcessEventSchema, Signal } from '../../../src/providers/e2b/gen/process_pb.ts';
import { isolationWorks, spawnIsolated } from '../isolation.ts';
import type { ProcessSelector, StartRequest } from '../../../src/providers/e2b/gen/process_pb.ts';

type EventInit = MessageInitShape<typeof ProcessEventSchema>;

/** envd's fan-out buffer (outputBufferSize) and read size (stdChunkSize). */
const FANOUT_EVENTS = 64;
const CHUNK = 32 * 1024;

export interface E2BStubOptions {
  readonly apiKey: string;
  /** The window between spawning a process and registering it (and sending `start`). */
  readonly startDelayMs?: number;
  /** Delay inside POST /sandboxes, so concurrent creates can both miss the lookup. */
  readonly createDelayMs?: number;
  /** When an output chunk contains this text, the stream carrying it is cut (a proxy drop). */
  readonly dropMarker?: string;
  /** The user envd runs as without an Authorization header. */
  readonly defaultUser?: string;
  /** Use a private mount namespace per process (default: when available). */
  readonly isolate?: boolean;
  /** How long a ghost subscriber (open across a pause) stalls a process's fan-out (~924 s at E2B). */
  readonly ghostStallMs?: number;
}

export interface Fault {
  readonly status: number;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

interface Network {
  allowOut: string[];
  denyOut: string[];
}

interface Subscriber {
  readonly queue: EventInit[];
  wake: (() => void) | null;
  /** Open when the sandbox was paused: after resume it never reads again. */
  ghost: boolean;
  /** The client went away cleanly; the fan-out skips it. */
  gone: boolean;
  /** Cut the connection (no end-stream) once this subscriber has sent what it holds. */
  cut: boolean;
}

interface Proc {
  readonly pid: number;
  readonly tag: string | undefined;
  readonly child: ChildProcess;
  readonly config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
  readonly stdin: boolean;
  registered: boolean;
  exited: boolean;
  end: EventInit | null;
  readonly subs: Set<Subscriber>;
  /** Events not yet fanned out (envd's Source channel). */
  readonly source: EventInit[];
  ghostTimer: NodeJS.Timeout | null;
}

interface Sandbox {
  readonly id: string;
  readonly templateID: string;
  readonly metadata: Record<string, string>;
  readonly envVars: Record<string, string>;
  state: 'running' | 'paused';
  readonly startedAt: Date;
  endAt: Date;
  readonly autoPause: boolean;
  readonly token: string;
  readonly root: string;
  network: Network | null;
  ttl: NodeJS.Timeout | null;
  readonly procs: Map<number, Proc>;
  resumes: number;
  readonly streams: Set<ServerResponse>;
  /** Every subscriber of every process, so a pause can turn the open ones into ghosts. */
  readonly subs: Set<Subscriber>;
}

export interface RecordedRequest {
  readonly server: 'api' | 'envd';
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: unknown;
}

const GO_SIGNAL_NAMES: Record<string, string> = {
  SIGHUP: 'hangup',
  SIGINT: 'interrupt',
  SIGQUIT: 'quit',
  SIGABRT: 'aborted',
  SIGKILL: 'killed',
  SIGUSR1: 'user defined signal 1',
  SIGUSR2: 'user defined signal 2',
  SIGPIPE: 'broken pipe',
  SIGTERM: 'terminated',
};

const newSandboxSchema = z.object({
  templateID: z.string().min(1),
  timeout: z.number().int().positive().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
  envVars: z.record(z.string(), z.string()).optional(),
  secure: z.boolean().optional(),
  autoPause: z.boolean().optional(),
  network: z.object({ allowOut: z.array(z.string()).optional(), denyOut: z.array(z.string()).optional() }).optional(),
});

const IP_OR_CIDR = /^(\d{1,3}\.){3}\d{1,3}(\/\d{1,2})?$/;

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function json(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  if (body === undefined) {
    res.writeHead(status, headers).end();
    return;
  }
  const data = Buffer.from(JSON.stringify(body));
  res
    .writeHead(status, { 'content-type': 'application/json', 'content-length': String(data.length), ...headers })
    .end(data);
}

export class E2BStub {
  readonly #o: Required<Omit<E2BStubOptions, 'dropMarker'>> & { dropMarker: string | undefined };
  readonly #api: http.Server;
  readonly #envd: http.Server;
  readonly #dir: string;
  readonly #sandboxes = new Map<string, Sandbox>();
  readonly #faults: Array<{ server: 'api' | 'envd'; method?: string; path: RegExp; fault: Fault; left: number }> = [];
  readonly requests: RecordedRequest[] = [];
  #seq = 0;
  apiUrl = '';
  sandboxUrl = '';

  private constructor(o: E2BStubOptions) {
    this.#o = {
      apiKey: o.apiKey,
      startDelayMs: o.startDelayMs ?? 30,
      createDelayMs: o.createDelayMs ?? 0,
      dropMarker: o.dropMarker,
      defaultUser: o.defaultUser ?? 'user',
      isolate: o.isolate ?? isolationWorks(),
      ghostStallMs: o.ghostStallMs ?? 924_000,
    };
    this.#dir = mkdtempSync(join(tmpdir(), 'e2b-stub-'));
    this.#api = http.createServer((req, res) => void this.#onApi(req, res).catch((e) => this.#crash(res, e)));
    const rpc = connectNodeAdapter({
      routes: (router) => this.#routes(router),
      fallback: (req, res) => void this.#fallback(req as IncomingMessage, res as ServerResponse),
    });
    this.#envd = http.createServer((req, res) => void this.#onEnvd(req, res, rpc).catch((e) => this.#crash(res, e)));
  }

  static async start(o: E2BStubOptions): Promise<E2BStub> {
    const s = new E2BStub(o);
    const listen = (srv: http.Server) =>
      new Promise<number>((resolve) => srv.listen(0, '127.0.0.1', () => resolve((srv.address() as AddressInfo).port)));
    s.apiUrl = `http://127.0.0.1:${await listen(s.#api)}`;
    s.sandboxUrl = `http://127.0.0.1:${await listen(s.#envd)}`;
    return s;
  }

  get isolated(): boolean {
    return this.#o.isolate;
  }

  /** The next `times` requests matching `path` (and `method`) get `fault` instead of an answer. */
  failNext(server: 'api' | 'envd', path: RegExp, fault: Fault, opts: { method?: string; times?: number } = {}): void {
    this.#faults.push({ server, path, fault, left: opts.times ?? 1, ...(opts.method ? { method: opts.method } : {}) });
  }

  /** What the stub holds, for assertions (no secrets beyond what tests already know). */
  list(): Array<{
    id: string;
    state: string;
    metadata: Record<string, string>;
    endAt: Date;
    network: Network | null;
    processes: number;
  }> {
    return [...this.#sandboxes.values()].map((s) => ({
      id: s.id,
      state: s.state,
      metadata: { ...s.metadata },
      endAt: s.endAt,
      network: s.network ? { allowOut: [...s.network.allowOut], denyOut: [...s.network.denyOut] } : null,
      processes: [...s.procs.values()].filter((p) => !p.exited).length,
    }));
  }

  /** E2B's egress firewall: allowOut wins, then denyOut; with no matching rule traffic is allowed. */
  egressAllowed(sandboxId: string, host: string): boolean {
    const net = this.#sandboxes.get(sandboxId)?.network;
    if (!net) return true;
    const matches = (rule: string) =>
      rule === host ||
      (rule.startsWith('*.') && host.endsWith(rule.slice(1))) ||
      (IP_OR_CIDR.test(rule) && cidrContains(rule, host));
    if (net.allowOut.some(matches)) return true;
    // Domains are matched by Host/SNI in allowOut only; 0.0.0.0/0 covers any destination address.
    if (net.denyOut.some((r) => r === '0.0.0.0/0' || (IP_OR_CIDR.test(host) && cidrContains(r, host)))) return false;
    return true;
  }

  /** Expires a sandbox now, as its TTL would (pause with autoPause, else kill). */
  expire(sandboxId: string): void {
    const s = this.#sandboxes.get(sandboxId);
    if (s) this.#expire(s);
  }

  async stop(): Promise<void> {
    for (const s of this.#sandboxes.values()) this.#kill(s);
    this.#sandboxes.clear();
    const close = (srv: http.Server) =>
      new Promise<void>((resolve) => {
        srv.closeAllConnections();
        srv.close(() => resolve());
      });
    await Promise.all([close(this.#api), close(this.#envd)]);
    rmSync(this.#dir, { recursive: true, force: true });
  }

  #crash(res: ServerResponse, e: unknown): void {
    if (!res.headersSent)
      json(res, 500, { code: 500, message: `stub error: ${e instanceof Error ? e.message : String(e)}` });
    else res.destroy();
  }

  /** `path` is the request's path and query, so a fault can target one page of a listing. */
  #fault(server: 'api' | 'envd', req: IncomingMessage, path: string): Fault | null {
    const i = this.#faults.findIndex(
      (f) => f.server === server && f.path.test(path) && (!f.method || f.method === req.method),
    );
    if (i < 0) return null;
    const f = this.#faults[i]!;
    if (--f.left <= 0) this.#faults.splice(i, 1);
    return f.fault;
  }

  // ---- control plane ------------------------------------------------------------------------

  async #onApi(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stub');
    const raw = await readBody(req);
    let body: unknown;
    try {
      body = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      return json(res, 400, { code: 400, message: 'invalid JSON body' });
    }
    this.requests.push({
      server: 'api',
      method: req.method ?? '',
      path: url.pathname + url.search,
      headers: req.headers,
      body,
    });
    const fault = this.#fault('api', req, url.pathname + url.search);
    if (fault) return json(res, fault.status, fault.body ?? { code: fault.status, message: 'injected' }, fault.headers);
    if (req.headers['x-api-key'] !== this.#o.apiKey) return json(res, 401, { code: 401, message: 'Invalid API key' });

    const m = /^\/sandboxes\/([^/]+)(?:\/(pause|connect|timeout|network))?$/.exec(url.pathname);
    if (req.method === 'POST' && url.pathname === '/sandboxes') return this.#create(res, body);
    if (req.method === 'GET' && url.pathname === '/v2/sandboxes') return this.#listV2(res, url);
    if (!m) return json(res, 404, { code: 404, message: 'route not found' });
    const s = this.#sandboxes.get(decodeURIComponent(m[1]!));
    if (!s) return json(res, 404, { code: 404, message: `sandbox "${m[1]}" not found` });
    const action = m[2];
    if (!action && req.method === 'GET') return json(res, 200, this.#detail(s));
    if (!action && req.method === 'DELETE') {
      this.#kill(s);
      this.#sandboxes.delete(s.id);
      return json(res, 204);
    }
    if (action === 'pause' && req.method === 'POST') {
      if (s.state === 'paused') return json(res, 409, { code: 409, message: 'sandbox is already paused' });
      this.#pause(s);
      return json(res, 204);
    }
    if (action === 'connect' && req.method === 'POST') {
      const t = z.object({ timeout: z.number().int().positive() }).safeParse(body);
      if (!t.success) return json(res, 400, { code: 400, message: 'timeout required' });
      const wasPaused = s.state === 'paused';
      if (wasPaused) this.#resume(s);
      // connect only ever extends the TTL.
      const until = new Date(Date.now() + t.data.timeout * 1000);
      if (until > s.endAt || wasPaused) this.#arm(s, until);
      return json(res, wasPaused ? 201 : 200, this.#created(s));
    }
    if (action === 'timeout' && req.method === 'POST') {
      const t = z.object({ timeout: z.number().int().positive() }).safeParse(body);
      if (!t.success) return json(res, 400, { code: 400, message: 'timeout required' });
      if (s.state === 'running') this.#arm(s, new Date(Date.now() + t.data.timeout * 1000));
      return json(res, 204);
    }
    if (action === 'network' && req.method === 'PUT') {
      const n = z
        .object({
          allowOut: z.array(z.string()).optional(),
          denyOut: z.array(z.string()).optional(),
          allow_internet_access: z.boolean().optional(),
        })
        .safeParse(body ?? {});
      if (!n.success) return json(res, 400, { code: 400, message: 'invalid network config' });
      const bad = (n.data.denyOut ?? []).find((d) => !IP_OR_CIDR.test(d));
      if (bad)
        return json(res, 400, { code: 400, message: `denyOut accepts IP addresses and CIDR ranges only: ${bad}` });
      if (s.state === 'paused') return json(res, 409, { code: 409, message: 'sandbox is paused' });
      // A full replace: whatever the body leaves out is cleared.
      const denyOut = [...(n.data.denyOut ?? [])];
      if (n.data.allow_internet_access === false) denyOut.push('0.0.0.0/0');
      s.network = { allowOut: [...(n.data.allowOut ?? [])], denyOut };
      return json(res, 204);
    }
    return json(res, 405, { code: 405, message: 'method not allowed' });
  }

  async #create(res: ServerResponse, body: unknown): Promise<void> {
    const b = newSandboxSchema.safeParse(body);
    if (!b.success) return json(res, 400, { code: 400, message: `invalid body: ${b.error.issues[0]?.message}` });
    if (this.#o.createDelayMs) await new Promise((r) => setTimeout(r, this.#o.createDelayMs));
    const id = `i${randomBytes(10).toString('hex')}`;
    const root = join(this.#dir, id);
    mkdirSync(join(root, 'home'), { recursive: true });
    const s: Sandbox = {
      id,
      templateID: b.data.templateID,
      metadata: { ...(b.data.metadata ?? {}) },
      envVars: { ...(b.data.envVars ?? {}) },
      state: 'running',
      startedAt: new Date(Date.now() + this.#seq++),
      endAt: new Date(),
      autoPause: b.data.autoPause ?? false,
      token: randomBytes(16).toString('hex'),
      root,
      network: b.data.network
        ? { allowOut: b.data.network.allowOut ?? [], denyOut: b.data.network.denyOut ?? [] }
        : null,
      ttl: null,
      procs: new Map(),
      resumes: 0,
      streams: new Set(),
      subs: new Set(),
    };
    this.#sandboxes.set(id, s);
    // The spec's default lifetime when the client does not say: 15 seconds.
    this.#arm(s, new Date(Date.now() + (b.data.timeout ?? 15) * 1000));
    return json(res, 201, this.#created(s));
  }

  #created(s: Sandbox) {
    return {
      sandboxID: s.id,
      templateID: s.templateID,
      clientID: 'stub',
      envdVersion: '0.5.8',
      envdAccessToken: s.token,
      domain: null,
    };
  }

  #listed(s: Sandbox) {
    return {
      sandboxID: s.id,
      templateID: s.templateID,
      clientID: 'stub',
      startedAt: s.startedAt.toISOString(),
      endAt: s.endAt.toISOString(),
      cpuCount: 2,
      memoryMB: 512,
      diskSizeMB: 1024,
      metadata: s.metadata,
      state: s.state,
      envdVersion: '0.5.8',
    };
  }

  #detail(s: Sandbox) {
    return { ...this.#listed(s), envdAccessToken: s.token, domain: null, network: s.network ?? undefined };
  }

  #listV2(res: ServerResponse, url: URL): void {
    const filter = new URLSearchParams(url.searchParams.get('metadata') ?? '');
    const states = url.searchParams
      .getAll('state')
      .flatMap((v) => v.split(','))
      .filter(Boolean);
    const limitRaw = url.searchParams.get('limit');
    const limit = limitRaw === null ? 100 : Number(limitRaw);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100)
      return json(res, 400, { code: 400, message: 'limit must be 1..100' });
    const all = [...this.#sandboxes.values()]
      .filter((s) => (states.length ? states.includes(s.state) : true))
      .filter((s) => [...filter.entries()].every(([k, v]) => s.metadata[k] === v))
      .sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime());
    const offset = Number(Buffer.from(url.searchParams.get('nextToken') ?? '', 'base64url').toString() || '0');
    const page = all.slice(offset, offset + limit);
    const headers: Record<string, string> = {};
    if (offset + limit < all.length)
      headers['x-next-token'] = Buffer.from(String(offset + limit)).toString('base64url');
    return json(
      res,
      200,
      page.map((s) => this.#listed(s)),
      headers,
    );
  }

  #arm(s: Sandbox, until: Date): void {
    s.endAt = until;
    if (s.ttl) clearTimeout(s.ttl);
    s.ttl = setTimeout(() => this.#expire(s), Math.max(0, until.getTime() - Date.now()));
    s.ttl.unref();
  }

  #expire(s: Sandbox): void {
    if (s.state !== 'running') return;
    if (s.autoPause) this.#pause(s);
    else {
      this.#kill(s);
      this.#sandboxes.delete(s.id);
    }
  }

  #signalAll(s: Sandbox, sig: NodeJS.Signals): void {
    for (const p of s.procs.values()) {
      if (p.exited) continue;
      try {
        process.kill(-p.pid, sig);
      } catch {
        // Already gone.
      }
    }
  }

  #pause(s: Sandbox): void {
    s.state = 'paused';
    if (s.ttl) clearTimeout(s.ttl);
    s.ttl = null;
    this.#signalAll(s, 'SIGSTOP');
    // Every client connection drops at pause, envd streams included; but a stream envd had not
    // yet seen close is snapshotted with the VM and, after resume, blocks its fan-out (infra#3292).
    for (const sub of s.subs) if (!sub.gone) sub.ghost = true;
    for (const res of s.streams) res.destroy();
    s.streams.clear();
  }

  #resume(s: Sandbox): void {
    s.state = 'running';
    s.resumes++;
    this.#signalAll(s, 'SIGCONT');
  }

  #kill(s: Sandbox): void {
    if (s.ttl) clearTimeout(s.ttl);
    s.ttl = null;
    this.#signalAll(s, 'SIGKILL');
    for (const p of s.procs.values()) if (p.ghostTimer) clearTimeout(p.ghostTimer);
    for (const res of s.streams) res.destroy();
    s.streams.clear();
    rmSync(s.root, { recursive: true, force: true });
  }

  // ---- envd ---------------------------------------------------------------------------------

  /** Checks the edge's routing, then hands RPCs to the Connect adapter; `/files` is plain HTTP. */
  async #onEnvd(
    req: IncomingMessage,
    res: ServerResponse,
    rpc: (req: IncomingMessage, res: ServerResponse) => void,
  ): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stub');
    const isRpc = url.pathname.startsWith('/process.Process/') || url.pathname.startsWith('/filesystem.Filesystem/');
    this.requests.push({
      server: 'envd',
      method: req.method ?? '',
      path: url.pathname + url.search,
      headers: req.headers,
      body: isRpc ? '<rpc>' : undefined,
    });
    const fault = this.#fault('envd', req, url.pathname + url.search);
    if (fault)
      return json(res, fault.status, fault.body ?? { code: 'unavailable', message: 'injected' }, fault.headers);
    const id = req.headers['e2b-sandbox-id'];
    const s = typeof id === 'string' ? this.#sandboxes.get(id) : undefined;
    // The edge proxy answers for sandboxes it cannot route to.
    if (!s) return json(res, 502, { code: 502, message: `sandbox ${String(id)} not found` });
    if (s.state === 'paused') return json(res, 502, { code: 502, message: `sandbox ${s.id} is paused` });
    if (!isRpc) return this.#fallback(req, res);
    s.streams.add(res);
    res.on('close', () => s.streams.delete(res));
    const key = randomBytes(8).toString('hex');
    this.#responses.set(key, res);
    res.on('close', () => this.#responses.delete(key));
    req.headers['x-stub-request'] = key;
    rpc(req, res);
  }

  readonly #responses = new Map<string, ServerResponse>();

  /** The sandbox and Linux user of an RPC, or the Connect error envd answers with. */
  #caller(ctx: HandlerContext): { s: Sandbox; user: string } {
    const s = this.#sandboxes.get(ctx.requestHeader.get('e2b-sandbox-id') ?? '');
    if (!s) throw new ConnectError('sandbox not found', Code.Unavailable);
    if (ctx.requestHeader.get('x-access-token') !== s.token)
      throw new ConnectError('invalid access token', Code.Unauthenticated);
    const user = this.#userOf(ctx.requestHeader.get('authorization'));
    if (!user) throw new ConnectError('invalid user', Code.Unauthenticated);
    mkdirSync(join(s.root, 'home', user), { recursive: true });
    return { s, user };
  }

  #userOf(auth: string | null): string | null {
    if (!auth) return this.#o.defaultUser;
    const m = /^Basic (.+)$/.exec(auth);
    if (!m) return null;
    const user = Buffer.from(m[1]!, 'base64').toString('utf8').split(':')[0] ?? '';
    return /^[a-z_][a-z0-9_-]{0,31}$/.test(user) ? user : null;
  }

  async #fallback(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stub');
    const raw = await readBody(req);
    const s = this.#sandboxes.get(String(req.headers['e2b-sandbox-id'] ?? ''));
    if (!s || req.method !== 'POST' || url.pathname !== '/files')
      return json(res, 404, { code: 'not_found', message: 'no such route' });
    if (req.headers['x-access-token'] !== s.token)
      return json(res, 401, { code: 401, message: 'invalid access token' });
    const user = this.#userOf(req.headers.authorization ?? null);
    if (!user) return json(res, 401, { code: 401, message: 'invalid user' });
    return this.#upload(req, res, s, user, url, raw);
  }

  #routes(router: ConnectRouter): void {
    router.service(Process, {
      list: (_req, ctx) => {
        const { s } = this.#caller(ctx);
        return {
          processes: [...s.procs.values()]
            .filter((p) => p.registered && !p.exited)
            .map((p) => ({ config: p.config, pid: p.pid, ...(p.tag !== undefined ? { tag: p.tag } : {}) })),
        };
      },
      start: (req, ctx) => this.#start(req, ctx),
      connect: (req, ctx) => this.#connect(req.process, ctx),
      sendInput: (req, ctx) => {
        const { s } = this.#caller(ctx);
        const p = this.#find(s, req.process);
        if (!p) throw new ConnectError('process not found', Code.NotFound);
        if (req.input?.input.case !== 'stdin') throw new ConnectError('stdin expected', Code.InvalidArgument);
        if (!p.stdin || !p.child.stdin || p.child.stdin.writableEnded)
          throw new ConnectError('stdin not enabled or closed', Code.FailedPrecondition);
        p.child.stdin.write(req.input.input.value);
        return {};
      },
      closeStdin: (req, ctx) => {
        const { s } = this.#caller(ctx);
        const p = this.#find(s, req.process);
        if (!p) throw new ConnectError('process not found', Code.NotFound);
        p.child.stdin?.end();
        return {};
      },
      sendSignal: (req, ctx) => {
        const { s } = this.#caller(ctx);
        const p = this.#find(s, req.process);
        if (!p) throw new ConnectError('process not found', Code.NotFound);
        if (req.signal !== Signal.SIGTERM && req.signal !== Signal.SIGKILL)
          throw new ConnectError('bad signal', Code.InvalidArgument);
        try {
          // envd signals the process itself (cmd.Process.Signal), not its group.
          process.kill(p.pid, req.signal === Signal.SIGKILL ? 'SIGKILL' : 'SIGTERM');
        } catch {
          // Raced its exit.
        }
        return {};
      },
    });
    router.service(Filesystem, {
      stat: (req, ctx) => {
        const { s, user } = this.#caller(ctx);
        const abs = req.path.startsWith('~/') ? posix.join('/home', user, req.path.slice(2)) : req.path;
        const host = this.#resolvePath(s, user, abs);
        let st;
        try {
          st = statSync(host);
        } catch {
          throw new ConnectError(`path '${abs}' does not exist`, Code.NotFound);
        }
        return {
          entry: { name: posix.basename(abs), path: abs, type: st.isDirectory() ? FileType.DIRECTORY : FileType.FILE },
        };
      },
    });
  }

  /** Only registered, running processes are addressable: before `start` and after exit it is not_found. */
  #find(s: Sandbox, sel: ProcessSelector | undefined): Proc | undefined {
    const which = sel?.selector;
    if (!which?.case) return undefined;
    for (const p of s.procs.values()) {
      if (!p.registered || p.exited) continue;
      if (which.case === 'pid' ? p.pid === which.value : p.tag === which.value) return p;
    }
    return undefined;
  }

  #resolvePath(s: Sandbox, user: string, path: string): string {
    const abs = path.startsWith('/') ? path : posix.join('/home', user, path.replace(/^~\/?/, ''));
    return join(s.root, posix.normalize(abs));
  }

  #upload(req: IncomingMessage, res: ServerResponse, s: Sandbox, user: string, url: URL, raw: Buffer): void {
    const path = url.searchParams.get('path');
    if (!path) return json(res, 400, { code: 400, message: 'path is required' });
    const ctype = String(req.headers['content-type'] ?? '');
    let data: Buffer;
    if (ctype.startsWith('application/octet-stream')) data = raw;
    else {
      const m = /boundary=("?)([^";]+)\1/.exec(ctype);
      if (!ctype.startsWith('multipart/form-data') || !m)
        return json(res, 400, { code: 400, message: 'expected multipart/form-data' });
      const delim = Buffer.from(`--${m[2]}`);
      const first = raw.indexOf(delim);
      const headEnd = raw.indexOf('\r\n\r\n', first);
      const next = raw.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd);
      if (first < 0 || headEnd < 0 || next < 0)
        return json(res, 400, { code: 400, message: 'malformed multipart body' });
      data = raw.subarray(headEnd + 4, next);
    }
    const target = this.#resolvePath(s, user, path);
    if (!target.startsWith(s.root + '/')) return json(res, 400, { code: 400, message: 'path escapes the sandbox' });
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, data);
    return json(res, 200, [{ path, name: posix.basename(path), type: 'file' }]);
  }

  // ---- the fan-out ----------------------------------------------------------------------------

  #subscribe(s: Sandbox, p: Proc | null): Subscriber {
    const sub: Subscriber = { queue: [], wake: null, ghost: false, gone: false, cut: false };
    p?.subs.add(sub);
    s.subs.add(sub);
    return sub;
  }

  #leave(s: Sandbox, p: Proc | null, sub: Subscriber): void {
    // A ghost stays: envd never learns that its peer is gone until TCP gives up.
    if (sub.ghost) return;
    sub.gone = true;
    p?.subs.delete(sub);
    s.subs.delete(sub);
  }

  #emit(p: Proc, ev: EventInit): void {
    p.source.push(ev);
    this.#pump(p);
  }

  /** envd's MultiplexedChannel.run: each event goes to every subscriber in turn; a ghost blocks it. */
  #pump(p: Proc): void {
    while (p.source.length > 0) {
      const ghost = [...p.subs].find((x) => x.ghost);
      if (ghost) {
        if (!p.ghostTimer) {
          p.ghostTimer = setTimeout(() => {
            // The kernel gives up retransmitting: the ghost's send fails and it is dropped.
            p.ghostTimer = null;
            ghost.ghost = false;
            ghost.gone = true;
            p.subs.delete(ghost);
            this.#pump(p);
          }, this.#o.ghostStallMs);
          p.ghostTimer.unref();
        }
        break;
      }
      const ev = p.source.shift()!;
      // Output nobody subscribed to is discarded.
      for (const sub of p.subs) {
        if (sub.gone) continue;
        sub.queue.push(ev);
        sub.wake?.();
      }
    }
    // Back-pressure: with the Source buffer full the pipe readers stop, the pipe fills, and the
    // process blocks on its next write.
    const full = p.source.length >= FANOUT_EVENTS;
    for (const st of [p.child.stdout, p.child.stderr]) {
      if (!st) continue;
      if (full && !st.isPaused()) st.pause();
      else if (!full && st.isPaused()) st.resume();
    }
  }

  /** Streams a subscriber's events until the process ends, the client leaves, or it is cut. */
  async *#drain(sub: Subscriber, ctx: HandlerContext): AsyncGenerator<{ event: EventInit }> {
    const res = this.#responses.get(ctx.requestHeader.get('x-stub-request') ?? '');
    for (;;) {
      while (sub.queue.length > 0) {
        const ev = sub.queue.shift()!;
        yield { event: ev };
        if (ev.event?.case === 'end') return;
      }
      if (sub.cut) {
        // What was written reaches the client; then the connection closes with no end-stream.
        res?.socket?.end();
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
        throw new ConnectError('connection cut', Code.Aborted);
      }
      // A deadline (the process lifetime) ends the RPC with deadline_exceeded, as envd does.
      if (ctx.signal.aborted)
        throw ctx.signal.reason instanceof ConnectError
          ? ctx.signal.reason
          : new ConnectError('client went away', Code.Canceled);
      await new Promise<void>((resolve) => {
        sub.wake = resolve;
        ctx.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      sub.wake = null;
    }
  }

  #start(req: StartRequest, ctx: HandlerContext): AsyncGenerator<{ event: EventInit }> {
    const { s, user } = this.#caller(ctx);
    const pc = req.process;
    if (!pc || !pc.cmd) throw new ConnectError('process config is required', Code.InvalidArgument);
    const home = `/home/${user}`;
    const cwdInside = pc.cwd ?? home;
    if (pc.cwd !== undefined && !existsSync(this.#resolvePath(s, user, pc.cwd))) {
      throw new ConnectError(`cwd '${pc.cwd}' does not exist`, Code.InvalidArgument);
    }
    const header = ctx.requestHeader.get('connect-timeout-ms');
    // envd's own reading of the header: 0 or absent is no process lifetime.
    const lifetimeMs = Number(header ?? 0) || 0;
    const keepaliveS = Number(ctx.requestHeader.get('keepalive-ping-interval') ?? 0) || 0;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      LANG: 'C.UTF-8',
      USER: user,
      LOGNAME: user,
      HOME: this.#o.isolate ? home : join(s.root, 'home', user),
      ...s.envVars,
      ...pc.envs,
    };
    const args = [...pc.args];
    // envd opens stdin unless told not to (clients older than the field expect it open).
    const stdin = req.stdin !== false;
    const stdio: ['pipe' | 'ignore', 'pipe', 'pipe'] = [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'];
    let child: ChildProcess;
    // Like envd, every command runs as `/bin/sh -c '… exec "$@"' -- cmd args`.
    if (this.#o.isolate) {
      child = spawnIsolated(join(s.root, 'home'), cwdInside, pc.cmd, args, { env, stdio, detached: true });
    } else {
      const cwd = cwdInside.startsWith('/home/') ? join(s.root, cwdInside) : cwdInside;
      child = spawn('/bin/sh', ['-c', 'exec "$@"', '--', pc.cmd, ...args], { env, stdio, detached: true, cwd });
    }
    child.on('error', () => undefined);
    child.stdin?.on('error', () => undefined);
    if (child.pid === undefined) throw new ConnectError('failed to start process', Code.Internal);
    const proc: Proc = {
      pid: child.pid,
      tag: req.tag,
      child,
      config: { cmd: pc.cmd, args, envs: { ...pc.envs }, ...(pc.cwd !== undefined ? { cwd: pc.cwd } : {}) },
      stdin,
      registered: false,
      exited: false,
      end: null,
      subs: new Set(),
      source: [],
      ghostTimer: null,
    };
    s.procs.set(proc.pid, proc);
    const sub = this.#subscribe(s, proc);
    ctx.signal.addEventListener('abort', () => this.#leave(s, proc, sub), { once: true });

    let lifetime: NodeJS.Timeout | undefined;
    if (lifetimeMs > 0) {
      // The deadline header is the process lifetime on Start.
      lifetime = setTimeout(() => {
        try {
          process.kill(-proc.pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }, lifetimeMs);
    }
    const marker = this.#o.dropMarker;
    const output = (kind: 'stdout' | 'stderr') => (chunk: Buffer) => {
      for (let i = 0; i < chunk.length; i += CHUNK) {
        const part = chunk.subarray(i, i + CHUNK);
        this.#emit(proc, { event: { case: 'data', value: { output: { case: kind, value: new Uint8Array(part) } } } });
      }
      if (marker && chunk.includes(marker)) {
        // A proxy drop: every current stream is cut right after this output.
        for (const x of proc.subs) x.cut = true;
        for (const x of proc.subs) x.wake?.();
        proc.subs.clear();
      }
    };
    child.stdout!.on('data', output('stdout'));
    child.stderr!.on('data', output('stderr'));
    child.on('close', (code, signal) => {
      clearTimeout(lifetime);
      proc.exited = true;
      proc.end =
        code !== null
          ? { event: { case: 'end', value: { exited: true, status: `exit status ${code}`, exitCode: code } } }
          : {
              event: {
                case: 'end',
                value: { exitCode: -1, exited: false, status: `signal: ${GO_SIGNAL_NAMES[signal ?? ''] ?? signal}` },
              },
            };
      this.#emit(proc, proc.end);
      // envd keeps an exited process's end for 30 s for late Connects.
      setTimeout(() => s.procs.delete(proc.pid), 30_000).unref();
    });

    const self = this;
    return (async function* () {
      if (header === '0') {
        // connect-go turns a 0 header into a deadline already passed. envd has started the process
        // (it runs on, with no lifetime) and the RPC ends before `start`.
        setTimeout(() => (proc.registered = true), self.#o.startDelayMs);
        self.#leave(s, proc, sub);
        throw new ConnectError('the operation timed out', Code.DeadlineExceeded);
      }
      // The race window: envd registers the process, then sends `start`.
      await new Promise((r) => setTimeout(r, self.#o.startDelayMs));
      proc.registered = true;
      yield { event: { event: { case: 'start', value: { pid: proc.pid } } } };
      let keepalive: NodeJS.Timeout | undefined;
      if (keepaliveS > 0) {
        keepalive = setInterval(() => {
          sub.queue.push({ event: { case: 'keepalive', value: {} } });
          sub.wake?.();
        }, keepaliveS * 1000);
      }
      try {
        yield* self.#drain(sub, ctx);
      } finally {
        clearInterval(keepalive);
      }
    })();
  }

  async *#connect(sel: ProcessSelector | undefined, ctx: HandlerContext): AsyncGenerator<{ event: EventInit }> {
    const { s } = this.#caller(ctx);
    const which = sel?.selector;
    const proc = which?.case
      ? [...s.procs.values()].find(
          (p) => p.registered && (which.case === 'pid' ? p.pid === which.value : p.tag === which.value),
        )
      : undefined;
    if (!proc) throw new ConnectError('process not found', Code.NotFound);
    yield { event: { event: { case: 'start', value: { pid: proc.pid } } } };
    if (proc.exited && proc.end) {
      yield { event: proc.end };
      return;
    }
    // No replay: only output fanned out from now on.
    const sub = this.#subscribe(s, proc);
    ctx.signal.addEventListener('abort', () => this.#leave(s, proc, sub), { once: true });
    yield* this.#drain(sub, ctx);
  }
}

function cidrContains(cidr: string, ip: string): boolean {
  if (!IP_OR_CIDR.test(ip) || ip.includes('/')) return false;
  const [base, bitsRaw] = cidr.split('/');
  const bits = bitsRaw === undefined ? 32 : Number(bitsRaw);
  const toInt = (a: string) => a.split('.').reduce((n, o) => (n << 8) + Number(o), 0) >>> 0;
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return (toInt(base!) & mask) === (toInt(ip) & mask);
}
