/**
 * Client for envd, the daemon inside an E2B sandbox: Connect unary calls, enveloped server
 * streams for Start, and the multipart file upload. Auth is the sandbox's `X-Access-Token`.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { SandboxError, SandboxResult } from '../../sandbox/index.ts';
import { err, ok } from '../../sandbox/index.ts';
import {
  EnvelopeReader,
  FLAG_COMPRESSED,
  FLAG_END_STREAM,
  STREAM_CONTENT_TYPE,
  UNARY_CONTENT_TYPE,
  encodeEnvelope,
  endStreamSchema,
  parseJson,
} from './connect.ts';
import { badReply, connectErrorSchema, fromConnect, fromHttp } from './errors.ts';
import { call, openStream, readAll } from './http.ts';

export const ENVD_PORT = 49983;

export interface EnvdTarget {
  readonly sandboxId: string;
  readonly accessToken: string | null;
  /** Where envd is reached; requests name the sandbox in headers (`E2b-Sandbox-Id`). */
  readonly sandboxUrl: string;
}

export interface EnvdOptions {
  /** The Linux user commands run as; absent = envd's default user. */
  readonly user?: string;
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
  /** envd SDK >= 2.2 defaults to a /dev/null stdin; always say what we want. */
  readonly stdin: boolean;
}

const processEventSchema = z.object({
  event: z
    .object({
      start: z.object({ pid: z.number().optional() }).optional(),
      data: z.object({ stdout: z.string().optional(), stderr: z.string().optional(), pty: z.string().optional() }).optional(),
      end: z
        .object({
          exitCode: z.number().optional(),
          exited: z.boolean().optional(),
          status: z.string().optional(),
          error: z.string().optional(),
        })
        .optional(),
      keepalive: z.object({}).optional(),
    })
    .optional(),
});

export interface EndEvent {
  /** As sent: proto3 JSON omits a zero, so absent means 0 only when `exited` is true. */
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

const b64 = (s: string) => Buffer.from(s, 'base64');

export class Envd {
  readonly #t: EnvdTarget;
  readonly #o: EnvdOptions;

  constructor(target: EnvdTarget, opts: EnvdOptions) {
    this.#t = target;
    this.#o = opts;
  }

  get #secrets() {
    return [this.#t.accessToken, ...(this.#o.secrets ?? [])];
  }

  #headers(extra: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = {
      'e2b-sandbox-id': this.#t.sandboxId,
      'e2b-sandbox-port': String(ENVD_PORT),
      ...extra,
    };
    if (this.#t.accessToken) h['x-access-token'] = this.#t.accessToken;
    if (this.#o.user) h.authorization = `Basic ${Buffer.from(`${this.#o.user}:`).toString('base64')}`;
    return h;
  }

  #url(path: string): URL {
    const base = this.#t.sandboxUrl.endsWith('/') ? this.#t.sandboxUrl : `${this.#t.sandboxUrl}/`;
    return new URL(path, base);
  }

