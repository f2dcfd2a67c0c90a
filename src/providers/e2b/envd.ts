/**
 * Client for envd, the daemon inside an E2B sandbox: the official Connect transport over E2B's
 * published process and filesystem services, plus the multipart file upload (plain HTTP).
 */
import { randomBytes } from 'node:crypto';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import type { CallOptions, Client, Transport } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import type { SandboxError, SandboxResult } from '../../sandbox/index.ts';
import { err, ok } from '../../sandbox/index.ts';
import { ENVD_PORT } from './config.ts';
import { fromConnect, fromHttp } from './errors.ts';
import { Filesystem } from './gen/filesystem_pb.ts';
import { Process, Signal } from './gen/process_pb.ts';
import type { ProcessEvent } from './gen/process_pb.ts';
import { call } from './http.ts';

export interface EnvdTarget {
  readonly sandboxId: string;
  readonly accessToken: string | null;
  /** Where envd is reached; requests also name the sandbox in headers (`E2b-Sandbox-Id`). */
  readonly sandboxUrl: string;
}

export interface EnvdOptions {
  /** The Linux user commands run as; absent = envd's default user. */
  readonly user?: string;
  /** Deadline of one unary call and of the wait for a stream's response headers. */
  readonly timeoutMs: number;
  /** Seconds between envd keepalive events on a stream, so idle streams stay distinguishable from dead ones. */
  readonly keepaliveS: number;
  /** Other secrets to scrub from anything envd sends back (the API key). */
  readonly secrets?: readonly string[];
}

export type ProcessSelector = { readonly pid: number } | { readonly tag: string };

export interface StartRequest {
  readonly process: {
    readonly cmd: string;
    readonly args: readonly string[];
    readonly envs: Readonly<Record<string, string>>;
    readonly cwd?: string;
  };
  readonly tag?: string;
  /** Said every time: SDKs >= 2.2 default to /dev/null, envd itself to an open stdin. */
  readonly stdin: boolean;
}

export interface EndEvent {
  /** proto3 omits a zero on the wire; it decodes as 0, which means 0 only when `exited` is true. */
  readonly exitCode: number | undefined;
  readonly exited: boolean;
  readonly status: string;
  readonly error?: string;
}

export type StreamClose =
  | { readonly kind: 'end_stream'; readonly error?: SandboxError }
  | { readonly kind: 'dropped'; readonly detail: string };

/** Receives one process stream's events, in order, then exactly one `closed`. */
export interface ProcessEventSink {
  start(pid: number): void;
  stdout(data: Buffer): void;
  stderr(data: Buffer): void;
  end(e: EndEvent): void;
  closed(how: StreamClose): void;
}

export interface ProcessStream {
  /** Drops the client side; the process keeps running. No `closed` is delivered after an abort. */
  abort(): void;
}

/** Connect codes a server sends; anything else on a stream means the connection itself failed. */
const SERVER_VERDICTS = new Set<Code>([
  Code.NotFound,
  Code.InvalidArgument,
  Code.FailedPrecondition,
  Code.PermissionDenied,
  Code.Unauthenticated,
  Code.ResourceExhausted,
  Code.DeadlineExceeded,
  Code.Unimplemented,
  Code.AlreadyExists,
  Code.OutOfRange,
  Code.Internal,
]);

/** `Code.NotFound` → `not_found`: the wire names errors.ts maps. */
const codeName = (c: Code): string =>
  (Code[c] ?? 'unknown').replace(/[A-Z]/g, (m, i: number) => (i ? '_' : '') + m.toLowerCase());

export class Envd {
  readonly #t: EnvdTarget;
  readonly #o: EnvdOptions;
  readonly #process: Client<typeof Process>;
  readonly #fs: Client<typeof Filesystem>;

  constructor(target: EnvdTarget, opts: EnvdOptions) {
    this.#t = target;
    this.#o = opts;
    const transport: Transport = createConnectTransport({
      baseUrl: target.sandboxUrl,
      httpVersion: '1.1',
      useBinaryFormat: false,
    });
    this.#process = createClient(Process, transport);
    this.#fs = createClient(Filesystem, transport);
  }

  get #secrets() {
    return [this.#t.accessToken, ...(this.#o.secrets ?? [])];
  }

