/**
 * FakeDaemon: an in-memory runner daemon that speaks the real wire protocol over a loopback
 * WebSocket, running commands in the fake script vocabulary (fake-daemon-state.ts).
 */
import type { Logger } from 'pino';
import { WebSocket } from 'ws';
import type { Reply, Request, RequestOf, StreamFrame } from '../../wire/index.ts';
import { decodeBase64, decodeFrame, encodeBase64, encodeFrame, errorReply, okReply } from '../../wire/index.ts';
import { startRunnerTestHub } from './test-hub.ts';
import type { RunnerTestHub } from './test-hub.ts';
import type { RunnerConnection } from './host.ts';
import { FAKE_ROOT, parseScript, rawText } from './fake-daemon-state.ts';
import type { FakeDaemonOptions, FakeSandbox, FakeSession } from './fake-daemon-state.ts';

export { FAKE_ROOT, type FakeDaemonOptions } from './fake-daemon-state.ts';

export class FakeDaemon {
  readonly runnerId: string;
  readonly name: string;
  readonly hub: RunnerTestHub;
  /** Every request the server sent, decoded, in arrival order. */
  readonly received: Request[] = [];
  /** Every text frame this daemon sent, in order, across connections. */
  readonly sent: string[] = [];
  /** How many WS pings the server sent (the heartbeat). */
  pings = 0;
  /** How many times the daemon has connected. */
  connects = 0;

  readonly #sandboxes = new Map<string, FakeSandbox>();
  readonly #sessions = new Map<string, FakeSession>();
  readonly #log: Logger;
  readonly #reconnect: boolean;
  readonly #intercept: FakeDaemonOptions['intercept'];
  readonly #ownsHub: boolean;
  readonly #capabilities: readonly string[] | undefined;
  readonly #headers: Readonly<Record<string, string>>;
  #seq = 0;
  #ws: WebSocket | undefined;
  #stopping = false;

  constructor(opts: FakeDaemonOptions, hub: RunnerTestHub, ownsHub: boolean) {
    this.runnerId = opts.runnerId;
    this.name = opts.name ?? 'fake';
    this.hub = hub;
    this.#ownsHub = ownsHub;
    this.#log = opts.logger.child({ fake_daemon: this.name });
    this.#reconnect = opts.reconnect ?? true;
    this.#intercept = opts.intercept;
    this.#capabilities = opts.capabilities;
    this.#headers = opts.headers ?? {};
  }

  /** The allow list last applied to a sandbox (null: none yet; undefined: no such sandbox). */
  policy(sandbox: string): readonly string[] | null | undefined {
    return this.#sandboxes.get(sandbox)?.policy;
  }

  /** The journal of one session (wire frames without `replay_for`). */
  journal(sessionId: string): readonly StreamFrame[] {
    return this.#sessions.get(sessionId)?.journal ?? [];
  }

  /** A file written with write_file, for assertions. */
  file(sandbox: string, path: string): Buffer | undefined {
    return this.#sandboxes.get(sandbox)?.files.get(path)?.data;
  }

  /** The server's live connection for this runner, once registered. */
  connection(): RunnerConnection | undefined {
    return this.hub.host.whereis(this.runnerId);
  }

  /** True while the socket is up and the server has this runner registered. */
  get online(): boolean {
    return this.connection() !== undefined && this.#ws?.readyState === WebSocket.OPEN;
  }

