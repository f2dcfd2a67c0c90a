/**
 * A local stand-in for E2B on loopback: the control plane (REST, X-API-Key) and envd (Connect JSON,
 * real child processes), reproducing E2B's quirks so the adapter's workarounds are tested for real.
 *
 * Quirks reproduced (vendors.md §1):
 * - no names: identity only through metadata filters on GET /v2/sandboxes, paged with X-Next-Token;
 * - POST /sandboxes without `timeout` lives 15 s; expiry pauses (autoPause) or kills;
 * - pause drops every open envd stream; processes are frozen (SIGSTOP) and thawed on connect;
 * - the spawn race (#693): a process is registered, and `start` sent, only after `startDelayMs`;
 *   SendInput before that is `not_found`;
 * - stdin is /dev/null unless Start says `stdin: true` (#927);
 * - Connect replays nothing and output with no subscriber is discarded (#1640, #2639); after a
 *   resume Connect stops delivering stdout after 8 KiB (#1352); data may precede `start` (#1396);
 * - `Connect-Timeout-Ms` on Start is the process lifetime: envd kills the process at expiry (#500);
 * - proto3 JSON: `exitCode: 0` is omitted from the end event;
 * - PUT /network replaces the whole policy; with no matching rule the firewall allows;
 *   `denyOut` takes IPs and CIDRs only.
 * Processes see their sandbox's own /home (a bind mount in a private mount namespace) when
 * `unshare` works here; otherwise HOME points into the sandbox directory.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { z } from 'zod';

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
  readonly res: ServerResponse;
  /** Events held until `start` is sent; null once live. */
  queue: unknown[] | null;
  /** Bytes of stdout still deliverable (the post-resume Connect bug); Infinity normally. */
  stdoutBudget: number;
  readonly isStart: boolean;
  deadlineExceeded: boolean;
  /** The marker went out while events were still held: cut the stream right after the flush. */
  dropAfterFlush?: boolean;
}

interface Proc {
  readonly pid: number;
  readonly tag: string | undefined;
  readonly child: ChildProcess;
  readonly config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
  readonly stdin: boolean;
  registered: boolean;
  exited: boolean;
  end: Record<string, unknown> | null;
  readonly subscribers: Set<Subscriber>;
  readonly resumesAtStart: number;
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

const selectorSchema = z.union([z.object({ pid: z.number() }), z.object({ tag: z.string() })]);

const startSchema = z.object({
  process: z.object({
    cmd: z.string().min(1),
    args: z.array(z.string()).optional(),
    envs: z.record(z.string(), z.string()).optional(),
    cwd: z.string().optional(),
  }),
  tag: z.string().optional(),
  stdin: z.boolean().optional(),
  pty: z.unknown().optional(),
});

function envelope(message: unknown, flags = 0): Buffer {
  const json = Buffer.from(JSON.stringify(message));
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

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
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(data.length), ...headers }).end(data);
}

/** The HTTP status Connect assigns to each code. */
const CONNECT_STATUS: Record<string, number> = {
  not_found: 404,
  unauthenticated: 401,
  permission_denied: 403,
  invalid_argument: 400,
  failed_precondition: 400,
  already_exists: 409,
  unavailable: 503,
  internal: 500,
};

function connectError(res: ServerResponse, code: string, message: string): void {
  json(res, CONNECT_STATUS[code] ?? 500, { code, message });
}