  /** A Connect unary call; resolves with the decoded JSON reply. */
  async unary(method: string, body: unknown): Promise<SandboxResult<unknown>> {
    const context = `envd ${method.split('/')[1] ?? method}`;
    const r = await call({
      method: 'POST',
      url: this.#url(method),
      headers: this.#headers({ 'content-type': UNARY_CONTENT_TYPE, 'connect-protocol-version': '1' }),
      body: Buffer.from(JSON.stringify(body), 'utf8'),
      timeoutMs: this.#o.timeoutMs,
      secrets: this.#secrets,
      context,
    });
    if (!r.ok) return r;
    const json = parseJson(r.value.body);
    if (r.value.status !== 200) {
      const ce = connectErrorSchema.safeParse(json);
      return err(ce.success ? fromConnect(ce.data, context, this.#secrets) : fromHttp(r.value, context, this.#secrets));
    }
    return json === undefined ? err(badReply(context, 'not json')) : ok(json);
  }

  /**
   * Starts a process and streams its events into `sink`. Resolves once envd accepted the stream
   * (HTTP 200); the caller waits for `start` itself. `lifetimeMs` is the process lifetime envd
   * enforces (0 = none): always explicit, never a client library's short default.
   */
  async start(req: StartRequest, lifetimeMs: number, sink: ProcessEventSink): Promise<SandboxResult<ProcessStream>> {
    return this.#stream('Start', req, { 'connect-timeout-ms': String(Math.max(0, Math.floor(lifetimeMs))) }, sink);
  }

  /**
   * Subscribes to a running process. envd replays nothing here and drops output nobody was
   * subscribed to, which is why the adapter attaches through the journal instead.
   */
  async connect(process: ProcessSelector, sink: ProcessEventSink): Promise<SandboxResult<ProcessStream>> {
    return this.#stream('Connect', { process }, {}, sink);
  }

  async #stream(method: 'Start' | 'Connect', body: unknown, extra: Record<string, string>, sink: ProcessEventSink): Promise<SandboxResult<ProcessStream>> {
    const context = `envd ${method}`;
    const opened = await openStream({
      method: 'POST',
      url: this.#url(`process.Process/${method}`),
      headers: this.#headers({
        'content-type': STREAM_CONTENT_TYPE,
        'connect-protocol-version': '1',
        'keepalive-ping-interval': String(this.#o.keepaliveS),
        ...extra,
      }),
      body: encodeEnvelope(body),
      timeoutMs: this.#o.timeoutMs,
      secrets: this.#secrets,
      context,
    });
    if (!opened.ok) return opened;
    const s = opened.value;
    if (s.status !== 200) {
      const body = await readAll(s.body);
      const ce = connectErrorSchema.safeParse(parseJson(body));
      return err(ce.success ? fromConnect(ce.data, context, this.#secrets) : fromHttp({ status: s.status, body, headers: s.headers }, context, this.#secrets));
    }
    const ctype = String(s.headers['content-type'] ?? '');
    if (!ctype.startsWith(STREAM_CONTENT_TYPE)) {
      s.abort();
      return err(badReply(context, `content-type ${ctype || 'missing'}`));
    }

    let done = false;
    let aborted = false;
    const finish = (how: StreamClose) => {
      if (done) return;
      done = true;
      if (!aborted) sink.closed(how);
    };
    const reader = new EnvelopeReader();
    s.body.on('data', (chunk: Buffer) => {
      if (done) return;
      let envelopes;
      try {
        envelopes = reader.push(chunk);
      } catch (e) {
        s.abort();
        finish({ kind: 'dropped', detail: `bad envelope: ${e instanceof Error ? e.message : String(e)}` });
        return;
      }
      for (const env of envelopes) {
        if (done) return;
        if (env.flags & FLAG_COMPRESSED) {
          s.abort();
          finish({ kind: 'dropped', detail: 'compressed envelope not negotiated' });
          return;
        }
        const json = parseJson(env.data);
        if (env.flags & FLAG_END_STREAM) {
          const end = endStreamSchema.safeParse(json ?? {});
          const error = end.success && end.data.error ? fromConnect(end.data.error, context, this.#secrets) : undefined;
          finish(error ? { kind: 'end_stream', error } : { kind: 'end_stream' });
          return;
        }
        const ev = processEventSchema.safeParse(json);
        if (!ev.success) {
          s.abort();
          finish({ kind: 'dropped', detail: 'malformed process event' });
          return;
        }
        const e = ev.data.event;
        if (!e) continue;
        if (e.start) sink.start(e.start.pid ?? 0);
        else if (e.data) {
          if (e.data.stdout !== undefined) sink.stdout(b64(e.data.stdout));
          else if (e.data.stderr !== undefined) sink.stderr(b64(e.data.stderr));
          else if (e.data.pty !== undefined) sink.stdout(b64(e.data.pty));
        } else if (e.end) {
          sink.end({
            exitCode: e.end.exitCode,
            exited: e.end.exited ?? false,
            status: e.end.status ?? '',
            ...(e.end.error !== undefined ? { error: e.end.error } : {}),
          });
        }
      }
    });
    s.body.on('end', () => finish({ kind: 'dropped', detail: reader.pending ? 'truncated envelope' : 'stream ended without end-stream' }));
    s.body.on('aborted', () => finish({ kind: 'dropped', detail: 'connection reset' }));
    s.body.on('error', (e) => finish({ kind: 'dropped', detail: e.message }));
    s.body.on('close', () => finish({ kind: 'dropped', detail: 'connection closed' }));
    return ok({
      abort: () => {
        aborted = true;
        done = true;
        s.abort();
      },
    });
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
    const r = await call({
      method: 'POST',
      url: this.#url(`files?${q.toString()}`),
      headers: this.#headers({ 'content-type': `multipart/form-data; boundary=${boundary}` }),
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