  /** Waits until the server has (re-)registered this runner, e.g. after a drop (hang guard: `timeoutMs`). */
  async waitOnline(timeoutMs = 5000): Promise<RunnerConnection> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const conn = this.connection();
      if (conn && this.#ws?.readyState === WebSocket.OPEN) return conn;
      if (Date.now() > deadline) throw new Error(`fake daemon ${this.name} did not come online`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Closes the socket under the sessions, which keep running; the daemon dials again unless told not to. */
  drop(): void {
    const ws = this.#ws;
    if (!ws) return;
    // A close frame queues behind every frame already sent, so the server sees them all first.
    try {
      ws.close(1001, 'fake daemon dropped the socket');
    } catch {
      ws.terminate();
    }
  }

  /** Closes the socket (1 s grace, then terminates) and the daemon's own hub; never throws. */
  async stop(): Promise<void> {
    this.#stopping = true;
    const ws = this.#ws;
    try {
      if (ws && ws.readyState !== WebSocket.CLOSED) {
        const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
        ws.close(1000, 'shutdown');
        const timer = setTimeout(() => ws.terminate(), 1000);
        await closed;
        clearTimeout(timer);
      }
      if (this.#ownsHub) await this.hub.close();
    } catch (e) {
      this.#log.warn({ err: String(e) }, 'fake daemon stop');
    }
  }

  /** One dial; resolves when open, rejects on refusal. */
  dial(): Promise<void> {
    const url = new URL(this.hub.url);
    url.searchParams.set('name', this.name);
    url.searchParams.set('hostname', `${this.name}.fake`);
    url.searchParams.set('os', 'linux');
    url.searchParams.set('arch', 'amd64');
    url.searchParams.set('version', 'fake-daemon');
    url.searchParams.set('root', FAKE_ROOT);
    if (this.#capabilities) url.searchParams.set('capabilities', this.#capabilities.join(','));
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers: { ...this.#headers } });
      let opened = false;
      ws.on('unexpected-response', (_req, res) => {
        reject(new Error(`dial refused with ${res.statusCode}`));
        ws.terminate();
      });
      ws.on('error', (e) => {
        if (!opened) reject(e);
      });
      ws.on('open', () => {
        opened = true;
        this.#ws = ws;
        this.connects += 1;
        resolve();
      });
      ws.on('ping', () => {
        this.pings += 1;
      });
      ws.on('message', (data, isBinary) => {
        if (!isBinary) this.#onText(rawText(data));
      });
      ws.on('close', () => {
        if (this.#ws === ws) this.#ws = undefined;
        if (opened && !this.#stopping && this.#reconnect) void this.#redial();
      });
    });
  }

  async #redial(): Promise<void> {
    let delay = 10;
    while (!this.#stopping) {
      try {
        await this.dial();
        return;
      } catch {
        // 409 while the server has not yet seen the old socket close: back off briefly, like the daemon.
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 200);
      }
    }
  }

  #send(frame: Reply | StreamFrame): void {
    const text = encodeFrame(frame);
    this.#sendText(text);
  }

  #sendText(text: string): void {
    const ws = this.#ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    this.sent.push(text);
    ws.send(text);
  }

  #onText(text: string): void {
    const inbound = decodeFrame(text);
    if (inbound.kind === 'refused') {
      if (inbound.id !== undefined) this.#send(errorReply(inbound.id, inbound.code, inbound.detail));
      else this.#log.warn({ detail: inbound.detail }, 'fake daemon skipped a malformed frame');
      return;
    }
    if (inbound.kind !== 'request') return;
    const req = inbound.request;
    this.received.push(req);
    const raw = this.#intercept?.(req);
    if (raw === null) return;
    if (raw !== undefined) {
      for (const t of Array.isArray(raw) ? raw : [raw]) this.#sendText(t);
      return;
    }
    this.#handle(req);
  }

