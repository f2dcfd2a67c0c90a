/**
 * A local stand-in for Daytona (control API + toolbox) on 127.0.0.1 that runs real processes,
 * with Daytona's quirks: async lifecycle, 409 names, EOF-per-input-write, missing exit codes, a broken follow socket, tier-gated egress.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, posix } from 'node:path';
import { WebSocketServer } from 'ws';
import { z } from 'zod';
import { isolationWorks, spawnIsolated } from '../isolation.ts';

export interface DaytonaStubOptions {
  readonly apiKey: string;
  /** How long each asynchronous lifecycle transition takes (creating, stopping, starting, destroying). */
  readonly transitionMs?: number;
  /** Organisation tier; below 3 the network-settings endpoint refuses with 400. */
  readonly tier?: number;
  /** Older daemons (still v0.204.0) end the command's stdin after every input write. */
  readonly inputEofPerWrite?: boolean;
  /** `missing`: command records never carry `exitCode` (observed live); `reported`: after drain. */
  readonly exitCodes?: 'missing' | 'reported';
  /** Delay between the 202 of an async session exec and the command actually starting. */
  readonly startDelayMs?: number;
  /** Largest page `GET /sandbox` returns, whatever `limit` asks. */
  readonly pageSize?: number;
  /** Whether processes see the sandbox's own /home (default: when this machine allows it). */
  readonly isolate?: boolean;
}

/** One request as the stub received it, so a test can search what the adapter sent. */
export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly body: string;
}

interface StubCommand {
  readonly id: string;
  readonly command: string;
  exitCode: number | undefined;
  finished: boolean;
  journal: Buffer[];
  proc: ChildProcess | undefined;
  suppressInputEcho: boolean;
  readonly done: Promise<void>;
  resolveDone: () => void;
}

interface StubSession {
  readonly id: string;
  readonly commands: StubCommand[];
  queue: Promise<void>;
}

export interface StubSandbox {
  readonly id: string;
  readonly name: string;
  state: string;
  desiredState: string;
  readonly labels: Record<string, string>;
  readonly env: Record<string, string>;
  readonly snapshot: string | null;
  readonly autoStopInterval: number;
  networkBlockAll: boolean;
  networkAllowList: string;
  domainAllowList: string;
  /**
   * What the runner enforces, which the fields alone do not say: `open` after a settings call
   * that restores general outbound access, else default-deny with the listed exceptions.
   */
  egress: 'open' | 'lists';
  proxyGen: number;
  /** The sandbox's disk on this machine; its `home` directory is what processes see as /home. */
  readonly disk: string;
  /** The sandbox user's home on this machine (`<disk>/home/sprite`). */
  readonly home: string;
  readonly sessions: Map<string, StubSession>;
  readonly createdAt: number;
}

/** The sandbox user's home as processes see it (the fountain snapshot's user is sprite). */
const USER_HOME = '/home/sprite';
const TIER_MESSAGE = 'Network access is restricted and cannot be overridden at the sandbox level';
const STDOUT = Buffer.from([1, 1, 1]);
const STDERR = Buffer.from([2, 2, 2]);

const CreateBody = z.object({
  name: z.string().min(1).max(63).optional(),
  snapshot: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  autoStopInterval: z.number().int().min(0).optional(),
  autoArchiveInterval: z.number().int().optional(),
  autoDeleteInterval: z.number().int().optional(),
  networkBlockAll: z.boolean().optional(),
  networkAllowList: z.string().optional(),
  domainAllowList: z.string().optional(),
});
const NetworkBody = z.object({
  networkBlockAll: z.boolean().optional(),
  networkAllowList: z.string().optional(),
  domainAllowList: z.string().optional(),
});
const ExecuteBody = z.object({
  command: z.string().min(1),
  cwd: z.string().optional(),
  timeout: z.number().int().min(0).optional(),
});
const SessionBody = z.object({ sessionId: z.string().min(1) });
const SessionExecBody = z.object({
  command: z.string().min(1),
  runAsync: z.boolean().optional(),
  async: z.boolean().optional(),
  suppressInputEcho: z.boolean().optional(),
});
const InputBody = z.object({ data: z.string() });

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Word splitting as the daemon does it for `/process/execute`: quotes and backslashes, no shell. */
export function splitWords(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  let word = false;
  let q: '"' | "'" | null = null;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (q === "'") {
      if (c === "'") q = null;
      else cur += c;
    } else if (q === '"') {
      if (c === '"') q = null;
      else if (c === '\\' && i + 1 < s.length && '"\\$`'.includes(s[i + 1]!)) cur += s[++i];
      else cur += c;
    } else if (c === "'" || c === '"') {
      q = c;
      word = true;
    } else if (c === '\\' && i + 1 < s.length) {
      cur += s[++i];
      word = true;
    } else if (/\s/.test(c)) {
      if (word) out.push(cur);
      cur = '';
      word = false;
    } else {
      cur += c;
      word = true;
    }
  }
  if (q) throw new HttpError(400, 'unterminated quote in command');
  if (word) out.push(cur);
  return out;
}

