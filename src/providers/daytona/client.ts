/**
 * A thin HTTP client for Daytona's control API and a sandbox's toolbox, with bearer auth.
 * Every call resolves to a Result; replies are validated with zod; the key stays in a Private.
 */
import type { Dispatcher } from 'undici';
import { Agent, fetch as undiciFetch } from 'undici';
import type { z } from 'zod';
import type { Private, SandboxResult } from '../../sandbox/index.ts';
import { ok, err } from '../../sandbox/index.ts';
import type { NotFoundMeaning } from './errors.ts';
import { fromHttp, fromTransport, malformed } from './errors.ts';
import {
  CommandDto,
  ExecuteReply,
  HomeDirReply,
  SandboxDto,
  SandboxPage,
  SessionDto,
  SessionExecReply,
  SessionList,
} from './schemas.ts';

export interface ClientOptions {
  /** Control API base, e.g. `https://app.daytona.io/api`. */
  readonly apiUrl: string;
  readonly apiKey: Private<string>;
  /** Per-request budget for calls that should answer quickly. */
  readonly requestTimeoutMs: number;
}

interface RawReply {
  readonly status: number;
  readonly bytes: Uint8Array;
  readonly contentType: string;
}

interface SendOptions {
  readonly body?: unknown;
  /** Statuses other than 2xx the caller handles itself (e.g. 409 on create). */
  readonly expect?: readonly number[];
  readonly notFound?: NotFoundMeaning;
  /** null = no client-side limit (an exec without a timeout may legitimately run for hours). */
  readonly timeoutMs?: number | null;
  readonly headers?: Readonly<Record<string, string>>;
  /** A dispatcher of the call's own (undici's fetch is used then), for waits the default would cut short. */
  readonly dispatcher?: Dispatcher;
}

const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');

/** The body of `POST /sandbox`. Field names are Daytona's. */
export interface CreateSandboxBody {
  readonly name: string;
  readonly snapshot?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly env?: Readonly<Record<string, string>>;
  readonly autoStopInterval: number;
  readonly autoDeleteInterval: number;
}

export interface NetworkSettingsBody {
  readonly networkBlockAll?: boolean;
  readonly networkAllowList?: string;
  readonly domainAllowList?: string;
}

export type CreateOutcome = { readonly kind: 'created'; readonly sandbox: SandboxDto } | { readonly kind: 'exists' };

export class DaytonaClient {
  readonly #apiUrl: string;
  readonly #key: Private<string>;
  readonly #timeoutMs: number;

  constructor(opts: ClientOptions) {
    this.#apiUrl = opts.apiUrl.replace(/\/+$/, '');
    this.#key = opts.apiKey;
    this.#timeoutMs = opts.requestTimeoutMs;
  }

