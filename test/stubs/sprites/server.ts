/**
 * A local stand-in for the Sprites API (REST + exec WebSocket) on loopback, running real child
 * processes, that reproduces the Sprites API's quirks so the adapter's workarounds are tested.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { constants as osConstants } from 'node:os';
import type { Duplex } from 'node:stream';
import { WebSocketServer, WebSocket, type RawData } from 'ws';
import { z } from 'zod';
import { isolationWorks, spawnIsolated } from '../isolation.ts';

export interface SpritesStubOptions {
  readonly token: string;
  /** Bytes of output a native attach replays; the real service keeps roughly the last 16 KiB. */
  readonly scrollbackBytes?: number;
  /** What `max_run_after_disconnect` defaults to without a TTY (10 s at Sprites). */
  readonly defaultMaxRunAfterDisconnectMs?: number;
  /** Idle time before a sprite hibernates (about 30 s at Sprites). */
  readonly hibernateAfterMs?: number;
  /** Delay between the upgrade and the process registration; stdin sent meanwhile is lost. */
  readonly sessionInfoDelayMs?: number;
  /** Page size cap of the sprite listing (50 at Sprites). */
  readonly pageSize?: number;
  /** The status a create on an existing name answers: reported 409, seen 400. */
  readonly duplicateStatus?: 400 | 409;
  /** The status of a network-policy POST: 200 per the docs, 204 per the SDK. */
  readonly policyPostStatus?: 200 | 204;
  /**
   * A sprite older than 0.0.1-rc30: attach is `/exec?id=<id>` only, and `/exec/{id}` answers 404
   * (sprites-go falls back on that 404).
   */
  readonly legacyAttach?: boolean;
  /**
   * When a new exec's `session_info` text frame goes out. Its order relative to output is
   * undocumented and neither official SDK waits for it: `first` (before any output),
   * `after_output` (after the first output or exit frame), or `never`.
   */
  readonly sessionInfo?: 'first' | 'after_output' | 'never';
  /**
   * Listing and killing are separate requests, so a session can end between them. This widens
   * that window: an ended session stays in GET /exec for this long (its kill answers 410).
   */
  readonly listEndedForMs?: number;
  /** Whether processes see the sprite's own /home (default: when this machine allows it). */
  readonly isolate?: boolean;
}

/** One request as the stub received it (exec upgrades included), so a test can search what the adapter sent. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly body: string;
}

/** Failures the real service produces now and then, switched on by a test. */
export interface StubFaults {
  /** Sever every socket of a session (no exit frame) when its output contains this text. */
  dropOnOutput?: string;
  /** Answer the next N creates with 429 and a retry hint. */
  rateLimitCreates?: number;
  /** Claim more pages but give no continuation token. */
  brokenPaging?: boolean;
  /**
   * The next N sessions that end close their sockets with 1000 and no exit frame, as 25–35% of
   * fast commands do at Sprites (sprites-py#16).
   */
  closeWithoutExit?: { times: number; commandIncludes?: string };
  /** Refuse the next N network-policy POSTs with 400 invalid_policy, as Sprites refuses rules it cannot parse. */
  refusePolicy?: number;
}

export interface PolicyRule {
  readonly domain?: string;
  readonly action?: 'allow' | 'deny';
  readonly include?: string;
}

interface StubSession {
  readonly id: string;
  readonly command: string;
  readonly created: Date;
  lastActivity: Date;
  readonly child: ChildProcess | null;
  readonly clients: Set<WebSocket>;
  readonly scrollback: Array<{ stream: number; data: Buffer }>;
  scrollbackSize: number;
  /** 0 = keep running forever after the last client leaves. */
  readonly maxRunMs: number;
  disconnectTimer: NodeJS.Timeout | null;
  exited: boolean;
  /** The owner socket still owed its `session_info` (sessionInfo: after_output). */
  infoOwed: WebSocket | null;
}