export class DaytonaStub {
  readonly #opts: Required<DaytonaStubOptions>;
  readonly #server: Server;
  readonly #wss = new WebSocketServer({ noServer: true });
  readonly #root: string;
  readonly #sandboxes = new Map<string, StubSandbox>();
  readonly #sockets = new Set<Socket>();
  readonly #timers = new Set<NodeJS.Timeout>();
  #port = 0;
  #stopped = false;
  /** Count of follow-socket connections, so a test can show the adapter never relied on one. */
  followSocketConnections = 0;
  /** Body bytes of every log read and file download: what following a command costs. */
  journalBytesServed = 0;
  /** The organisation's tier (from the options); a test may lower it to see the network-settings refusal. */
  tier: number;
  /** Every HTTP request, for searching what the adapter sent. */
  readonly requests: RecordedRequest[] = [];

  private constructor(opts: DaytonaStubOptions) {
    this.#opts = {
      transitionMs: 30,
      tier: 3,
      inputEofPerWrite: true,
      exitCodes: 'missing',
      startDelayMs: 20,
      pageSize: 200,
      isolate: opts.isolate ?? isolationWorks(),
      ...opts,
    };
    this.tier = this.#opts.tier;
    this.#root = mkdtempSync(join(tmpdir(), 'daytona-stub-'));
    this.#server = createServer((req, res) => void this.#handle(req, res));
    this.#server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    this.#server.on('upgrade', (req, socket, head) => this.#upgrade(req, socket as Socket, head));
  }

  static async start(opts: DaytonaStubOptions): Promise<DaytonaStub> {
    const stub = new DaytonaStub(opts);
    await new Promise<void>((resolve) => stub.#server.listen(0, '127.0.0.1', resolve));
    stub.#port = (stub.#server.address() as AddressInfo).port;
    return stub;
  }

  /** The control API base, as `DAYTONA_API_URL` would name it. */
  get apiUrl(): string {
    return `http://127.0.0.1:${this.#port}/api`;
  }

  /** Whether a sandbox may reach `host` (a domain or an IPv4 address) under its settings. */
  egressAllowed(name: string, host: string): boolean {
    const s = this.sandbox(name);
    if (!s || s.egress === 'open') return true;
    const list = (l: string) =>
      l
        .split(',')
        .map((x) => x.trim().toLowerCase())
        .filter(Boolean);
    const h = host.toLowerCase();
    if (list(s.domainAllowList).some((d) => d === h || (d.startsWith('*.') && h.endsWith(d.slice(1))))) return true;
    return list(s.networkAllowList).some((c) => ipv4InCidr(h, c));
  }

  sandbox(name: string): StubSandbox | undefined {
    return [...this.#sandboxes.values()].find((s) => s.name === name);
  }

  /** Lets `minutes` of API inactivity pass: sandboxes with an auto-stop interval that short are stopped. */
  elapseIdle(minutes: number): void {
    for (const s of this.#sandboxes.values()) {
      if (s.state === 'started' && s.autoStopInterval > 0 && s.autoStopInterval <= minutes) this.#stopSandbox(s);
    }
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t);
    for (const s of this.#sandboxes.values()) this.#killSessions(s);
    for (const c of this.#wss.clients) c.terminate();
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      for (const s of this.#sockets) s.destroy();
    });
    rmSync(this.#root, { recursive: true, force: true });
  }

  // ---- plumbing ----

  #later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.#timers.delete(t);
      fn();
    }, ms);
    this.#timers.add(t);
  }

  #authorised(req: IncomingMessage): boolean {
    return req.headers.authorization === `Bearer ${this.#opts.apiKey}`;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      if (!this.#authorised(req)) throw new HttpError(401, 'Unauthorized');
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const body = await readBody(req);
      this.requests.push({ method: req.method ?? 'GET', path: url.pathname + url.search, body: body.toString('utf8') });
      if (url.pathname.startsWith('/api/')) return this.#control(req.method ?? 'GET', url, body, req, res);
      const m = /^\/toolbox\/g(\d+)\/([^/]+)(\/.*)$/.exec(url.pathname);
      if (m)
        return await this.#toolbox(
          Number(m[1]),
          decodeURIComponent(m[2]!),
          m[3]!,
          req.method ?? 'GET',
          url,
          body,
          req,
          res,
        );
      throw new HttpError(404, 'Cannot ' + req.method + ' ' + url.pathname);
    } catch (e) {
      if (res.headersSent) return void res.destroy();
      const status = e instanceof HttpError ? e.status : 500;
      const message = e instanceof Error ? e.message : String(e);
      json(res, status, { statusCode: status, message, error: statusText(status) });
    }
  }

  // ---- control API ----

  #find(idOrName: string): StubSandbox {
    const s = this.#sandboxes.get(idOrName) ?? this.sandbox(idOrName);
    if (!s) throw new HttpError(404, `Sandbox with ID or name ${idOrName} not found`);
    return s;
  }

  #dto(s: StubSandbox, full = true): Record<string, unknown> {
    const base: Record<string, unknown> = {
      id: s.id,
      name: s.name,
      organizationId: 'org-stub',
      state: s.state,
      desiredState: s.desiredState,
      snapshot: s.snapshot,
      labels: s.labels,
      autoStopInterval: s.autoStopInterval,
      toolboxProxyUrl: `http://127.0.0.1:${this.#port}/toolbox/g${s.proxyGen}`,
      createdAt: new Date(s.createdAt).toISOString(),
      errorReason: null,
    };
    // List items lack env and network fields, as in Daytona's list DTO.
    if (full)
      Object.assign(base, {
        env: s.env,
        networkBlockAll: s.networkBlockAll,
        networkAllowList: s.networkAllowList,
        domainAllowList: s.domainAllowList,
      });
    return base;
  }

  #control(method: string, url: URL, body: Buffer, _req: IncomingMessage, res: ServerResponse): void {
    const path = url.pathname.slice('/api'.length);
    if (method === 'POST' && path === '/sandbox') {
      const b = parse(CreateBody, body);
      const id = randomUUID();
      const name = b.name ?? id;
      if (this.sandbox(name)) throw new HttpError(409, `Sandbox with name ${name} already exists`);
      const disk = join(this.#root, id);
      const home = join(disk, 'home', 'sprite');
      const s: StubSandbox = {
        id,
        name,
        state: 'creating',
        desiredState: 'started',
        labels: b.labels ?? {},
        env: b.env ?? {},
        snapshot: b.snapshot ?? null,
        // Daytona's default: stop after 15 idle minutes.
        autoStopInterval: b.autoStopInterval ?? 15,
        // Create-time fields are accepted whatever the tier; the organisation restriction wins later.
        networkBlockAll: b.networkBlockAll ?? false,
        networkAllowList: b.networkAllowList ?? '',
        domainAllowList: b.domainAllowList ?? '',
        egress: b.networkBlockAll || b.networkAllowList || b.domainAllowList ? 'lists' : 'open',
        proxyGen: 1,
        disk,
        home,
        sessions: new Map(),
        createdAt: Date.now(),
      };
      this.#sandboxes.set(id, s);
      this.#later(this.#opts.transitionMs, () => {
        mkdirSync(home, { recursive: true });
        if (s.state === 'creating') s.state = 'started';
      });
      return json(res, 200, this.#dto(s));
    }
    if (method === 'GET' && path === '/sandbox') {
      const limit = Number(url.searchParams.get('limit') ?? '100');
      if (!Number.isInteger(limit) || limit < 1 || limit > 200)
        throw new HttpError(400, 'limit must be between 1 and 200');
      let labels: Record<string, string> = {};
      const rawLabels = url.searchParams.get('labels');
      if (rawLabels) {
        const p = z.record(z.string(), z.string()).safeParse(safeJson(rawLabels));
        if (!p.success) throw new HttpError(400, 'labels must be a JSON object of strings');
        labels = p.data;
      }
      const all = [...this.#sandboxes.values()]
        .filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
      const start = Number(url.searchParams.get('cursor') ?? '0') || 0;
      const size = Math.min(limit, this.#opts.pageSize);
      const items = all.slice(start, start + size).map((s) => this.#dto(s, false));
      const nextCursor = start + size < all.length ? String(start + size) : null;
      return json(res, 200, { items, nextCursor });
    }
    const m = /^\/sandbox\/([^/]+)(?:\/(start|stop|network-settings))?$/.exec(path);
    if (!m) throw new HttpError(404, `Cannot ${method} ${url.pathname}`);
    const s = this.#find(decodeURIComponent(m[1]!));
    const action = m[2];
    if (!action && method === 'GET') return json(res, 200, this.#dto(s));
    if (!action && method === 'DELETE') {
      this.#killSessions(s);
      s.state = 'destroying';
      s.desiredState = 'destroyed';
      this.#later(this.#opts.transitionMs, () => {
        this.#sandboxes.delete(s.id);
        rmSync(join(this.#root, s.id), { recursive: true, force: true });
      });
      return json(res, 200, this.#dto(s));
    }
    if (method !== 'POST') throw new HttpError(404, `Cannot ${method} ${url.pathname}`);
    if (action === 'stop') {
      if (s.state === 'stopped' || s.state === 'stopping') return json(res, 200, this.#dto(s));
      if (s.state !== 'started') throw new HttpError(400, `Sandbox is not started (state: ${s.state})`);
      this.#stopSandbox(s);
      return json(res, 200, this.#dto(s));
    }
    if (action === 'start') {
      if (s.state === 'started' || s.state === 'starting') return json(res, 200, this.#dto(s));
      if (s.state !== 'stopped' && s.state !== 'archived')
        throw new HttpError(400, `Sandbox cannot be started from state ${s.state}`);
      s.state = 'starting';
      s.desiredState = 'started';
      this.#later(this.#opts.transitionMs, () => {
        // The sandbox may land behind another proxy after a start: the old URL stops routing.
        s.proxyGen += 1;
        s.state = 'started';
      });
      return json(res, 200, this.#dto(s));
    }
    // network-settings
    if (this.tier < 3) throw new HttpError(400, TIER_MESSAGE);
    const b = parse(NetworkBody, body);
    if (b.networkBlockAll === undefined && b.networkAllowList === undefined && b.domainAllowList === undefined) {
      throw new HttpError(400, 'At least one network setting must be provided');
    }
    const count = (l: string) => l.split(',').filter((x) => x.trim() !== '').length;
    if (b.networkAllowList !== undefined && count(b.networkAllowList) > 10)
      throw new HttpError(400, 'networkAllowList accepts at most 10 entries');
    if (b.domainAllowList !== undefined && count(b.domainAllowList) > 10)
      throw new HttpError(400, 'domainAllowList accepts at most 10 entries');
    if (b.networkBlockAll !== undefined) s.networkBlockAll = b.networkBlockAll;
    if (b.networkAllowList !== undefined) {
      s.networkAllowList = b.networkAllowList;
      if (b.networkAllowList !== '') s.networkBlockAll = false;
    }
    if (b.domainAllowList !== undefined) s.domainAllowList = b.domainAllowList;
    // The runner (apps/runner/pkg/docker/network.go): block-all sets a deny-all rule; otherwise a
    // CIDR list replaces the rules, and an empty one removes them, which restores general outbound
    // access whatever the domain list says. A domain list sent on its own is enforced (the SDK's
    // `domain-allow-list` example); that path is not in the public runner, so it is modelled here.
    if (b.networkBlockAll === true) s.egress = 'lists';
    else if (b.networkAllowList !== undefined) s.egress = b.networkAllowList === '' ? 'open' : 'lists';
    else if (b.networkBlockAll === false) s.egress = 'open';
    else if (b.domainAllowList !== undefined)
      s.egress = b.domainAllowList === '' && !s.networkBlockAll ? 'open' : 'lists';
    return json(res, 200, this.#dto(s));
  }

  #stopSandbox(s: StubSandbox): void {
    s.state = 'stopping';
    s.desiredState = 'stopped';
    // Stop keeps the disk but kills every process and the daemon's in-memory sessions.
    this.#killSessions(s);
    this.#later(this.#opts.transitionMs, () => {
      if (s.state === 'stopping') s.state = 'stopped';
    });
  }

  #killSessions(s: StubSandbox): void {
    for (const sess of s.sessions.values()) for (const c of sess.commands) killGroup(c.proc, 'SIGKILL');
    s.sessions.clear();
  }

  // ---- toolbox ----

  #startedSandbox(gen: number, id: string): StubSandbox {
    const s = this.#sandboxes.get(id);
    // The proxy cannot route to a sandbox that is not running, nor from a stale proxy URL.
    if (!s || s.state !== 'started' || s.proxyGen !== gen) throw new HttpError(502, 'Bad Gateway');
    return s;
  }

  async #toolbox(
    gen: number,
    id: string,
    path: string,
    method: string,
    url: URL,
    body: Buffer,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const s = this.#startedSandbox(gen, id);
    if (method === 'GET' && path === '/user-home-dir')
      return json(res, 200, { dir: this.#opts.isolate ? USER_HOME : s.home });
    if (method === 'POST' && path === '/process/execute') return this.#execute(s, parse(ExecuteBody, body), res);
    if (method === 'POST' && path === '/files/bulk-upload') return this.#upload(s, req, body, res);
    if (method === 'GET' && path === '/files/download') {
      const p = url.searchParams.get('path');
      if (!p) throw new HttpError(400, 'path is required');
      let data: Buffer;
      try {
        data = readFileSync(this.#resolvePath(s, p));
      } catch {
        throw new HttpError(404, `file not found: ${p}`);
      }
      // The daemon serves downloads with gin's c.File (Go's http.ServeFile): `Range: bytes=N-`
      // gets 206 with the rest of the file, or 416 when N is at or past the end.
      const range = /^bytes=(\d+)-$/.exec(String(req.headers.range ?? ''));
      if (range) {
        const from = Number(range[1]);
        if (from >= data.length) {
          res.writeHead(416, { 'content-range': `bytes */${data.length}`, 'content-length': 0 });
          return void res.end();
        }
        const part = data.subarray(from);
        this.journalBytesServed += part.length;
        res.writeHead(206, {
          'content-type': 'application/octet-stream',
          'content-range': `bytes ${from}-${data.length - 1}/${data.length}`,
          'content-length': part.length,
        });
        return void res.end(part);
      }
      this.journalBytesServed += data.length;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length });
      return void res.end(data);
    }
    if (path === '/process/session') {
      if (method === 'GET') return json(res, 200, [...s.sessions.values()].map(sessionDto));
      if (method === 'POST') {
        const b = parse(SessionBody, body);
        if (s.sessions.has(b.sessionId)) throw new HttpError(409, `session ${b.sessionId} already exists`);
        s.sessions.set(b.sessionId, { id: b.sessionId, commands: [], queue: Promise.resolve() });
        res.writeHead(201);
        return void res.end();
      }
    }
    const m = /^\/process\/session\/([^/]+)(?:\/(exec)|\/command\/([^/]+)(?:\/(logs|input))?)?$/.exec(path);
    if (!m) throw new HttpError(404, `Cannot ${method} ${path}`);
    const sess = s.sessions.get(decodeURIComponent(m[1]!));
    if (!sess) throw new HttpError(404, 'session not found');
    if (!m[2] && !m[3]) {
      if (method === 'GET') return json(res, 200, sessionDto(sess));
      if (method === 'DELETE') {
        await terminate(sess);
        s.sessions.delete(sess.id);
        res.writeHead(204);
        return void res.end();
      }
      throw new HttpError(404, `Cannot ${method} ${path}`);
    }
    if (m[2] === 'exec' && method === 'POST') return this.#sessionExec(s, sess, parse(SessionExecBody, body), res);
    const cmd = sess.commands.find((c) => c.id === decodeURIComponent(m[3] ?? ''));
    if (!cmd) throw new HttpError(404, 'command not found');
    if (!m[4] && method === 'GET') return json(res, 200, this.#commandDto(cmd));
    if (m[4] === 'logs' && method === 'GET') {
      const raw = Buffer.concat(cmd.journal);
      const split =
        req.headers['x-daytona-split-output'] === 'true' || sdkAtLeast(req.headers['x-daytona-sdk-version'], 0, 27);
      // Without the split header (or a new enough SDK version) the markers are stripped and the
      // two streams come back merged: a client that forgot the header cannot tell them apart.
      const out = split ? raw : stripMarkers(raw);
      this.journalBytesServed += out.length;
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': out.length });
      return void res.end(out);
    }
    if (m[4] === 'input' && method === 'POST') {
      const b = parse(InputBody, body);
      if (cmd.finished || !cmd.proc?.stdin || cmd.proc.stdin.destroyed) {
        if (cmd.finished) throw new HttpError(410, 'command has already finished');
      }
      // Not byte-exact: a newline is appended when missing.
      const data = b.data.endsWith('\n') ? b.data : `${b.data}\n`;
      if (!cmd.suppressInputEcho) appendLines(cmd, STDOUT, Buffer.from(data));
      const stdin = cmd.proc?.stdin;
      if (stdin && !stdin.destroyed && !stdin.writableEnded) {
        stdin.write(data);
        // Older daemons close the FIFO after each write: the command sees EOF.
        if (this.#opts.inputEofPerWrite) stdin.end();
      }
      res.writeHead(204);
      return void res.end();
    }
    throw new HttpError(404, `Cannot ${method} ${path}`);
  }

  #commandDto(c: StubCommand): Record<string, unknown> {
    const dto: Record<string, unknown> = { id: c.id, command: c.command };
    if (this.#opts.exitCodes === 'reported' && c.finished && c.exitCode !== undefined) dto.exitCode = c.exitCode;
    return dto;
  }

  /** Where a sandbox path lives here: under /home it is the sandbox's own disk (when isolated). */
  #resolvePath(s: StubSandbox, p: string): string {
    if (!isAbsolute(p)) return join(s.home, p);
    return this.#opts.isolate && (p === '/home' || p.startsWith('/home/')) ? join(s.disk, posix.normalize(p)) : p;
  }

  #env(s: StubSandbox): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      LANG: 'C.UTF-8',
      ...s.env,
      HOME: this.#opts.isolate ? USER_HOME : s.home,
    };
  }

  /** Whether the sandbox could start `cmd` (a path, or a name on its PATH). */
  #findable(s: StubSandbox, cmd: string): boolean {
    const runnable = (p: string) => {
      try {
        accessSync(p, constants.X_OK);
        return statSync(p).isFile();
      } catch {
        return false;
      }
    };
    if (cmd.includes('/')) return runnable(this.#resolvePath(s, cmd));
    return (this.#env(s).PATH ?? '').split(':').some((d) => d !== '' && runnable(this.#resolvePath(s, join(d, cmd))));
  }

  /** A process in the sandbox: `cwd` is a sandbox path; isolated, it sees the sandbox's /home. */
  #spawn(
    s: StubSandbox,
    cmd: string,
    args: readonly string[],
    cwd: string | undefined,
    stdio: SpawnOptions['stdio'],
    extraEnv: NodeJS.ProcessEnv = {},
  ): ChildProcess {
    const env = { ...this.#env(s), ...extraEnv };
    if (this.#opts.isolate)
      return spawnIsolated(join(s.disk, 'home'), cwd ?? USER_HOME, cmd, args, { env, detached: true, stdio });
    return spawn(cmd, args, { cwd: cwd ?? s.home, env, detached: true, stdio });
  }

  #execute(s: StubSandbox, b: z.infer<typeof ExecuteBody>, res: ServerResponse): void {
    const argv = splitWords(b.command);
    if (argv.length === 0) throw new HttpError(400, 'empty command');
    // The daemon starts the binary itself: one it cannot find reports -1 (daytona#2283), not a shell's 127.
    if (!this.#findable(s, argv[0]!))
      return json(res, 200, { exitCode: -1, result: `exec: "${argv[0]}": executable file not found in $PATH` });
    const chunks: Buffer[] = [];
    let proc: ChildProcess;
    try {
      proc = this.#spawn(s, argv[0]!, argv.slice(1), b.cwd, ['ignore', 'pipe', 'pipe']);
    } catch (e) {
      return json(res, 200, { exitCode: -1, result: String(e) });
    }
    let timedOut = false;
    const timer = b.timeout
      ? setTimeout(() => ((timedOut = true), killGroup(proc, 'SIGKILL')), b.timeout * 1000)
      : undefined;
    proc.stdout?.on('data', (d: Buffer) => chunks.push(d));
    proc.stderr?.on('data', (d: Buffer) => chunks.push(d));
    proc.on('error', (e) => {
      if (timer) clearTimeout(timer);
      // A command that cannot start reports exit code -1 (daytona#2283).
      if (!res.headersSent) json(res, 200, { exitCode: -1, result: e.message });
    });
    proc.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      if (res.headersSent) return;
      if (timedOut)
        return json(res, 408, { statusCode: 408, message: 'command execution timeout', error: 'Request Timeout' });
      json(res, 200, {
        exitCode: code ?? (signal ? 128 + signalNumber(signal) : -1),
        result: Buffer.concat(chunks).toString('utf8'),
      });
    });
  }

  async #upload(s: StubSandbox, req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
    const form = await new Request('http://stub/upload', {
      method: 'POST',
      headers: { 'content-type': req.headers['content-type'] ?? '' },
      body: new Uint8Array(body),
    })
      .formData()
      .catch(() => {
        throw new HttpError(400, 'expected multipart/form-data');
      });
    let n = 0;
    for (let i = 0; ; i++) {
      const path = form.get(`files[${i}].path`);
      const file = form.get(`files[${i}].file`);
      if (path === null && file === null) break;
      if (typeof path !== 'string' || file === null || typeof file === 'string')
        throw new HttpError(400, `files[${i}] needs path and file`);
      const target = this.#resolvePath(s, path);
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, new Uint8Array(await file.arrayBuffer()));
      n++;
    }
    if (n === 0) throw new HttpError(400, 'no files');
    res.writeHead(200);
    res.end();
  }

  #sessionExec(s: StubSandbox, sess: StubSession, b: z.infer<typeof SessionExecBody>, res: ServerResponse): void {
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    const cmd: StubCommand = {
      id: randomUUID(),
      command: b.command,
      exitCode: undefined,
      finished: false,
      journal: [],
      proc: undefined,
      suppressInputEcho: b.suppressInputEcho ?? false,
      done,
      resolveDone,
    };
    sess.commands.push(cmd);
    const run = async () => {
      // 202 only means the command was queued into the session shell; it starts a little later.
      await new Promise((r) => setTimeout(r, this.#opts.startDelayMs));
      if (!s.sessions.has(sess.id)) return cmd.resolveDone();
      this.#runInSession(s, cmd);
      await cmd.done;
    };
    // Commands in one session run one after another in one shell.
    sess.queue = sess.queue.then(run);
    if (b.runAsync || b.async) return json(res, 202, { cmdId: cmd.id });
    void cmd.done.then(() => {
      const raw = Buffer.concat(cmd.journal);
      json(res, 200, {
        cmdId: cmd.id,
        exitCode: cmd.exitCode,
        output: stripMarkers(raw).toString('utf8'),
        stdout: onlyStream(raw, 1).toString('utf8'),
        stderr: onlyStream(raw, 2).toString('utf8'),
      });
    });
  }

  #runInSession(s: StubSandbox, cmd: StubCommand): void {
    let proc: ChildProcess;
    try {
      // The daemon writes the line into the session's shell, so it is in no process's argv: the
      // stub's shell takes it from its environment and drops it from there before running it.
      proc = this.#spawn(
        s,
        'sh',
        ['-c', 'c=$DAYTONA_STUB_LINE; unset DAYTONA_STUB_LINE; eval "$c"'],
        undefined,
        ['pipe', 'pipe', 'pipe'],
        { DAYTONA_STUB_LINE: cmd.command },
      );
    } catch (e) {
      // The session shell could not even be handed the line (e.g. a NUL byte): the command fails.
      appendLines(cmd, STDERR, Buffer.from(`${String(e)}\n`));
      cmd.finished = true;
      cmd.exitCode = -1;
      cmd.resolveDone();
      return;
    }
    cmd.proc = proc;
    proc.stdin?.on('error', () => undefined);
    // The daemon labels output with a `read -r line` loop: lines appear only when complete,
    // a newline is added at EOF, NUL bytes are lost.
    const label = (marker: Buffer) => {
      let partial = Buffer.alloc(0);
      return {
        data: (d: Buffer) => {
          const all = Buffer.concat([partial, d]);
          const last = all.lastIndexOf(0x0a);
          if (last < 0) {
            partial = all;
            return;
          }
          appendLines(cmd, marker, all.subarray(0, last + 1));
          partial = Buffer.from(all.subarray(last + 1));
        },
        end: () => {
          if (partial.length > 0) appendLines(cmd, marker, Buffer.concat([partial, Buffer.from('\n')]));
          partial = Buffer.alloc(0);
        },
      };
    };
    const out = label(STDOUT);
    const errl = label(STDERR);
    proc.stdout?.on('data', out.data).on('end', out.end);
    proc.stderr?.on('data', errl.data).on('end', errl.end);
    proc.on('error', () => {
      cmd.finished = true;
      cmd.exitCode = -1;
      cmd.resolveDone();
    });
    proc.on('close', (code, signal) => {
      cmd.finished = true;
      cmd.exitCode = code ?? (signal ? 128 + signalNumber(signal) : -1);
      cmd.resolveDone();
    });
  }

  /** The follow socket: it replays an arbitrary prefix of the journal, then closes at once (managoat/fountain #691). */
  #upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const m = /^\/toolbox\/g(\d+)\/([^/]+)\/process\/session\/([^/]+)\/command\/([^/]+)\/logs$/.exec(url.pathname);
    if (!this.#authorised(req) || !m || url.searchParams.get('follow') !== 'true') {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    const s = this.#sandboxes.get(decodeURIComponent(m[2]!));
    const cmd = s?.sessions.get(decodeURIComponent(m[3]!))?.commands.find((c) => c.id === decodeURIComponent(m[4]!));
    if (!s || !cmd || s.proxyGen !== Number(m[1])) {
      socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
      return;
    }
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      this.followSocketConnections++;
      const raw = Buffer.concat(cmd.journal);
      const cut = Math.floor(Math.random() * (raw.length + 1));
      if (cut > 0) ws.send(raw.subarray(0, cut), { binary: true });
      ws.close(1000);
    });
  }
}

