/**
 * The Sprites REST client: bearer-authenticated JSON calls for sprites, sessions, files and
 * network policy, each reply validated with zod and each failure a taxonomy value.
 */
import { z } from 'zod';
import { err, ok, sandboxError, type Private, type SandboxResult } from '../../sandbox/index.ts';
import type { ResolvedSpritesConfig } from './config.ts';
import { badReply, fromHttpStatus, fromTransport } from './errors.ts';

export const spriteSchema = z.object({
  id: z.string().optional(),
  name: z.string(),
  organization: z.string().optional(),
  status: z.string().optional(),
  url: z.string().optional(),
  url_settings: z.object({ auth: z.string().optional() }).loose().optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
});
export type Sprite = z.infer<typeof spriteSchema>;

const listPageSchema = z.object({
  sprites: z.array(z.object({ name: z.string() }).loose()),
  has_more: z.boolean().optional(),
  next_continuation_token: z.string().nullish(),
});
export type ListPage = z.infer<typeof listPageSchema>;

const timeSchema = z.union([z.string(), z.number()]).nullish();
const sessionSchema = z.object({
  id: z.union([z.number().int(), z.string().min(1)]),
  command: z.string().nullish(),
  workdir: z.string().nullish(),
  created: timeSchema,
  last_activity: timeSchema,
  is_active: z.boolean().optional(),
  tty: z.boolean().optional(),
});
const sessionsSchema = z.object({ sessions: z.array(sessionSchema) });
export type RawSession = z.infer<typeof sessionSchema>;

export interface PolicyRule {
  readonly domain?: string;
  readonly action?: 'allow' | 'deny';
  readonly include?: string;
}

const killEventSchema = z.object({ type: z.string() }).loose();
export type KillOutcome = 'terminated' | 'absent' | 'unconfirmed';

interface Reply {
  readonly status: number;
  readonly body: Uint8Array;
  readonly retryAfter: string | null;
}

const parseJson = (bytes: Uint8Array): unknown => {
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return undefined;
  }
};

export class SpritesApi {
  readonly #cfg: ResolvedSpritesConfig;

  constructor(cfg: ResolvedSpritesConfig) {
    this.#cfg = cfg;
  }