interface StubSprite {
  readonly id: string;
  readonly name: string;
  readonly root: string;
  readonly created: Date;
  updated: Date;
  status: 'running' | 'warm' | 'cold';
  rules: PolicyRule[];
  readonly sessions: Map<string, StubSession>;
  /** Sessions whose process has exited: killing one answers 410 Gone (sprites-go client.go). */
  readonly exited: Map<string, StubSession & { endedAt: number }>;
  /** Every process group ever started in the sprite: hibernation takes them all. */
  readonly groups: Set<number>;
  hibernateTimer: NodeJS.Timeout | null;
}

const SPRITE_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const DEFAULT_ALLOWED = ['github.com', 'registry.npmjs.org', 'pypi.org'];

const createSchema = z.object({
  name: z.string(),
  labels: z.array(z.string()).optional(),
  url_settings: z.object({ auth: z.enum(['sprite', 'public']) }).optional(),
});
const ruleSchema = z.union([
  z.object({ domain: z.string().min(1), action: z.enum(['allow', 'deny']) }),
  z.object({ include: z.literal('defaults') }),
]);
const policySchema = z.object({ rules: z.array(ruleSchema) });

/** `10s`, `500ms`, `1m`, `2h`, or bare seconds. */
export const parseDuration = (v: string): number | null => {
  const m = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) return null;
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return Math.round(n * (unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000));
};

const signalNumber = (sig: NodeJS.Signals | null): number =>
  sig ? ((osConstants.signals as Record<string, number>)[sig] ?? 9) : 0;

export class SpritesStub {
  readonly faults: StubFaults = {};
  /** Session ids in the order kill requests named them. */
  readonly kills: string[] = [];
  /** Every request, for searching what the adapter sent. */
  readonly requests: RecordedRequest[] = [];
  readonly #opts: Required<SpritesStubOptions>;
  readonly #server: Server;
  readonly #wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  readonly #sprites = new Map<string, StubSprite>();
  readonly #dir: string;
  #nextId = 1;
  #nextFakePid = 1_000_000;
  #port = 0;