// ---- helpers ----

function ipv4InCidr(ip: string, cidr: string): boolean {
  const m = /^(\d{1,3}(?:\.\d{1,3}){3})(?:\/(\d{1,2}))?$/;
  const a = m.exec(ip);
  const c = m.exec(cidr);
  if (!a || !c || a[2]) return false;
  const bits = c[2] === undefined ? 32 : Number(c[2]);
  const n = (x: string) => x.split('.').reduce((v, o) => (v << 8) + Number(o), 0) >>> 0;
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return (n(a[1]!) & mask) === (n(c[1]!) & mask);
}

function appendLines(cmd: StubCommand, marker: Buffer, text: Buffer): void {
  const clean = Buffer.from(text.filter((b) => b !== 0));
  let start = 0;
  while (start < clean.length) {
    const nl = clean.indexOf(0x0a, start);
    const end = nl < 0 ? clean.length : nl + 1;
    cmd.journal.push(Buffer.concat([marker, clean.subarray(start, end)]));
    start = end;
  }
}

function stripMarkers(raw: Buffer): Buffer {
  const parts: Buffer[] = [];
  let pos = 0;
  while (pos < raw.length) {
    const nl = raw.indexOf(0x0a, pos);
    const end = nl < 0 ? raw.length : nl + 1;
    const marked = raw[pos] === raw[pos + 1] && raw[pos] === raw[pos + 2] && (raw[pos] === 1 || raw[pos] === 2);
    parts.push(raw.subarray(marked ? pos + 3 : pos, end));
    pos = end;
  }
  return Buffer.concat(parts);
}

