/**
 * E2B control-plane client (REST, `X-API-Key`): create, list by metadata, detail, kill, pause,
 * connect, timeout and network. Every reply is validated; every failure is a taxonomy value.
 */
import { z } from 'zod';
import type { SandboxResult } from '../../sandbox/index.ts';
import { err, fail, ok } from '../../sandbox/index.ts';
import { badReply, fromHttp } from './errors.ts';
import { call } from './http.ts';

const metadataSchema = z.record(z.string(), z.string());

export const createdSandboxSchema = z.object({
  sandboxID: z.string().min(1),
  templateID: z.string().optional(),
  envdVersion: z.string().optional(),
  envdAccessToken: z.string().nullish(),
  domain: z.string().nullish(),
});
export type CreatedSandbox = z.infer<typeof createdSandboxSchema>;

export const listedSandboxSchema = z.object({
  sandboxID: z.string().min(1),
  templateID: z.string().optional(),
  startedAt: z.string(),
  endAt: z.string().optional(),
  state: z.string(),
  metadata: metadataSchema.nullish(),
  envdVersion: z.string().optional(),
});
export type ListedSandbox = z.infer<typeof listedSandboxSchema>;

export const sandboxDetailSchema = listedSandboxSchema.extend({
  envdAccessToken: z.string().nullish(),
  domain: z.string().nullish(),
});
export type SandboxDetail = z.infer<typeof sandboxDetailSchema>;

export interface NetworkConfig {
  readonly allowOut: readonly string[];
  readonly denyOut: readonly string[];
}

export interface NewSandbox {
  readonly templateID: string;
  /** Seconds until the sandbox expires (and, with autoPause, parks). Always sent: the spec default is 15 s. */
  readonly timeout: number;
  readonly metadata: Readonly<Record<string, string>>;
  readonly envVars: Readonly<Record<string, string>>;
  readonly secure: true;
  readonly autoPause: boolean;
  readonly network?: NetworkConfig;
}

export interface ControlPlaneOptions {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly timeoutMs: number;
  readonly pageSize: number;
  /** Refuses a listing longer than this many pages with `truncated` instead of paging forever. */
  readonly maxPages: number;
}

export class ControlPlane {
  readonly #o: ControlPlaneOptions;

  constructor(o: ControlPlaneOptions) {
    this.#o = o;
  }