  /** The one place the key is read, so no other code path can leak it. */
  async send(op: string, method: string, url: string, opts: SendOptions = {}): Promise<SandboxResult<RawReply>> {
    const secret = this.#key.reveal();
    const headers: Record<string, string> = { authorization: `Bearer ${secret}`, ...opts.headers };
    let payload: BodyInit | undefined;
    if (opts.body instanceof FormData) payload = opts.body;
    else if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(opts.body);
    }
    const timeoutMs = opts.timeoutMs === undefined ? this.#timeoutMs : opts.timeoutMs;
    let res: Response;
    let bytes: Uint8Array;
    try {
      const init = {
        method,
        headers,
        redirect: 'manual' as const,
        signal: timeoutMs === null ? null : AbortSignal.timeout(timeoutMs),
      };
      res = opts.dispatcher
        ? ((await undiciFetch(url, {
            ...init,
            body: payload as string | undefined,
            dispatcher: opts.dispatcher,
          })) as unknown as Response)
        : await fetch(url, { ...init, body: payload ?? null });
      bytes = new Uint8Array(await res.arrayBuffer());
    } catch (cause) {
      return err(fromTransport(op, cause, [secret]));
    }
    const status = res.status;
    if ((status >= 200 && status < 300) || opts.expect?.includes(status)) {
      return ok({ status, bytes, contentType: res.headers.get('content-type') ?? '' });
    }
    return err(
      fromHttp(
        { status, body: text(bytes), retryAfter: res.headers.get('retry-after'), op },
        opts.notFound ?? 'unavailable',
        [secret],
      ),
    );
  }

  async json<S extends z.ZodType>(
    op: string,
    schema: S,
    method: string,
    url: string,
    opts: SendOptions = {},
  ): Promise<SandboxResult<z.output<S>>> {
    const r = await this.send(op, method, url, opts);
    if (!r.ok) return r;
    return parseJson(op, schema, r.value.bytes);
  }

  control(path: string): string {
    return `${this.#apiUrl}${path}`;
  }

  // ---- control API ----

  async createSandbox(body: CreateSandboxBody): Promise<SandboxResult<CreateOutcome>> {
    const r = await this.send('create_sandbox', 'POST', this.control('/sandbox'), { body, expect: [409] });
    if (!r.ok) return r;
    if (r.value.status === 409) return ok({ kind: 'exists' });
    const parsed = parseJson('create_sandbox', SandboxDto, r.value.bytes);
    return parsed.ok ? ok({ kind: 'created', sandbox: parsed.value }) : parsed;
  }

  /** 404 here is definitive: Daytona names are unique per organisation and looked up exactly. */
  getSandbox(idOrName: string): Promise<SandboxResult<SandboxDto>> {
    return this.json('get_sandbox', SandboxDto, 'GET', this.control(`/sandbox/${encodeURIComponent(idOrName)}`), {
      notFound: 'not_found',
    });
  }

  async deleteSandbox(idOrName: string): Promise<SandboxResult<'deleting' | 'absent'>> {
    const r = await this.send('delete_sandbox', 'DELETE', this.control(`/sandbox/${encodeURIComponent(idOrName)}`), {
      expect: [404],
    });
    if (!r.ok) return r;
    return ok(r.value.status === 404 ? 'absent' : 'deleting');
  }

  listSandboxes(labels: Readonly<Record<string, string>>, cursor: string | null, limit: number) {
    const q = new URLSearchParams({ labels: JSON.stringify(labels), limit: String(limit) });
    if (cursor) q.set('cursor', cursor);
    return this.json('list_sandboxes', SandboxPage, 'GET', this.control(`/sandbox?${q.toString()}`));
  }

  async lifecycle(id: string, action: 'start' | 'stop'): Promise<SandboxResult<void>> {
    const r = await this.send(
      `${action}_sandbox`,
      'POST',
      this.control(`/sandbox/${encodeURIComponent(id)}/${action}`),
      {
        notFound: 'not_found',
      },
    );
    return r.ok ? ok(undefined) : r;
  }

  networkSettings(id: string, body: NetworkSettingsBody): Promise<SandboxResult<SandboxDto>> {
    return this.json(
      'network_settings',
      SandboxDto,
      'POST',
      this.control(`/sandbox/${encodeURIComponent(id)}/network-settings`),
      {
        body,
        notFound: 'not_found',
      },
    );
  }

  toolbox(proxyUrl: string, sandboxId: string): Toolbox {
    return new Toolbox(this, `${proxyUrl.replace(/\/+$/, '')}/${encodeURIComponent(sandboxId)}`);
  }
}

export type LogsReply = { readonly kind: 'journal'; readonly bytes: Uint8Array } | { readonly kind: 'gone' };

/** The toolbox of one sandbox, reached through its `toolboxProxyUrl`. */
export class Toolbox {
  readonly #c: DaytonaClient;
  readonly base: string;

  constructor(client: DaytonaClient, base: string) {
    this.#c = client;
    this.base = base;
  }