let isolationProbe: boolean | undefined;
function isolationWorks(): boolean {
  if (isolationProbe === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'e2b-stub-probe-'));
    const r = spawnSync('unshare', ['--user', '--map-current-user', '--mount', '--', '/bin/sh', '-c', 'mount --bind "$0" /home', dir], {
      stdio: 'ignore',
      timeout: 5000,
    });
    rmSync(dir, { recursive: true, force: true });
    isolationProbe = r.status === 0;
  }
  return isolationProbe;
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
    };
    this.#dir = mkdtempSync(join(tmpdir(), 'e2b-stub-'));
    this.#api = http.createServer((req, res) => void this.#onApi(req, res).catch((e) => this.#crash(res, e)));
    this.#envd = http.createServer((req, res) => void this.#onEnvd(req, res).catch((e) => this.#crash(res, e)));
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
  list(): Array<{ id: string; state: string; metadata: Record<string, string>; endAt: Date; network: Network | null; processes: number }> {
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
      rule === host || (rule.startsWith('*.') && host.endsWith(rule.slice(1))) || (IP_OR_CIDR.test(rule) && cidrContains(rule, host));
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
    if (!res.headersSent) json(res, 500, { code: 500, message: `stub error: ${e instanceof Error ? e.message : String(e)}` });
    else res.destroy();
  }

  /** `path` is the request's path and query, so a fault can target one page of a listing. */
  #fault(server: 'api' | 'envd', req: IncomingMessage, path: string): Fault | null {
    const i = this.#faults.findIndex((f) => f.server === server && f.path.test(path) && (!f.method || f.method === req.method));
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
    this.requests.push({ server: 'api', method: req.method ?? '', path: url.pathname + url.search, headers: req.headers, body });
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
        .object({ allowOut: z.array(z.string()).optional(), denyOut: z.array(z.string()).optional(), allow_internet_access: z.boolean().optional() })
        .safeParse(body ?? {});
      if (!n.success) return json(res, 400, { code: 400, message: 'invalid network config' });
      const bad = (n.data.denyOut ?? []).find((d) => !IP_OR_CIDR.test(d));
      if (bad) return json(res, 400, { code: 400, message: `denyOut accepts IP addresses and CIDR ranges only: ${bad}` });
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
      network: b.data.network ? { allowOut: b.data.network.allowOut ?? [], denyOut: b.data.network.denyOut ?? [] } : null,
      ttl: null,
      procs: new Map(),
      resumes: 0,
      streams: new Set(),
    };
    this.#sandboxes.set(id, s);
    // The spec's default lifetime when the client does not say: 15 seconds.
    this.#arm(s, new Date(Date.now() + (b.data.timeout ?? 15) * 1000));
    return json(res, 201, this.#created(s));
  }

  #created(s: Sandbox) {
    return { sandboxID: s.id, templateID: s.templateID, clientID: 'stub', envdVersion: '0.5.8', envdAccessToken: s.token, domain: null };
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
    const states = url.searchParams.getAll('state').flatMap((v) => v.split(',')).filter(Boolean);
    const limitRaw = url.searchParams.get('limit');
    const limit = limitRaw === null ? 100 : Number(limitRaw);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) return json(res, 400, { code: 400, message: 'limit must be 1..100' });
    const all = [...this.#sandboxes.values()]
      .filter((s) => (states.length ? states.includes(s.state) : true))
      .filter((s) => [...filter.entries()].every(([k, v]) => s.metadata[k] === v))
      .sort((a, b) => b.startedAt.getTime() - a.startedAt.getTime());
    const offset = Number(Buffer.from(url.searchParams.get('nextToken') ?? '', 'base64url').toString() || '0');
    const page = all.slice(offset, offset + limit);
    const headers: Record<string, string> = {};
    if (offset + limit < all.length) headers['x-next-token'] = Buffer.from(String(offset + limit)).toString('base64url');
    return json(res, 200, page.map((s) => this.#listed(s)), headers);
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
    // Every client connection drops at pause, envd streams included.
    for (const res of s.streams) res.destroy();
    s.streams.clear();
    for (const p of s.procs.values()) p.subscribers.clear();
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
    for (const res of s.streams) res.destroy();
    s.streams.clear();
    rmSync(s.root, { recursive: true, force: true });
  }

  // ---- envd ---------------------------------------------------------------------------------

  #user(req: IncomingMessage): string | null {
    const auth = req.headers.authorization;
    if (!auth) return this.#o.defaultUser;
    const m = /^Basic (.+)$/.exec(auth);
    if (!m) return null;
    const user = Buffer.from(m[1]!, 'base64').toString('utf8').split(':')[0] ?? '';
    return /^[a-z_][a-z0-9_-]{0,31}$/.test(user) ? user : null;
  }

  async #onEnvd(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stub');
    const raw = await readBody(req);
    this.requests.push({ server: 'envd', method: req.method ?? '', path: url.pathname + url.search, headers: req.headers, body: raw.length < 4096 ? raw.toString('utf8') : `<${raw.length} bytes>` });
    const fault = this.#fault('envd', req, url.pathname + url.search);
    if (fault) return json(res, fault.status, fault.body ?? { code: 'unavailable', message: 'injected' }, fault.headers);
    const id = req.headers['e2b-sandbox-id'];
    const s = typeof id === 'string' ? this.#sandboxes.get(id) : undefined;
    // The edge proxy answers for sandboxes it cannot route to.
    if (!s) return json(res, 502, { code: 502, message: `sandbox ${String(id)} not found` });
    if (s.state === 'paused') return json(res, 502, { code: 502, message: `sandbox ${s.id} is paused` });
    if (req.headers['x-access-token'] !== s.token) return connectError(res, 'unauthenticated', 'invalid access token');
    const user = this.#user(req);
    if (!user) return connectError(res, 'unauthenticated', 'invalid user');
    const home = join(s.root, 'home', user);
    mkdirSync(home, { recursive: true });

    if (req.method === 'POST' && url.pathname === '/files') return this.#upload(req, res, s, user, url, raw);
    const rpc = /^\/(process\.Process)\/(\w+)$/.exec(url.pathname);
    if (req.method !== 'POST' || !rpc) return json(res, 404, { code: 'not_found', message: 'no such route' });
    const method = rpc[2]!;
    const streaming = method === 'Start' || method === 'Connect';
    const ctype = String(req.headers['content-type'] ?? '');
    if (streaming && ctype !== 'application/connect+json') return json(res, 415, { code: 'invalid_argument', message: 'expected application/connect+json' });
    if (!streaming && ctype !== 'application/json') return json(res, 415, { code: 'invalid_argument', message: 'expected application/json' });
    let msg: unknown;
    try {
      msg = JSON.parse((streaming ? raw.subarray(5) : raw).toString('utf8'));
    } catch {
      return connectError(res, 'invalid_argument', 'bad message');
    }
    switch (method) {
      case 'Start':
        return this.#start(req, res, s, user, msg);
      case 'Connect':
        return this.#connect(res, s, msg);
      case 'List':
        return json(res, 200, {
          processes: [...s.procs.values()]
            .filter((p) => p.registered && !p.exited)
            .map((p) => ({ config: p.config, pid: p.pid, ...(p.tag ? { tag: p.tag } : {}) })),
        });
      case 'SendInput': {
        const b = z.object({ process: selectorSchema, input: z.object({ stdin: z.string() }) }).safeParse(msg);
        if (!b.success) return connectError(res, 'invalid_argument', 'bad SendInput');
        const p = this.#find(s, b.data.process);
        if (!p) return connectError(res, 'not_found', 'process not found');
        if (!p.stdin || !p.child.stdin || p.child.stdin.writableEnded) return connectError(res, 'failed_precondition', 'stdin not enabled or closed');
        p.child.stdin.write(Buffer.from(b.data.input.stdin, 'base64'));
        return json(res, 200, {});
      }
      case 'CloseStdin': {
        const b = z.object({ process: selectorSchema }).safeParse(msg);
        if (!b.success) return connectError(res, 'invalid_argument', 'bad CloseStdin');
        const p = this.#find(s, b.data.process);
        if (!p) return connectError(res, 'not_found', 'process not found');
        if (!p.stdin) return connectError(res, 'failed_precondition', 'stdin not enabled');
        p.child.stdin?.end();
        return json(res, 200, {});
      }
      case 'SendSignal': {
        const b = z.object({ process: selectorSchema, signal: z.enum(['SIGNAL_SIGTERM', 'SIGNAL_SIGKILL']) }).safeParse(msg);
        if (!b.success) return connectError(res, 'invalid_argument', 'bad SendSignal');
        const p = this.#find(s, b.data.process);
        if (!p) return connectError(res, 'not_found', 'process not found');
        try {
          process.kill(-p.pid, b.data.signal === 'SIGNAL_SIGKILL' ? 'SIGKILL' : 'SIGTERM');
        } catch {
          // Raced its exit.
        }
        return json(res, 200, {});
      }
      default:
        return connectError(res, 'unimplemented' as string, `${method} is not implemented by the stub`);
    }
  }

  /** Only registered, running processes are addressable: before `start` and after exit it is not_found. */
  #find(s: Sandbox, sel: z.infer<typeof selectorSchema>): Proc | undefined {
    for (const p of s.procs.values()) {
      if (!p.registered || p.exited) continue;
      if ('pid' in sel ? p.pid === sel.pid : p.tag === sel.tag) return p;
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
      if (!ctype.startsWith('multipart/form-data') || !m) return json(res, 400, { code: 400, message: 'expected multipart/form-data' });
      const delim = Buffer.from(`--${m[2]}`);
      const first = raw.indexOf(delim);
      const headEnd = raw.indexOf('\r\n\r\n', first);
      const next = raw.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd);
      if (first < 0 || headEnd < 0 || next < 0) return json(res, 400, { code: 400, message: 'malformed multipart body' });
      data = raw.subarray(headEnd + 4, next);
    }
    const target = this.#resolvePath(s, user, path);
    if (!target.startsWith(s.root + '/')) return json(res, 400, { code: 400, message: 'path escapes the sandbox' });
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, data);
    return json(res, 200, [{ path, name: posix.basename(path), type: 'file' }]);
  }

  #openStream(res: ServerResponse, s: Sandbox): void {
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    res.flushHeaders();
    s.streams.add(res);
    res.on('close', () => s.streams.delete(res));
  }

  #send(sub: Subscriber, event: unknown): void {
    if (sub.queue) sub.queue.push(event);
    else if (!sub.res.destroyed) sub.res.write(envelope(event));
  }

  /** Flush what was written, then close the connection with no end event and no end-stream. */
  #drop(sub: Subscriber): void {
    sub.res.socket?.end();
  }

  #finish(sub: Subscriber, error?: { code: string; message: string }): void {
    if (sub.res.destroyed) return;
    sub.res.end(envelope(error ? { error } : {}, 0x02));
  }

  #start(req: IncomingMessage, res: ServerResponse, s: Sandbox, user: string, msg: unknown): void {
    const b = startSchema.safeParse(msg);
    if (!b.success) {
      this.#openStream(res, s);
      res.end(envelope({ error: { code: 'invalid_argument', message: 'bad StartRequest' } }, 0x02));
      return;
    }
    const { process: pc, tag } = b.data;
    const lifetimeMs = Number(req.headers['connect-timeout-ms'] ?? 0) || 0;
    const keepaliveS = Number(req.headers['keepalive-ping-interval'] ?? 0) || 0;
    const home = `/home/${user}`;
    const cwdInside = pc.cwd ?? home;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      LANG: 'C.UTF-8',
      USER: user,
      HOME: this.#o.isolate ? home : join(s.root, 'home', user),
      ...s.envVars,
      ...(pc.envs ?? {}),
    };
    const args = pc.args ?? [];
    let child: ChildProcess;
    const stdio: ['pipe' | 'ignore', 'pipe', 'pipe'] = [b.data.stdin === true ? 'pipe' : 'ignore', 'pipe', 'pipe'];
    if (this.#o.isolate) {
      child = spawn(
        'unshare',
        ['--user', '--map-current-user', '--mount', '--', '/bin/sh', '-c', 'mount --bind "$0" /home || exit 126; cd "$1" || exit 126; shift; exec "$@"', join(s.root, 'home'), cwdInside, pc.cmd, ...args],
        { env, stdio, detached: true },
      );
    } else {
      const cwd = cwdInside.startsWith('/home/') ? join(s.root, cwdInside) : cwdInside;
      mkdirSync(join(s.root, 'home', user), { recursive: true });
      child = spawn(pc.cmd, args, { env, stdio, detached: true, cwd });
    }
    this.#openStream(res, s);
    const sub: Subscriber = { res, queue: [], stdoutBudget: Infinity, isStart: true, deadlineExceeded: false };
    child.on('error', (e) => {
      // A missing binary: envd fails the RPC before any event.
      if (!res.destroyed) res.end(envelope({ error: { code: 'unknown', message: `failed to start: ${e.message}` } }, 0x02));
    });
    if (child.pid === undefined) return;
    const proc: Proc = {
      pid: child.pid,
      tag,
      child,
      config: { cmd: pc.cmd, args, envs: pc.envs ?? {}, ...(pc.cwd ? { cwd: pc.cwd } : {}) },
      stdin: b.data.stdin === true,
      registered: false,
      exited: false,
      end: null,
      subscribers: new Set([sub]),
      resumesAtStart: s.resumes,
    };
    s.procs.set(proc.pid, proc);
    child.stdin?.on('error', () => undefined);
    res.on('close', () => proc.subscribers.delete(sub));

    let lifetime: NodeJS.Timeout | undefined;
    if (lifetimeMs > 0) {
      // The deadline header is the process lifetime on Start.
      lifetime = setTimeout(() => {
        sub.deadlineExceeded = true;
        try {
          process.kill(-proc.pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }, lifetimeMs);
    }
    let keepalive: NodeJS.Timeout | undefined;
    if (keepaliveS > 0) keepalive = setInterval(() => this.#send(sub, { event: { keepalive: {} } }), keepaliveS * 1000);

    const output = (kind: 'stdout' | 'stderr') => (chunk: Buffer) => {
      // Output with no subscriber is discarded: nothing is kept for a later Connect.
      for (const sb of [...proc.subscribers]) {
        let data = chunk;
        if (kind === 'stdout' && sb.stdoutBudget !== Infinity) {
          data = chunk.subarray(0, Math.max(0, sb.stdoutBudget));
          sb.stdoutBudget -= data.length;
          if (data.length === 0) continue;
        }
        this.#send(sb, { event: { data: { [kind]: data.toString('base64') } } });
        if (this.#o.dropMarker && chunk.includes(this.#o.dropMarker)) {
          proc.subscribers.delete(sb);
          if (sb.queue) sb.dropAfterFlush = true;
          else this.#drop(sb);
        }
      }
    };
    child.stdout!.on('data', output('stdout'));
    child.stderr!.on('data', output('stderr'));
    child.on('close', (code, signal) => {
      clearTimeout(lifetime);
      clearInterval(keepalive);
      proc.exited = true;
      const end: Record<string, unknown> =
        code !== null
          ? { exited: true, status: `exit status ${code}`, ...(code !== 0 ? { exitCode: code } : {}) }
          : { exitCode: -1, exited: false, status: `signal: ${GO_SIGNAL_NAMES[signal ?? ''] ?? signal}` };
      proc.end = end;
      for (const sb of [...proc.subscribers]) {
        this.#send(sb, { event: { end } });
        if (!sb.queue) this.#finish(sb, sb.deadlineExceeded ? { code: 'deadline_exceeded', message: 'process lifetime exceeded' } : undefined);
      }
      // envd keeps an exited process's end for 30 s for late Connects.
      setTimeout(() => s.procs.delete(proc.pid), 30_000).unref();
    });
    // The race window: envd registers the process, then sends `start`.
    setTimeout(() => {
      proc.registered = true;
      const queued = sub.queue ?? [];
      sub.queue = null;
      if (res.destroyed) return;
      res.write(envelope({ event: { start: { pid: proc.pid } } }));
      for (const e of queued) res.write(envelope(e));
      if (sub.dropAfterFlush) return this.#drop(sub);
      if (proc.exited) this.#finish(sub, sub.deadlineExceeded ? { code: 'deadline_exceeded', message: 'process lifetime exceeded' } : undefined);
    }, this.#o.startDelayMs);
  }

  #connect(res: ServerResponse, s: Sandbox, msg: unknown): void {
    this.#openStream(res, s);
    const b = z.object({ process: selectorSchema }).safeParse(msg);
    const sel = b.success ? b.data.process : null;
    const proc = sel
      ? [...s.procs.values()].find((p) => p.registered && ('pid' in sel ? p.pid === sel.pid : p.tag === sel.tag))
      : undefined;
    if (!proc) {
      res.end(envelope({ error: { code: 'not_found', message: 'process not found' } }, 0x02));
      return;
    }
    if (proc.exited) {
      res.write(envelope({ event: { start: { pid: proc.pid } } }));
      res.write(envelope({ event: { end: proc.end } }));
      res.end(envelope({}, 0x02));
      return;
    }
    // No replay: only output produced from now on. After a resume stdout stalls at 8 KiB.
    const sub: Subscriber = { res, queue: null, stdoutBudget: s.resumes > proc.resumesAtStart ? 8192 : Infinity, isStart: false, deadlineExceeded: false };
    proc.subscribers.add(sub);
    res.on('close', () => proc.subscribers.delete(sub));
    // `start` goes out a tick later, so output already in flight can precede it.
    setImmediate(() => {
      if (!res.destroyed) res.write(envelope({ event: { start: { pid: proc.pid } } }));
    });
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