function onlyStream(raw: Buffer, marker: 1 | 2): Buffer {
  const parts: Buffer[] = [];
  let pos = 0;
  while (pos < raw.length) {
    const nl = raw.indexOf(0x0a, pos);
    const end = nl < 0 ? raw.length : nl + 1;
    if (raw[pos] === marker && raw[pos + 1] === marker && raw[pos + 2] === marker)
      parts.push(raw.subarray(pos + 3, end));
    pos = end;
  }
  return Buffer.concat(parts);
}

function sessionDto(s: StubSession): Record<string, unknown> {
  // Session listings never carry exit codes in the stub (they are unreliable in Daytona too).
  return { sessionId: s.id, commands: s.commands.map((c) => ({ id: c.id, command: c.command })) };
}

async function terminate(sess: StubSession): Promise<void> {
  const live = sess.commands.filter((c) => !c.finished && c.proc);
  for (const c of live) killGroup(c.proc, 'SIGTERM');
  await Promise.race([Promise.all(live.map((c) => c.done)), new Promise((r) => setTimeout(r, 500))]);
  for (const c of live) if (!c.finished) killGroup(c.proc, 'SIGKILL');
}

function killGroup(proc: ChildProcess | undefined, signal: NodeJS.Signals): void {
  if (!proc?.pid || proc.exitCode !== null) return;
  try {
    process.kill(-proc.pid, signal);
  } catch {
    // Already gone.
  }
}

function signalNumber(signal: NodeJS.Signals): number {
  return ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15, SIGPIPE: 13 } as Record<string, number>)[signal] ?? 0;
}

function sdkAtLeast(h: string | string[] | undefined, major: number, minor: number): boolean {
  const v = typeof h === 'string' ? /^(\d+)\.(\d+)/.exec(h) : null;
  return !!v && (Number(v[1]) > major || (Number(v[1]) === major && Number(v[2]) >= minor));
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function parse<S extends z.ZodType>(schema: S, body: Buffer): z.output<S> {
  const r = schema.safeParse(safeJson(body.toString('utf8')));
  if (!r.success) throw new HttpError(400, r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  return r.data;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function statusText(s: number): string {
  return (
    (
      {
        400: 'Bad Request',
        401: 'Unauthorized',
        404: 'Not Found',
        408: 'Request Timeout',
        409: 'Conflict',
        410: 'Gone',
        502: 'Bad Gateway',
      } as Record<number, string>
    )[s] ?? 'Error'
  );
}