  private constructor(opts: SpritesStubOptions) {
    this.#opts = {
      scrollbackBytes: 16 * 1024,
      defaultMaxRunAfterDisconnectMs: 10_000,
      hibernateAfterMs: 30_000,
      sessionInfoDelayMs: 0,
      pageSize: 50,
      duplicateStatus: 409,
      policyPostStatus: 204,
      legacyAttach: false,
      sessionInfo: 'first',
      listEndedForMs: 0,
      isolate: opts.isolate ?? isolationWorks(),
      ...opts,
    };
    this.#dir = mkdtempSync(join(tmpdir(), 'sprites-stub-'));
    this.#server = createServer((req, res) => {
      this.#rest(req, res).catch(() => {
        if (!res.headersSent) json(res, 500, { error: 'internal' });
        else res.end();
      });
    });
    this.#server.on('upgrade', (req, socket, head) => this.#upgrade(req, socket, head));
  }

  static async start(opts: SpritesStubOptions): Promise<SpritesStub> {
    const stub = new SpritesStub(opts);
    await new Promise<void>((resolve) => stub.#server.listen(0, '127.0.0.1', resolve));
    const addr = stub.#server.address();
    stub.#port = typeof addr === 'object' && addr ? addr.port : 0;
    return stub;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  /** Stops listening, kills every process, removes every sprite's disk. */
  async close(): Promise<void> {
    for (const sprite of this.#sprites.values()) this.#killAll(sprite);
    for (const c of this.#wss.clients) c.terminate();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    rmSync(this.#dir, { recursive: true, force: true });
  }

  // ---- inspection for tests ------------------------------------------------------------------

  status(name: string): StubSprite['status'] | null {
    return this.#sprites.get(name)?.status ?? null;
  }

  rules(name: string): readonly PolicyRule[] | null {
    return this.#sprites.get(name)?.rules ?? null;
  }

  /** The vendor's DNS decision: an empty rule list is no policy at all; first matching rule wins. */
  egressAllowed(name: string, domain: string): boolean {
    const rules = this.#sprites.get(name)?.rules ?? [];
    const d = domain.toLowerCase();
    for (const r of rules) {
      if (r.include === 'defaults') {
        if (DEFAULT_ALLOWED.includes(d)) return true;
        continue;
      }
      const pat = (r.domain ?? '').toLowerCase();
      const hit = pat === '*' || pat === d || (pat.startsWith('*.') && d.endsWith(pat.slice(1)));
      if (hit) return r.action === 'allow';
    }
    return true;
  }

  /** Where a sprite path lives on this machine (the sprite's disk is a directory). */
  hostPath(name: string, path: string): string | null {
    const sprite = this.#sprites.get(name);
    return sprite ? this.#map(sprite, path) : null;
  }

  liveSessionIds(name: string): string[] {
    return [...(this.#sprites.get(name)?.sessions.keys() ?? [])];
  }

  // ---- helpers -------------------------------------------------------------------------------

  #map(sprite: StubSprite, path: string, workingDir = '/home/sprite'): string {
    const abs = posix.resolve(posix.resolve('/', workingDir), path);
    return join(sprite.root, abs);
  }

  #authorized(req: IncomingMessage): boolean {
    return req.headers.authorization === `Bearer ${this.#opts.token}`;
  }

  #record(s: StubSprite) {
    return {
      id: s.id,
      name: s.name,
      organization: 'stub-org',
      status: s.status,
      url: `https://${s.name}.sprites.app`,
      url_settings: { auth: 'sprite' },
      created_at: s.created.toISOString(),
      updated_at: s.updated.toISOString(),
    };
  }

  /** Activity wakes the sprite and pushes hibernation back. */
  #touch(sprite: StubSprite): void {
    sprite.status = 'running';
    sprite.updated = new Date();
    this.#scheduleHibernation(sprite);
  }

  #scheduleHibernation(sprite: StubSprite): void {
    if (sprite.hibernateTimer) clearTimeout(sprite.hibernateTimer);
    sprite.hibernateTimer = setTimeout(() => {
      sprite.hibernateTimer = null;
      // A live session (attached or detached-and-kept) is activity: no hibernation.
      if (sprite.sessions.size > 0) return this.#scheduleHibernation(sprite);
      this.#killAll(sprite);
      sprite.status = 'cold';
    }, this.#opts.hibernateAfterMs);
    sprite.hibernateTimer.unref();
  }

  #killAll(sprite: StubSprite): void {
    if (sprite.hibernateTimer) clearTimeout(sprite.hibernateTimer);
    sprite.hibernateTimer = null;
    for (const pgid of sprite.groups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // group already gone
      }
    }
    sprite.groups.clear();
    for (const s of sprite.sessions.values()) {
      if (s.disconnectTimer) clearTimeout(s.disconnectTimer);
      for (const c of s.clients) c.terminate();
    }
  }

  // ---- REST ----------------------------------------------------------------------------------

  async #rest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.#authorized(req)) return json(res, 401, { error: 'unauthorized' });
    const url = new URL(req.url ?? '/', 'http://stub');
    const body = await readBody(req);
    this.requests.push({ method: req.method ?? 'GET', path: url.pathname + url.search, body: body.toString('utf8') });
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    const method = req.method ?? 'GET';
    if (parts[0] !== 'v1' || parts[1] !== 'sprites') return json(res, 404, { error: 'not_found' });

    if (parts.length === 2) {
      if (method === 'POST') return this.#create(body, res);
      if (method === 'GET') return this.#list(url, res);
      return json(res, 405, { error: 'method_not_allowed' });
    }
    const sprite = this.#sprites.get(parts[2] ?? '');
    if (!sprite) return json(res, 404, { error: 'sprite_not_found' });
    const rest = parts.slice(3);

    if (rest.length === 0) {
      // Reading the record reports the state; it does not wake the sprite.
      if (method === 'GET') return json(res, 200, this.#record(sprite));
      if (method === 'DELETE') {
        this.#killAll(sprite);
        this.#sprites.delete(sprite.name);
        rmSync(sprite.root, { recursive: true, force: true });
        res.writeHead(204).end();
        return;
      }
      return json(res, 405, { error: 'method_not_allowed' });
    }
    if (rest[0] === 'exec' && rest.length === 1 && method === 'GET') {
      return json(res, 200, {
        sessions: [
          ...sprite.sessions.values(),
          ...[...sprite.exited.values()].filter((s) => Date.now() - s.endedAt < this.#opts.listEndedForMs),
        ].map((s) => ({
          id: Number(s.id),
          command: s.command,
          created: s.created.toISOString(),
          last_activity: s.lastActivity.toISOString(),
          // False whenever nobody is attached, even though the process runs on.
          is_active: s.clients.size > 0,
          tty: false,
          bytes_per_second: 0,
        })),
      });
    }
    if (rest[0] === 'exec' && rest.length === 3 && rest[2] === 'kill' && method === 'POST') {
      return this.#kill(sprite, rest[1] ?? '', url, res);
    }
    if (rest[0] === 'policy' && rest[1] === 'network' && rest.length === 2) {
      if (method === 'GET') return json(res, 200, { rules: sprite.rules });
      if (method === 'POST') {
        const policy = policySchema.safeParse(parseJson(body));
        if (this.faults.refusePolicy && this.faults.refusePolicy > 0) {
          this.faults.refusePolicy--;
          return json(res, 400, { error: 'invalid_policy' });
        }
        if (!policy.success) return json(res, 400, { error: 'invalid_policy' });
        this.#touch(sprite);
        sprite.rules = policy.data.rules;
        if (this.#opts.policyPostStatus === 204) res.writeHead(204).end();
        else json(res, 200, { rules: sprite.rules });
        return;
      }
    }
    if (rest[0] === 'fs' && rest[1] === 'write' && method === 'PUT') {
      const path = url.searchParams.get('path');
      if (!path) return json(res, 400, { error: 'missing_path' });
      const host = this.#map(sprite, path, url.searchParams.get('workingDir') ?? '/home/sprite');
      const data = body;
      this.#touch(sprite);
      const parent = posix.dirname(host);
      if (url.searchParams.get('mkdirParents') === 'true') mkdirSync(parent, { recursive: true });
      else if (!existsSync(parent)) return json(res, 404, { error: 'parent_not_found' });
      writeFileSync(host, data);
      const mode = url.searchParams.get('mode');
      if (mode && /^[0-7]{3,4}$/.test(mode)) chmodSync(host, Number.parseInt(mode, 8));
      return json(res, 200, { path, size: data.length });
    }
    if (rest[0] === 'fs' && rest[1] === 'read' && method === 'GET') {
      const path = url.searchParams.get('path');
      if (!path) return json(res, 400, { error: 'missing_path' });
      this.#touch(sprite);
      const host = this.#map(sprite, path);
      if (!existsSync(host) || !statSync(host).isFile()) return json(res, 404, { error: 'file_not_found' });
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(host));
      return;
    }
    return json(res, 404, { error: 'not_found' });
  }

  async #create(raw: Buffer, res: ServerResponse): Promise<void> {
    const body = createSchema.safeParse(parseJson(raw));
    if (!body.success || !SPRITE_NAME.test(body.data.name)) return json(res, 400, { error: 'invalid_name' });
    if (this.faults.rateLimitCreates && this.faults.rateLimitCreates > 0) {
      this.faults.rateLimitCreates--;
      return json(res, 429, { error: 'sprite_creation_rate_limited', retry_after_seconds: 7 });
    }
    if (this.#sprites.has(body.data.name))
      return json(res, this.#opts.duplicateStatus, { error: 'sprite_already_exists' });
    const id = `sprite-${this.#nextId++}`;
    const root = join(this.#dir, `${body.data.name}-${id}`);
    mkdirSync(join(root, 'home', 'sprite'), { recursive: true });
    mkdirSync(join(root, 'tmp'), { recursive: true });
    const now = new Date();
    const sprite: StubSprite = {
      id,
      name: body.data.name,
      root,
      created: now,
      updated: now,
      status: 'running',
      rules: [],
      sessions: new Map(),
      exited: new Map(),
      groups: new Set(),
      hibernateTimer: null,
    };
    this.#sprites.set(sprite.name, sprite);
    this.#touch(sprite);
    json(res, 201, this.#record(sprite));
  }

  #list(url: URL, res: ServerResponse): void {
    const prefix = url.searchParams.get('prefix') ?? '';
    const asked = Number(url.searchParams.get('max_results') ?? '50');
    const size = Math.max(1, Math.min(Number.isFinite(asked) ? asked : 50, this.#opts.pageSize));
    const after = url.searchParams.get('continuation_token');
    const names = [...this.#sprites.keys()].filter((n) => n.startsWith(prefix)).sort();
    const start = after ? names.findIndex((n) => n > Buffer.from(after, 'base64url').toString()) : 0;
    const page = start < 0 ? [] : names.slice(start, start + size);
    const hasMore = start >= 0 && start + size < names.length;
    const last = page[page.length - 1];
    json(res, 200, {
      sprites: page.map((n) => ({
        name: n,
        org_slug: 'stub-org',
        updated_at: this.#sprites.get(n)?.updated.toISOString(),
      })),
      has_more: hasMore,
      next_continuation_token:
        hasMore && last && !this.faults.brokenPaging ? Buffer.from(last).toString('base64url') : null,
    });
  }

  async #kill(sprite: StubSprite, id: string, url: URL, res: ServerResponse): Promise<void> {
    const session = sprite.sessions.get(id);
    this.kills.push(id);
    if (!session && sprite.exited.has(id)) return json(res, 410, { error: 'session_exited' });
    if (!session || !session.child) return json(res, 404, { error: 'session_not_found' });
    const signal = (url.searchParams.get('signal') ?? 'TERM').toUpperCase();
    const timeoutMs = parseDuration(url.searchParams.get('timeout') ?? '10s') ?? 10_000;
    this.#touch(sprite);
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    const line = (o: unknown) => res.write(`${JSON.stringify(o)}\n`);
    const child = session.child;
    const exited = new Promise<number>((resolve) => {
      if (session.exited) resolve(child.exitCode ?? 0);
      else child.once('close', (code, sig) => resolve(code ?? 128 + signalNumber(sig)));
    });
    line({ type: 'signal', signal });
    killGroup(child, signal === 'KILL' ? 'SIGKILL' : signal === 'INT' ? 'SIGINT' : 'SIGTERM');
    const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs).unref());
    const first = await Promise.race([exited, timer]);
    if (first === 'timeout') {
      line({ type: 'timeout' });
      killGroup(child, 'SIGKILL');
      await exited;
      line({ type: 'killed' });
    } else {
      line({ type: 'exited', exit_code: first });
    }
    line({ type: 'complete' });
    res.end();
  }

  // ---- exec WebSocket ------------------------------------------------------------------------

  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const refuse = (status: number, error: string) => {
      const body = JSON.stringify({ error });
      socket.end(
        `HTTP/1.1 ${status} Refused\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    };
    if (!this.#authorized(req)) return refuse(401, 'unauthorized');
    const url = new URL(req.url ?? '/', 'http://stub');
    this.requests.push({ method: 'GET', path: url.pathname + url.search, body: '' });
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] !== 'v1' || parts[1] !== 'sprites' || parts[3] !== 'exec' || parts.length > 5)
      return refuse(404, 'not_found');
    const sprite = this.#sprites.get(parts[2] ?? '');
    if (!sprite) return refuse(404, 'sprite_not_found');

    const legacyId = parts.length === 4 ? url.searchParams.get('id') : null;
    if (parts.length === 5 && this.#opts.legacyAttach) return refuse(404, 'not_found');
    if (parts.length === 5 || (legacyId !== null && this.#opts.legacyAttach)) {
      const session = sprite.sessions.get(parts.length === 5 ? (parts[4] ?? '') : (legacyId ?? ''));
      if (!session || session.exited) return refuse(404, 'session_not_found');
      this.#touch(sprite);
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#attachClient(sprite, session, ws, false));
      return;
    }

    const argv = url.searchParams.getAll('cmd');
    if (argv.length === 0) return refuse(400, 'missing_cmd');
    const dirParam = url.searchParams.get('dir');
    const cwd = this.#map(sprite, dirParam ?? '/home/sprite');
    if (!existsSync(cwd) || !statSync(cwd).isDirectory()) return refuse(400, 'invalid_dir');
    const tty = url.searchParams.get('tty') === 'true';
    if (tty) return refuse(400, 'tty_not_supported_by_stub');
    const stdin = url.searchParams.get('stdin') === 'true';
    const maxRunParam = url.searchParams.get('max_run_after_disconnect');
    const maxRunMs = maxRunParam === null ? this.#opts.defaultMaxRunAfterDisconnectMs : parseDuration(maxRunParam);
    if (maxRunMs === null) return refuse(400, 'invalid_max_run_after_disconnect');
    const envParams = url.searchParams.getAll('env');
    // An `env` parameter replaces the whole default environment; it is not merged.
    const env: Record<string, string> = envParams.length
      ? Object.fromEntries(envParams.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
      : {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: this.#opts.isolate ? '/home/sprite' : this.#map(sprite, '/home/sprite'),
          USER: 'sprite',
          LANG: 'C.UTF-8',
          SHELL: '/bin/sh',
          TMPDIR: this.#map(sprite, '/tmp'),
        };
    this.#touch(sprite);
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      // Until the process is registered, stdin frames go nowhere: the acknowledgment is session_info.
      ws.on('message', () => undefined);
      const start = () => {
        if (ws.readyState !== WebSocket.OPEN) return;
        ws.removeAllListeners('message');
        this.#startSession(sprite, ws, argv, {
          cwd,
          cwdInside: posix.resolve('/home/sprite', dirParam ?? '.'),
          env,
          stdin,
          maxRunMs,
          path: url.searchParams.get('path'),
        });
      };
      if (this.#opts.sessionInfoDelayMs > 0) setTimeout(start, this.#opts.sessionInfoDelayMs);
      else start();
    });
  }

  #startSession(
    sprite: StubSprite,
    ws: WebSocket,
    argv: string[],
    o: {
      cwd: string;
      cwdInside: string;
      env: Record<string, string>;
      stdin: boolean;
      maxRunMs: number;
      path: string | null;
    },
  ): void {
    let child: ChildProcess | null = null;
    const stdio: ['pipe' | 'ignore', 'pipe', 'pipe'] = [o.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'];
    try {
      // Isolated, the process sees the sprite's own /home, as in a sprite (a missing binary is then exit 127).
      child = this.#opts.isolate
        ? spawnIsolated(join(sprite.root, 'home'), o.cwdInside, o.path ?? argv[0]!, argv.slice(1), {
            env: o.env,
            stdio,
            detached: true,
          })
        : spawn(o.path ?? argv[0]!, argv.slice(1), { argv0: argv[0], cwd: o.cwd, env: o.env, stdio, detached: true });
    } catch {
      child = null;
    }
    if (!child || child.pid === undefined) {
      child?.on('error', () => undefined);
      // The command could not start: reported like a shell would, with 127.
      const id = String(this.#nextFakePid++);
      send(
        ws,
        JSON.stringify({
          type: 'session_info',
          session_id: Number(id),
          command: argv.join(' '),
          created: Date.now(),
          is_owner: true,
          tty: false,
        }),
      );
      send(ws, Buffer.concat([Buffer.of(2), Buffer.from(`exec: ${argv[0] ?? ''}: not found\n`)]));
      send(ws, Buffer.of(3, 127));
      ws.close(1000);
      return;
    }
    child.on('error', () => undefined);
    child.stdin?.on('error', () => undefined);
    const pid = child.pid;
    sprite.groups.add(pid);
    const session: StubSession = {
      id: String(pid),
      command: argv.join(' '),
      created: new Date(),
      lastActivity: new Date(),
      child,
      clients: new Set(),
      scrollback: [],
      scrollbackSize: 0,
      maxRunMs: o.maxRunMs,
      disconnectTimer: null,
      exited: false,
      infoOwed: null,
    };
    sprite.sessions.set(session.id, session);
    const output = (stream: number) => (data: Buffer) => {
      session.lastActivity = new Date();
      session.scrollback.push({ stream, data });
      session.scrollbackSize += data.length;
      while (session.scrollbackSize > this.#opts.scrollbackBytes && session.scrollback.length > 0) {
        const excess = session.scrollbackSize - this.#opts.scrollbackBytes;
        const first = session.scrollback[0]!;
        if (first.data.length <= excess) {
          session.scrollback.shift();
          session.scrollbackSize -= first.data.length;
        } else {
          // The kept tail starts wherever the byte budget says, mid-line included.
          first.data = first.data.subarray(excess);
          session.scrollbackSize -= excess;
        }
      }
      const frame = Buffer.concat([Buffer.of(stream), data]);
      const marker = this.faults.dropOnOutput;
      const sever = !!marker && data.includes(marker);
      for (const c of [...session.clients]) {
        if (c.readyState !== WebSocket.OPEN) continue;
        // The output reaches the client; then the connection dies with no exit frame.
        c.send(frame, { binary: true }, () => {
          if (sever) c.terminate();
        });
      }
      this.#payInfo(session);
    };
    child.stdout?.on('data', output(1));
    child.stderr?.on('data', output(2));
    child.on('close', (code, sig) => {
      session.exited = true;
      if (session.disconnectTimer) clearTimeout(session.disconnectTimer);
      sprite.sessions.delete(session.id);
      sprite.exited.set(session.id, Object.assign(session, { endedAt: Date.now() }));
      const exitCode = (code ?? 128 + signalNumber(sig)) & 0xff;
      this.#payInfo(session);
      const lose = this.faults.closeWithoutExit;
      const withoutExit =
        !!lose && lose.times > 0 && (!lose.commandIncludes || session.command.includes(lose.commandIncludes));
      if (withoutExit && lose) lose.times--;
      // The exit frame carries one byte: the code. Some fast commands lose it (sprites-py#16).
      for (const c of session.clients) {
        if (!withoutExit) send(c, Buffer.of(3, exitCode));
        c.close(1000);
      }
      session.clients.clear();
      this.#scheduleHibernation(sprite);
    });
    this.#attachClient(sprite, session, ws, true);
  }

  #info(session: StubSession, owner: boolean): string {
    return JSON.stringify({
      type: 'session_info',
      session_id: Number(session.id),
      command: session.command,
      created: session.created.getTime(),
      is_owner: owner,
      tty: false,
    });
  }

  #payInfo(session: StubSession): void {
    const ws = session.infoOwed;
    session.infoOwed = null;
    if (ws) send(ws, this.#info(session, true));
  }

  #attachClient(sprite: StubSprite, session: StubSession, ws: WebSocket, owner: boolean): void {
    if (session.disconnectTimer) clearTimeout(session.disconnectTimer);
    session.disconnectTimer = null;
    session.clients.add(ws);
    if (!owner || this.#opts.sessionInfo === 'first') send(ws, this.#info(session, owner));
    else if (this.#opts.sessionInfo === 'after_output') session.infoOwed = ws;
    if (!owner) {
      // A native attach replays only what is left of the scrollback, then tails.
      for (const { stream, data } of session.scrollback) send(ws, Buffer.concat([Buffer.of(stream), data]));
    }
    ws.on('message', (data: RawData, isBinary: boolean) => {
      session.lastActivity = new Date();
      this.#touch(sprite);
      if (!isBinary) return;
      const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      const stdin = session.child?.stdin;
      if (!stdin || stdin.destroyed || stdin.writableEnded) return;
      if (bytes[0] === 0) stdin.write(bytes.subarray(1));
      else if (bytes[0] === 4) stdin.end();
    });
    ws.on('error', () => undefined);
    ws.on('close', () => {
      session.clients.delete(ws);
      if (session.exited || session.clients.size > 0 || session.maxRunMs === 0) return;
      // Without a kept-alive setting the process dies this long after its last socket dropped.
      session.disconnectTimer = setTimeout(() => {
        if (session.clients.size === 0 && session.child) killGroup(session.child, 'SIGKILL');
      }, session.maxRunMs);
      session.disconnectTimer.unref();
    });
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      // already gone
    }
  }
}

function send(ws: WebSocket, data: Buffer | string): void {
  if (ws.readyState === WebSocket.OPEN) ws.send(data, { binary: typeof data !== 'string' });
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}