  /**
   * `/process/execute` answers only when the command ends. The daemon enforces `timeout`; the
   * client waits a little longer so the daemon's 408 wins, on a dispatcher of its own: fetch's
   * default gives up waiting for response headers after 300 s (UND_ERR_HEADERS_TIMEOUT).
   * `clientLimit: false` waits as long as the command runs.
   */
  async execute(command: string, timeoutSec: number, clientLimit = true) {
    const waitMs = clientLimit ? timeoutSec * 1000 + 15_000 : 0;
    const dispatcher = new Agent({ headersTimeout: waitMs, bodyTimeout: waitMs });
    try {
      return await this.#c.json('execute', ExecuteReply, 'POST', `${this.base}/process/execute`, {
        body: { command, timeout: timeoutSec },
        timeoutMs: clientLimit ? waitMs : null,
        dispatcher,
      });
    } finally {
      void dispatcher.close().catch(() => undefined);
    }
  }

  homeDir() {
    return this.#c.json('user_home_dir', HomeDirReply, 'GET', `${this.base}/user-home-dir`);
  }

  async createSession(sessionId: string): Promise<SandboxResult<void>> {
    const r = await this.#c.send('create_session', 'POST', `${this.base}/process/session`, { body: { sessionId } });
    return r.ok ? ok(undefined) : r;
  }

  listSessions() {
    return this.#c.json('list_sessions', SessionList, 'GET', `${this.base}/process/session`);
  }

  /** 404 is definitive: the daemon answered and does not know the session. */
  getSession(sessionId: string) {
    return this.#c.json(
      'get_session',
      SessionDto,
      'GET',
      `${this.base}/process/session/${encodeURIComponent(sessionId)}`,
      {
        notFound: 'not_found',
      },
    );
  }

  async deleteSession(sessionId: string, timeoutMs: number): Promise<SandboxResult<'deleted' | 'absent'>> {
    const r = await this.#c.send(
      'delete_session',
      'DELETE',
      `${this.base}/process/session/${encodeURIComponent(sessionId)}`,
      {
        expect: [404],
        timeoutMs,
      },
    );
    if (!r.ok) return r;
    return ok(r.value.status === 404 ? 'absent' : 'deleted');
  }

  sessionExecAsync(sessionId: string, command: string) {
    return this.#c.json(
      'session_exec',
      SessionExecReply,
      'POST',
      `${this.base}/process/session/${encodeURIComponent(sessionId)}/exec`,
      {
        body: { command, runAsync: true, suppressInputEcho: true },
      },
    );
  }

  getCommand(sessionId: string, cmdId: string) {
    return this.#c.json(
      'get_command',
      CommandDto,
      'GET',
      `${this.base}/process/session/${encodeURIComponent(sessionId)}/command/${encodeURIComponent(cmdId)}`,
      { notFound: 'not_found' },
    );
  }

  /**
   * The whole journal of one command, markers kept. Without the split header Daytona strips the
   * markers and merges stdout with stderr, so the header is not optional.
   */
  async logs(sessionId: string, cmdId: string): Promise<SandboxResult<LogsReply>> {
    const r = await this.#c.send(
      'session_logs',
      'GET',
      `${this.base}/process/session/${encodeURIComponent(sessionId)}/command/${encodeURIComponent(cmdId)}/logs`,
      { expect: [404], headers: { 'x-daytona-split-output': 'true' } },
    );
    if (!r.ok) return r;
    return ok(r.value.status === 404 ? { kind: 'gone' } : { kind: 'journal', bytes: r.value.bytes });
  }

  async upload(path: string, data: Uint8Array): Promise<SandboxResult<void>> {
    const form = new FormData();
    form.set('files[0].path', path);
    form.set('files[0].file', new Blob([new Uint8Array(data)]), path.split('/').pop() || 'file');
    const r = await this.#c.send('upload', 'POST', `${this.base}/files/bulk-upload`, { body: form, timeoutMs: null });
    return r.ok ? ok(undefined) : r;
  }

  /**
   * The bytes of a file from `offset` on, with `Range: bytes=<offset>-`: the daemon serves
   * downloads with Go's http.ServeFile (206 with the rest, 416 when nothing is new). A server
   * that ignores the header sends the whole file, which is cut here.
   */
  async readFrom(
    path: string,
    offset: number,
  ): Promise<SandboxResult<{ kind: 'bytes'; bytes: Uint8Array } | { kind: 'absent' }>> {
    const q = new URLSearchParams({ path });
    const r = await this.#c.send('download', 'GET', `${this.base}/files/download?${q.toString()}`, {
      expect: [404, 416],
      headers: { range: `bytes=${offset}-` },
    });
    if (!r.ok) return r;
    if (r.value.status === 404) return ok({ kind: 'absent' });
    if (r.value.status === 416) return ok({ kind: 'bytes', bytes: new Uint8Array(0) });
    return ok({ kind: 'bytes', bytes: r.value.status === 206 ? r.value.bytes : r.value.bytes.subarray(offset) });
  }

  /** A missing file is `absent`, which for a sentinel means "not written yet". */
  async download(path: string): Promise<SandboxResult<{ kind: 'file'; bytes: Uint8Array } | { kind: 'absent' }>> {
    const q = new URLSearchParams({ path });
    const r = await this.#c.send('download', 'GET', `${this.base}/files/download?${q.toString()}`, { expect: [404] });
    if (!r.ok) return r;
    return ok(r.value.status === 404 ? { kind: 'absent' } : { kind: 'file', bytes: r.value.bytes });
  }
}

function parseJson<S extends z.ZodType>(op: string, schema: S, bytes: Uint8Array): SandboxResult<z.output<S>> {
  let raw: unknown;
  try {
    raw = JSON.parse(text(bytes));
  } catch {
    return err(malformed(op, 'not JSON'));
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    return err(malformed(op, parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')));
  return ok(parsed.data);
}