  #headers(): Record<string, string> {
    const h: Record<string, string> = {
      'e2b-sandbox-id': this.#t.sandboxId,
      'e2b-sandbox-port': String(ENVD_PORT),
    };
    if (this.#t.accessToken) h['x-access-token'] = this.#t.accessToken;
    if (this.#o.user) h.authorization = `Basic ${Buffer.from(`${this.#o.user}:`).toString('base64')}`;
    return h;
  }

  #error(e: unknown, context: string) {
    const ce = ConnectError.from(e);
    return fromConnect({ code: codeName(ce.code), message: ce.rawMessage }, context, this.#secrets);
  }

  async #unary<T>(context: string, run: (opts: CallOptions) => Promise<T>): Promise<SandboxResult<T>> {
    try {
      return ok(await run({ headers: this.#headers(), timeoutMs: this.#o.timeoutMs }));
    } catch (e) {
      return err(this.#error(e, context));
    }
  }

  /** Running processes envd knows, with their tags and configs. */
  list() {
    return this.#unary('envd List', (o) => this.#process.list({}, o));
  }

  /** Stdin bytes to a running process; `not_found` once it has exited (or before `start`). */
  async sendInput(process: ProcessSelector, data: Uint8Array): Promise<SandboxResult<void>> {
    const r = await this.#unary('envd SendInput', (o) =>
      this.#process.sendInput(
        { process: { selector: selector(process) }, input: { input: { case: 'stdin', value: data } } },
        o,
      ),
    );
    return r.ok ? ok(undefined) : r;
  }

  /** A real EOF on a non-PTY process's stdin (envd >= 0.5.2). */
  async closeStdin(process: ProcessSelector): Promise<SandboxResult<void>> {
    const r = await this.#unary('envd CloseStdin', (o) =>
      this.#process.closeStdin({ process: { selector: selector(process) } }, o),
    );
    return r.ok ? ok(undefined) : r;
  }

  async sendSignal(process: ProcessSelector, signal: 'SIGTERM' | 'SIGKILL'): Promise<SandboxResult<void>> {
    const r = await this.#unary('envd SendSignal', (o) =>
      this.#process.sendSignal(
        { process: { selector: selector(process) }, signal: signal === 'SIGKILL' ? Signal.SIGKILL : Signal.SIGTERM },
        o,
      ),
    );
    return r.ok ? ok(undefined) : r;
  }

  /** Whether a path exists (`~/` is the user's home); `not_found` is the answer "no". */
  async exists(path: string): Promise<SandboxResult<boolean>> {
    const r = await this.#unary('envd Stat', (o) => this.#fs.stat({ path }, o));
    if (r.ok) return ok(true);
    return r.error.code === 'not_found' ? ok(false) : r;
  }

  /**
   * Starts a process and streams its events into `sink`. `lifetimeMs` is the process lifetime
   * envd enforces; without one no `Connect-Timeout-Ms` goes out at all, because connect-go reads
   * `0` as a deadline already passed (envd would start the process and end the stream before `start`).
   */
  start(req: StartRequest, lifetimeMs: number, sink: ProcessEventSink): ProcessStream {
    const limit = Math.floor(lifetimeMs);
    return this.#stream('envd Start', sink, limit > 0 ? limit : undefined, (opts) =>
      this.#process.start(
        {
          process: {
            cmd: req.process.cmd,
            args: [...req.process.args],
            envs: { ...req.process.envs },
            ...(req.process.cwd !== undefined ? { cwd: req.process.cwd } : {}),
          },
          ...(req.tag !== undefined ? { tag: req.tag } : {}),
          stdin: req.stdin,
        },
        opts,
      ),
    );
  }

  /**
   * Subscribes to a running process. envd replays nothing here and drops output nobody was
   * subscribed to, which is why the adapter attaches through the journal instead.
   */
  connect(process: ProcessSelector, sink: ProcessEventSink): ProcessStream {
    return this.#stream('envd Connect', sink, undefined, (opts) =>
      this.#process.connect({ process: { selector: selector(process) } }, opts),
    );
  }

  #stream(
    context: string,
    sink: ProcessEventSink,
    timeoutMs: number | undefined,
    open: (opts: CallOptions) => AsyncIterable<{ event?: ProcessEvent | undefined }>,
  ): ProcessStream {
    const abort = new AbortController();
    let aborted = false;
    const opts: CallOptions = {
      headers: { ...this.#headers(), 'keepalive-ping-interval': String(this.#o.keepaliveS) },
      signal: abort.signal,
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    };
    void (async () => {
      let how: StreamClose;
      try {
        for await (const msg of open(opts)) {
          if (aborted) return;
          deliver(msg.event, sink);
        }
        how = { kind: 'end_stream' };
      } catch (e) {
        const ce = ConnectError.from(e);
        how = SERVER_VERDICTS.has(ce.code)
          ? { kind: 'end_stream', error: this.#error(ce, context) }
          : { kind: 'dropped', detail: `${codeName(ce.code)} ${ce.rawMessage}`.slice(0, 160) };
      }
      if (!aborted) sink.closed(how);
    })();
    return {
      abort: () => {
        aborted = true;
        abort.abort();
      },
    };
  }

  /** Uploads one file (creates parents, overwrites) as multipart, which every envd version accepts. */
  async upload(path: string, data: Uint8Array): Promise<SandboxResult<void>> {
    const context = 'envd upload';
    const boundary = `fountain${randomBytes(12).toString('hex')}`;
    const name = path.split('/').pop() || 'file';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name.replace(/["\r\n]/g, '_')}"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n',
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const q = new URLSearchParams({ path });
    if (this.#o.user) q.set('username', this.#o.user);
    const base = this.#t.sandboxUrl.endsWith('/') ? this.#t.sandboxUrl : `${this.#t.sandboxUrl}/`;
    const r = await call({
      method: 'POST',
      url: new URL(`files?${q.toString()}`, base),
      headers: { ...this.#headers(), 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: Buffer.concat([head, Buffer.from(data), tail]),
      timeoutMs: this.#o.timeoutMs,
      secrets: this.#secrets,
      context,
    });
    if (!r.ok) return r;
    if (r.value.status === 200 || r.value.status === 201 || r.value.status === 204) return ok(undefined);
    return err(fromHttp(r.value, context, this.#secrets));
  }
}

function selector(p: ProcessSelector) {
  return 'pid' in p ? { case: 'pid' as const, value: p.pid } : { case: 'tag' as const, value: p.tag };
}

function deliver(ev: ProcessEvent | undefined, sink: ProcessEventSink): void {
  const e = ev?.event;
  if (!e?.case) return;
  if (e.case === 'start') sink.start(e.value.pid);
  else if (e.case === 'data') {
    const out = e.value.output;
    if (out.case === 'stdout' || out.case === 'pty') sink.stdout(Buffer.from(out.value));
    else if (out.case === 'stderr') sink.stderr(Buffer.from(out.value));
  } else if (e.case === 'end') {
    sink.end({
      exitCode: e.value.exitCode,
      exited: e.value.exited,
      status: e.value.status,
      ...(e.value.error !== undefined ? { error: e.value.error } : {}),
    });
  }
}