  async #request(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, context: string, body?: unknown) {
    const url = new URL(path, this.#o.baseUrl.endsWith('/') ? this.#o.baseUrl : `${this.#o.baseUrl}/`);
    const headers: Record<string, string> = { 'x-api-key': this.#o.apiKey, accept: 'application/json' };
    let payload: Buffer | undefined;
    if (body !== undefined) {
      payload = Buffer.from(JSON.stringify(body), 'utf8');
      headers['content-type'] = 'application/json';
    }
    return call({
      method,
      url,
      headers,
      body: payload,
      timeoutMs: this.#o.timeoutMs,
      secrets: [this.#o.apiKey],
      context,
    });
  }

  #failure(
    reply: { status: number; body: Buffer; headers: Record<string, string | string[] | undefined> },
    context: string,
  ) {
    return err(fromHttp(reply, context, [this.#o.apiKey]));
  }

  #parse<T>(schema: z.ZodType<T>, body: Buffer, context: string): SandboxResult<T> {
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      return err(badReply(context, 'not json'));
    }
    const parsed = schema.safeParse(json);
    return parsed.success ? ok(parsed.data) : err(badReply(context, parsed.error.issues[0]?.message ?? 'schema'));
  }

  async createSandbox(body: NewSandbox): Promise<SandboxResult<CreatedSandbox>> {
    const r = await this.#request('POST', 'sandboxes', 'create_sandbox', body);
    if (!r.ok) return r;
    if (r.value.status !== 201 && r.value.status !== 200) {
      const e = fromHttp(r.value, 'create_sandbox', [this.#o.apiKey]);
      // A 404 here means the template is unknown, not that a sandbox is absent.
      return e.code === 'not_found' ? fail('invalid', e.detail) : err(e);
    }
    return this.#parse(createdSandboxSchema, r.value.body, 'create_sandbox');
  }

  /**
   * Every running or paused sandbox whose metadata matches all pairs, paged to the end.
   * Any failed page fails the whole listing: a partial list must never look whole.
   */
  async listSandboxes(metadata: Readonly<Record<string, string>>): Promise<SandboxResult<ListedSandbox[]>> {
    // The filter is itself a query string: each key and value is encoded, then the whole is encoded again.
    const filter = Object.entries(metadata)
      .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
      .join('&');
    const out: ListedSandbox[] = [];
    let token: string | undefined;
    for (let page = 0; page < this.#o.maxPages; page++) {
      const q = new URLSearchParams({ metadata: filter, state: 'running,paused', limit: String(this.#o.pageSize) });
      if (token) q.set('nextToken', token);
      const r = await this.#request('GET', `v2/sandboxes?${q.toString()}`, 'list_sandboxes');
      if (!r.ok) return r;
      if (r.value.status !== 200) {
        const e = fromHttp(r.value, 'list_sandboxes', [this.#o.apiKey]);
        // A listing endpoint has no "absent": a 404 here is a broken route or proxy, so transient.
        return e.code === 'not_found' ? fail('unavailable', e.detail) : err(e);
      }
      const items = this.#parse(z.array(listedSandboxSchema), r.value.body, 'list_sandboxes');
      if (!items.ok) return items;
      out.push(...items.value);
      const next = r.value.headers['x-next-token'];
      token = Array.isArray(next) ? next[0] : next;
      if (!token) return ok(out);
    }
    return fail('truncated', `list_sandboxes: more than ${this.#o.maxPages} pages`);
  }

  /** 404 is a definitive absence of this id (killed, or expired without autoPause). */
  async getSandbox(id: string): Promise<SandboxResult<SandboxDetail>> {
    const r = await this.#request('GET', `sandboxes/${encodeURIComponent(id)}`, 'get_sandbox');
    if (!r.ok) return r;
    if (r.value.status !== 200) return this.#failure(r.value, 'get_sandbox');
    return this.#parse(sandboxDetailSchema, r.value.body, 'get_sandbox');
  }

  /** ok(true) when killed now, ok(false) when it was already gone. */
  async killSandbox(id: string): Promise<SandboxResult<boolean>> {
    const r = await this.#request('DELETE', `sandboxes/${encodeURIComponent(id)}`, 'kill_sandbox');
    if (!r.ok) return r;
    if (r.value.status === 204 || r.value.status === 200) return ok(true);
    if (r.value.status === 404) return ok(false);
    return this.#failure(r.value, 'kill_sandbox');
  }

  /** ok(true) when paused now, ok(false) when it was already paused (409). */
  async pauseSandbox(id: string): Promise<SandboxResult<boolean>> {
    const r = await this.#request('POST', `sandboxes/${encodeURIComponent(id)}/pause`, 'pause_sandbox');
    if (!r.ok) return r;
    if (r.value.status === 204 || r.value.status === 200) return ok(true);
    if (r.value.status === 409) return ok(false);
    return this.#failure(r.value, 'pause_sandbox');
  }

  /** Resumes a paused sandbox (201) or extends a running one (200); same id, same disk. */
  async connectSandbox(id: string, timeoutS: number): Promise<SandboxResult<CreatedSandbox>> {
    const r = await this.#request('POST', `sandboxes/${encodeURIComponent(id)}/connect`, 'connect_sandbox', {
      timeout: timeoutS,
    });
    if (!r.ok) return r;
    if (r.value.status !== 200 && r.value.status !== 201) return this.#failure(r.value, 'connect_sandbox');
    return this.#parse(createdSandboxSchema, r.value.body, 'connect_sandbox');
  }

  /** Expiry becomes now + timeoutS. */
  async setTimeout(id: string, timeoutS: number): Promise<SandboxResult<void>> {
    const r = await this.#request('POST', `sandboxes/${encodeURIComponent(id)}/timeout`, 'set_timeout', {
      timeout: timeoutS,
    });
    if (!r.ok) return r;
    if (r.value.status === 204 || r.value.status === 200) return ok(undefined);
    return this.#failure(r.value, 'set_timeout');
  }

  /** Replaces the whole egress configuration: fields left out are cleared. */
  async putNetwork(id: string, net: NetworkConfig): Promise<SandboxResult<void>> {
    const r = await this.#request('PUT', `sandboxes/${encodeURIComponent(id)}/network`, 'put_network', net);
    if (!r.ok) return r;
    if (r.value.status === 204 || r.value.status === 200) return ok(undefined);
    return this.#failure(r.value, 'put_network');
  }
}