  /** `wss://…/v1/sprites/{name}/exec…` from the REST base (http → ws, https → wss). */
  wsUrl(path: string, query: ReadonlyArray<readonly [string, string]>): URL {
    const url = new URL(path.replace(/^\//, ''), this.#cfg.baseUrl);
    url.protocol = url.protocol === 'http:' ? 'ws:' : url.protocol === 'https:' ? 'wss:' : url.protocol;
    for (const [k, v] of query) url.searchParams.append(k, v);
    return url;
  }

  async #call(
    token: Private<string>,
    method: string,
    path: string,
    opts: {
      query?: ReadonlyArray<readonly [string, string]>;
      json?: unknown;
      bytes?: Uint8Array;
      timeoutMs?: number;
    } = {},
  ): Promise<SandboxResult<Reply>> {
    let url: URL;
    try {
      url = new URL(path.replace(/^\//, ''), this.#cfg.baseUrl);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return err(sandboxError('invalid', 'base_url'));
    } catch {
      return err(sandboxError('invalid', 'base_url'));
    }
    for (const [k, v] of opts.query ?? []) url.searchParams.append(k, v);
    const headers: Record<string, string> = { Authorization: `Bearer ${token.reveal()}`, Accept: 'application/json' };
    let body: string | Blob | undefined;
    if (opts.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.bytes !== undefined) {
      headers['Content-Type'] = 'application/octet-stream';
      body = new Blob([new Uint8Array(opts.bytes)]);
    }
    try {
      const res = await fetch(url, {
        method,
        headers,
        body,
        // A redirect would carry the bearer token somewhere we did not choose.
        redirect: 'manual',
        signal: AbortSignal.timeout(opts.timeoutMs ?? this.#cfg.timeoutMs),
      });
      const buf = new Uint8Array(await res.arrayBuffer());
      return ok({ status: res.status, body: buf, retryAfter: res.headers.get('retry-after') });
    } catch (e) {
      return err(fromTransport(e));
    }
  }

  #failure(reply: Reply) {
    return err(fromHttpStatus(reply.status, parseJson(reply.body), reply.retryAfter));
  }

  /** 201 (or any 2xx) → the sprite; the caller decides what a conflict means. */
  async createSprite(
    token: Private<string>,
    name: string,
    labels: readonly string[],
  ): Promise<SandboxResult<{ status: number; sprite: Sprite | null }>> {
    const r = await this.#call(token, 'POST', 'v1/sprites', {
      json: { name, url_settings: { auth: 'sprite' }, labels },
      timeoutMs: Math.max(this.#cfg.timeoutMs, 120_000),
    });
    if (!r.ok) return r;
    if (r.value.status === 400 || r.value.status === 409) return ok({ status: r.value.status, sprite: null });
    if (r.value.status < 200 || r.value.status > 299) return this.#failure(r.value);
    const parsed = spriteSchema.safeParse(parseJson(r.value.body));
    if (!parsed.success) return err(badReply('sprite'));
    return ok({ status: r.value.status, sprite: parsed.data });
  }

  async getSprite(token: Private<string>, name: string): Promise<SandboxResult<Sprite>> {
    const r = await this.#call(token, 'GET', `v1/sprites/${encodeURIComponent(name)}`);
    if (!r.ok) return r;
    if (r.value.status !== 200) return this.#failure(r.value);
    const parsed = spriteSchema.safeParse(parseJson(r.value.body));
    return parsed.success ? ok(parsed.data) : err(badReply('sprite'));
  }

  /** Already gone (404) counts as done. */
  async deleteSprite(token: Private<string>, name: string): Promise<SandboxResult<void>> {
    const r = await this.#call(token, 'DELETE', `v1/sprites/${encodeURIComponent(name)}`);
    if (!r.ok) return r;
    if (r.value.status === 404 || (r.value.status >= 200 && r.value.status < 300)) return ok(undefined);
    return this.#failure(r.value);
  }

  async listPage(
    token: Private<string>,
    prefix: string,
    pageSize: number,
    continuation: string | null,
  ): Promise<SandboxResult<ListPage>> {
    const query: Array<[string, string]> = [['max_results', String(pageSize)]];
    if (prefix) query.push(['prefix', prefix]);
    if (continuation) query.push(['continuation_token', continuation]);
    const r = await this.#call(token, 'GET', 'v1/sprites', { query });
    if (!r.ok) return r;
    if (r.value.status !== 200) return this.#failure(r.value);
    const parsed = listPageSchema.safeParse(parseJson(r.value.body));
    return parsed.success ? ok(parsed.data) : err(badReply('list'));
  }

  async listSessions(token: Private<string>, name: string): Promise<SandboxResult<RawSession[]>> {
    const r = await this.#call(token, 'GET', `v1/sprites/${encodeURIComponent(name)}/exec`);
    if (!r.ok) return r;
    if (r.value.status !== 200) return this.#failure(r.value);
    const parsed = sessionsSchema.safeParse(parseJson(r.value.body));
    return parsed.success ? ok(parsed.data.sessions) : err(badReply('sessions'));
  }

  /**
   * `POST /exec/{id}/kill` (no `sessions/` segment: that path answers 404 for every session).
   * The NDJSON progress decides: `exited`/`killed`/`complete` confirm, `error` leaves it open.
   */
  async killSession(
    token: Private<string>,
    name: string,
    sessionId: string,
    signal: 'TERM' | 'KILL',
    timeoutMs: number,
  ): Promise<SandboxResult<KillOutcome>> {
    const secs = Math.max(1, Math.ceil(timeoutMs / 1000));
    const r = await this.#call(
      token,
      'POST',
      `v1/sprites/${encodeURIComponent(name)}/exec/${encodeURIComponent(sessionId)}/kill`,
      {
        query: [
          ['signal', signal],
          ['timeout', `${secs}s`],
        ],
        timeoutMs: timeoutMs + 5000,
      },
    );
    if (!r.ok) return r;
    // 410 Gone: the session already exited (sprites-go client.go); as gone as a 404.
    if (r.value.status === 404 || r.value.status === 410) return ok('absent');
    if (r.value.status < 200 || r.value.status > 299) return this.#failure(r.value);
    let confirmed = false;
    let failed = false;
    for (const line of Buffer.from(r.value.body).toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      const ev = killEventSchema.safeParse(parseJson(new TextEncoder().encode(line)));
      if (!ev.success) continue;
      if (ev.data.type === 'exited' || ev.data.type === 'killed') confirmed = true;
      if (ev.data.type === 'error') failed = true;
      if (ev.data.type === 'complete' && !failed) confirmed = true;
    }
    return ok(confirmed && !failed ? 'terminated' : 'unconfirmed');
  }

  /** Sprites documents 200 and its SDK expects 204: any 2xx is success. */
  async setNetworkPolicy(
    token: Private<string>,
    name: string,
    rules: readonly PolicyRule[],
  ): Promise<SandboxResult<void>> {
    const r = await this.#call(token, 'POST', `v1/sprites/${encodeURIComponent(name)}/policy/network`, {
      json: { rules },
    });
    if (!r.ok) return r;
    if (r.value.status >= 200 && r.value.status < 300) return ok(undefined);
    return this.#failure(r.value);
  }

  async writeFile(
    token: Private<string>,
    name: string,
    path: string,
    data: Uint8Array,
    mode: number,
  ): Promise<SandboxResult<void>> {
    const r = await this.#call(token, 'PUT', `v1/sprites/${encodeURIComponent(name)}/fs/write`, {
      query: [
        ['path', path],
        ['mkdirParents', 'true'],
        ['mode', mode.toString(8).padStart(4, '0')],
      ],
      bytes: data,
    });
    if (!r.ok) return r;
    if (r.value.status >= 200 && r.value.status < 300) return ok(undefined);
    return this.#failure(r.value);
  }
}