  #handle(req: Request): void {
    switch (req.op) {
      case 'create':
        if (!this.#sandboxes.has(req.name))
          this.#sandboxes.set(req.name, { status: 'running', files: new Map(), policy: null });
        return this.#send(okReply(req.id));
      case 'get': {
        const sb = this.#sandboxes.get(req.name);
        return this.#send(
          sb
            ? okReply(req.id, { status: sb.status, path: `${FAKE_ROOT}/${req.name}` })
            : errorReply(req.id, 'not_found', 'no such sandbox'),
        );
      }
      case 'destroy':
        this.#sandboxes.delete(req.name);
        for (const [id, s] of this.#sessions) if (s.sandbox === req.name) this.#sessions.delete(id);
        return this.#send(okReply(req.id));
      case 'list':
        return this.#send(okReply(req.id, { names: [...this.#sandboxes.keys()].sort() }));
      case 'suspend':
      case 'resume': {
        const sb = this.#sandboxes.get(req.name);
        if (!sb) return this.#send(errorReply(req.id, 'not_found', 'no such sandbox'));
        sb.status = req.op === 'suspend' ? 'suspended' : 'running';
        return this.#send(okReply(req.id));
      }
      case 'write_file': {
        const sb = this.#sandboxes.get(req.name);
        if (!sb) return this.#send(errorReply(req.id, 'not_found', 'no such sandbox'));
        sb.files.set(req.path, { data: decodeBase64(req.data) ?? Buffer.alloc(0), mode: req.mode ?? null });
        return this.#send(okReply(req.id));
      }
      case 'exec':
        return this.#exec(req);
      case 'spawn':
        return this.#spawn(req);
      case 'stdin':
        return this.#stdin(req);
      case 'stdin_close': {
        const s = this.#sessions.get(req.session_id);
        if (!s) return this.#send(errorReply(req.id, 'not_found', 'no such session'));
        if (s.exitCode !== null) return this.#send(errorReply(req.id, 'command_exited', 'session has exited'));
        this.#send(okReply(req.id));
        if (s.staying) this.#exit(s, 0);
        return;
      }
      case 'detach': {
        const s = this.#sessions.get(req.session_id);
        if (s) s.attached = false;
        return this.#send(okReply(req.id));
      }
      case 'list_sessions': {
        if (!this.#sandboxes.has(req.name)) return this.#send(errorReply(req.id, 'not_found', 'no such sandbox'));
        const sessions = [...this.#sessions.values()]
          .filter((s) => s.sandbox === req.name)
          .sort((a, b) => b.seq - a.seq)
          .map((s) => ({
            id: s.id,
            command: s.cmd,
            created_at: s.createdAt.toISOString(),
            last_activity_at: s.lastActivityAt.toISOString(),
            tty: false,
            ...(s.exitCode === null ? {} : { exit_code: s.exitCode }),
          }));
        return this.#send(okReply(req.id, { sessions }));
      }
      case 'attach':
        return this.#attach(req);
      case 'ping':
        return this.#send(errorReply(req.id, 'not_supported', 'ping'));
      case 'apply_network_policy': {
        if (!this.#capabilities?.includes('network_policy'))
          return this.#send(errorReply(req.id, 'not_supported', req.op));
        const sb = this.#sandboxes.get(req.name);
        if (!sb) return this.#send(errorReply(req.id, 'not_found', 'no such sandbox'));
        sb.policy = [...req.allow];
        return this.#send(okReply(req.id));
      }
    }
  }

  #exec(req: RequestOf<'exec'>): void {
    if (!this.#sandboxes.has(req.name)) return this.#send(errorReply(req.id, 'not_found', 'no such sandbox'));
    const chunks: Buffer[] = [];
    let code: number | null = null;
    for (const step of parseScript(req.args)) {
      if (step.kind === 'out' || (step.kind === 'err' && req.stderr_to_stdout)) chunks.push(Buffer.from(step.data));
      else if (step.kind === 'exit') {
        code = step.code;
        break;
      } else if (step.kind === 'drop') return this.#send(errorReply(req.id, 'unavailable', 'closed_before_exit'));
    }
    this.#send(okReply(req.id, { output: encodeBase64(Buffer.concat(chunks)), code: code ?? 0 }));
  }

  #spawn(req: RequestOf<'spawn'>): void {
    if (!this.#sandboxes.has(req.name)) return this.#send(errorReply(req.id, 'not_found', 'no such sandbox'));
    const seq = ++this.#seq;
    const now = new Date();
    const s: FakeSession = {
      id: `s-${seq}`,
      seq,
      sandbox: req.name,
      cmd: req.cmd,
      createdAt: now,
      lastActivityAt: now,
      journal: [],
      attached: false,
      exitCode: null,
      staying: false,
    };
    this.#sessions.set(s.id, s);
    // Reply first; the follow-up step attaches the spawner and runs the script.
    this.#send(okReply(req.id, { session_id: s.id }));
    s.attached = true;
    for (const step of parseScript(req.args)) {
      switch (step.kind) {
        case 'out':
          this.#emit(s, { stream: 'stdout', session_id: s.id, data: encodeBase64(Buffer.from(step.data)) });
          break;
        case 'err':
          this.#emit(s, { stream: 'stderr', session_id: s.id, data: encodeBase64(Buffer.from(step.data)) });
          break;
        case 'exit':
          return this.#exit(s, step.code);
        case 'stay':
          s.staying = true;
          return;
        case 'drop':
          // The session lives on in the daemon; only the socket goes, so no exit reaches the server.
          s.staying = true;
          return this.drop();
      }
    }
    this.#exit(s, 0);
  }

  #stdin(req: RequestOf<'stdin'>): void {
    const s = this.#sessions.get(req.session_id);
    if (!s) return this.#send(errorReply(req.id, 'not_found', 'no such session'));
    if (s.exitCode !== null) return this.#send(errorReply(req.id, 'command_exited', 'session has exited'));
    s.lastActivityAt = new Date();
    this.#send(okReply(req.id));
    if (s.staying) {
      const data = decodeBase64(req.data) ?? Buffer.alloc(0);
      this.#emit(s, {
        stream: 'stdout',
        session_id: s.id,
        data: encodeBase64(Buffer.concat([Buffer.from('echo:'), data])),
      });
    }
  }

  #attach(req: RequestOf<'attach'>): void {
    const s = this.#sessions.get(req.session_id);
    if (!this.#sandboxes.has(req.name) || !s || s.sandbox !== req.name) {
      return this.#send(errorReply(req.id, 'not_found', 'no such session'));
    }
    this.#send(okReply(req.id, { session_id: s.id }));
    for (const frame of s.journal) this.#send({ ...frame, replay_for: req.id });
    s.attached = true;
  }

  #emit(s: FakeSession, frame: StreamFrame): void {
    s.journal.push(frame);
    s.lastActivityAt = new Date();
    if (s.attached) this.#send(frame);
  }

  #exit(s: FakeSession, code: number): void {
    s.exitCode = code;
    s.staying = false;
    this.#emit(s, { stream: 'exit', session_id: s.id, code });
  }
}

/**
 * Starts a fake daemon and waits until the server registered it. Without `hub` it brings its own
 * (a LocalRunnerHost behind a loopback hub), reachable as `daemon.hub`.
 */
export async function startFakeDaemon(opts: FakeDaemonOptions): Promise<FakeDaemon> {
  const hub = opts.hub ?? (await startRunnerTestHub({ logger: opts.logger }));
  const daemon = new FakeDaemon(opts, hub, opts.hub === undefined);
  hub.enroll(daemon.name, opts.runnerId);
  try {
    await daemon.dial();
    await daemon.waitOnline();
  } catch (e) {
    await daemon.stop();
    throw e;
  }
  return daemon;
}
