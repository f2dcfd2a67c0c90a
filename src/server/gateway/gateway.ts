/**
 * The model gateway: a pass-through for the Anthropic, OpenAI and Gemini APIs that takes a
 * conversation's sandbox token, holds the call to its limits, attaches the account's real credential,
 * streams the vendor's answer back as it arrives, and records the call's usage.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { Agent, request, type Dispatcher } from 'undici';
import { API_KEY_PATTERN, findKeyByHash, hashApiKey } from '../core/keys-store.ts';
import { KEY_CACHE_TTL_MS, keyGeneration, recall, remember } from '../core/key-cache-store.ts';
import type { OpenedCredential } from '../credentials/delivery.ts';
import {
  CREDENTIAL_API,
  CREDENTIAL_PROVIDERS,
  credentialsFor,
  type CredentialProvider,
} from '../credentials/providers.ts';
import type { Db } from '../store/db.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { admit, complete, recordCalls } from './admission.ts';
import { hasBudget, modelRefusal, type Refusal } from './limits.ts';
import { costMicros, DEFAULT_PRICES, type PriceTable } from './prices.ts';
import { callerContext, type CallerContext, type NewModelCall } from './store.ts';
import { drained, readBody } from './io.ts';
import { UsageReader, type CallUsage } from './usage.ts';
import {
  DROPPED_RESPONSE,
  endpointOf,
  GATEWAY_PREFIX,
  isGatewayApi,
  modelOf,
  outputCapOf,
  presentedKey,
  upstreamHeaders,
  vendorError,
  type ErrorKind,
  type GatewayApi,
} from './vendors.ts';

/** Model requests carry whole conversations; beyond this a request is refused in the vendor's shape. */
export const MAX_GATEWAY_REQUEST_BYTES = 32 * 1024 * 1024;
/** How long a caller's conversation and limits are reused: configuration, never counters. */
const CONTEXT_TTL_MS = 1_000;
/** Unbudgeted calls' audit rows are written together, at most this long after their call ended or once this many wait. */
const FLUSH_MS = 25;
const FLUSH_ROWS = 200;
/** The calls limits and budgets apply to: the ones that make the model generate. */
const GENERATING = new Set(['messages', 'responses', 'chat_completions', 'generateContent', 'streamGenerateContent']);

export interface GatewayDeps {
  readonly db: Db;
  readonly credentials: {
    /** With the agent's id, the credential of the set that agent uses at the time of the call. */
    open(
      accountId: string,
      providers: readonly CredentialProvider[],
      set: { readonly agentId: string | null },
    ): Promise<OpenedCredential | 'unreadable' | null>;
  };
  readonly logger: Logger;
  readonly prices?: PriceTable;
  readonly nodeId?: string;
}

/** One call's facts for its audit row. */
interface CallRecord {
  readonly caller: CallerContext;
  readonly api: GatewayApi;
  readonly endpoint: string;
  readonly model: string | null;
  readonly startedAt: Date;
  /** The in-flight row of a call held to a budget, completed when the call ends; null: written then. */
  reservation: string | null;
}

/** Tokenizers average about four bytes of JSON or prose per token; a reservation errs high. */
const BYTES_PER_TOKEN = 4;

export class ModelGateway {
  readonly #d: GatewayDeps;
  readonly #db: EngineDb;
  readonly #dispatcher: Dispatcher;
  readonly #contexts = new Map<string, { at: number; value: CallerContext | null }>();
  /** Opened credentials by account, agent and providers, kept as authenticated keys are (see #credential). */
  readonly #credentials = new Map<string, { at: number; generation: number; value: OpenedCredential }>();
  /** Audit rows still being written (awaited by `drain`, so a stopping server loses none). */
  readonly #writes = new Set<Promise<void>>();
  readonly #queue: NewModelCall[] = [];
  #flushTimer: NodeJS.Timeout | null = null;

  constructor(deps: GatewayDeps) {
    this.#d = deps;
    this.#db = deps.db as unknown as EngineDb;
    // Model answers may take minutes to begin and stream for many more.
    this.#dispatcher = new Agent({ headersTimeout: 600_000, bodyTimeout: 600_000, keepAliveTimeout: 30_000 });
  }

  static matches(url: string | undefined): boolean {
    return !!url && url.startsWith(GATEWAY_PREFIX);
  }

  async close(): Promise<void> {
    await this.drain();
    await this.#dispatcher.close();
  }

  async drain(): Promise<void> {
    this.#flush();
    while (this.#writes.size) await Promise.allSettled([...this.#writes]);
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.#handle(req, res).catch((err: unknown) => {
      this.#d.logger.error({ err }, 'model gateway call failed');
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end();
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const startedAt = new Date();
    const url = new URL(req.url ?? '/', 'http://gateway');
    const after = url.pathname.slice(GATEWAY_PREFIX.length);
    const slash = after.indexOf('/');
    const apiName = slash < 0 ? after : after.slice(0, slash);
    const rest = slash < 0 ? '' : after.slice(slash);
    if (!isGatewayApi(apiName)) {
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: 'not_found',
          message: `the model gateway speaks anthropic, openai and gemini, not ${JSON.stringify(apiName)}`,
        }),
      );
      return;
    }
    const api: GatewayApi = apiName;
    // Claude Code's connectivity probe carries no key; it asks whether the endpoint answers, which it does.
    if (api === 'anthropic' && rest === '/api/hello' && (req.method === 'HEAD' || req.method === 'GET')) {
      req.resume();
      res.writeHead(200).end();
      return;
    }
    const token = presentedKey(req.headers, url.searchParams);
    const caller = token ? await this.#caller(token) : null;
    if (!caller) {
      req.resume();
      return this.#answer(
        res,
        api,
        'auth',
        'Fountain gateway: the key is not a live sandbox token (unknown, revoked or expired)',
      );
    }
    const body = await readBody(req, MAX_GATEWAY_REQUEST_BYTES);
    if (body === null)
      return this.#answer(
        res,
        api,
        'too_large',
        `Fountain gateway: requests are limited to ${MAX_GATEWAY_REQUEST_BYTES} bytes`,
      );
    let json: unknown = null;
    if (body.length > 0 && (req.headers['content-type'] ?? '').includes('json')) {
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        json = null;
      }
    }
    const endpoint = endpointOf(api, rest);
    const model = modelOf(api, rest, json);
    const call: CallRecord = { caller, api, endpoint, model, startedAt, reservation: null };
    // Read beside the admission (on PostgreSQL another connection), not after it; a refused call leaves it unread.
    const opening = this.#credential(caller, api);
    opening.catch(() => undefined);
    if (GENERATING.has(endpoint)) {
      const refused = modelRefusal(caller.agentLimits, model);
      if (refused) return this.#refuse(res, call, refused, started);
      if (hasBudget(caller.agentLimits) || hasBudget(caller.accountLimits)) {
        const admitted = await this.#admit(call, body.length, json);
        if ('refused' in admitted) return this.#refuse(res, call, admitted.refused, started);
        call.reservation = admitted.id;
      }
    }
    const cred = await opening;
    if (cred === null || cred === 'unreadable') {
      const words =
        cred === null
          ? `Fountain gateway: the account has no ${api} model credential for this ${caller.runtime} agent: set one on the Model credentials page (/account/credentials) or with \`fountain credentials set\``
          : `Fountain gateway: the account's ${api} model credential cannot be opened with this server's secret key: set it again on the Model credentials page (/account/credentials)`;
      await this.#record(call, { status: 401, refused: 'credential', latencyMs: performance.now() - started });
      return this.#answer(res, api, 'auth', words);
    }
    const base = (cred.baseUrl ?? CREDENTIAL_API[cred.provider].defaultBaseUrl).replace(/\/+$/, '');
    url.searchParams.delete('key');
    const query = url.searchParams.toString();
    const target = `${base}${rest}${query ? `?${query}` : ''}`;
    let payload: Buffer = body;
    // Chat Completions streams report usage only when asked; the gateway asks, so every call is metered.
    if (endpoint === 'chat_completions' && json && typeof json === 'object') {
      const j = json as { stream?: unknown; stream_options?: { include_usage?: unknown } };
      if (j.stream === true && j.stream_options?.include_usage !== true)
        payload = Buffer.from(
          JSON.stringify({ ...j, stream_options: { ...(j.stream_options ?? {}), include_usage: true } }),
        );
    }
    const headers = upstreamHeaders(req.headers, cred.provider, cred.value.reveal());
    if (payload.length > 0) headers['content-length'] = String(payload.length);
    let up: Dispatcher.ResponseData;
    const upstream = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) upstream.abort();
    });
    try {
      up = await request(target, {
        method: (req.method ?? 'GET') as Dispatcher.HttpMethod,
        headers,
        body: payload.length > 0 ? payload : null,
        dispatcher: this.#dispatcher,
        signal: upstream.signal,
      });
    } catch (e) {
      const why = (e as { code?: string }).code ?? (e instanceof Error ? e.message : String(e));
      await this.#record(call, { status: 502, latencyMs: performance.now() - started });
      if (res.destroyed) return;
      return this.#answer(
        res,
        api,
        'unavailable',
        `Fountain gateway: the ${api} model API at ${new URL(base).origin} could not be reached (${why})`,
      );
    }
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !DROPPED_RESPONSE.has(k)) out[k] = v;
    res.writeHead(up.statusCode, out);
    const reader = new UsageReader(String(up.headers['content-type'] ?? ''));
    let firstByte: number | null = null;
    let broken = false;
    try {
      for await (const chunk of up.body) {
        firstByte ??= performance.now() - started;
        reader.feed(chunk);
        // The caller reads slower than the vendor writes: wait for it (or for it to leave).
        if (!res.write(chunk) && !(await drained(res))) break;
      }
    } catch (e) {
      // The caller left or the vendor's stream broke: what arrived was passed on, the rest is not invented.
      broken = true;
      if (!res.destroyed) res.destroy(e instanceof Error ? e : undefined);
    }
    const written = this.#record(call, {
      status: up.statusCode,
      latencyMs: performance.now() - started,
      firstByteMs: firstByte,
      usage: reader.end(),
    });
    // A budgeted call's usage is stored before its answer ends, so the runtime's next call is judged with it.
    if (call.reservation) await written;
    if (!broken) res.end();
  }

  /** Reserves what the call may use (its request's size in tokens, plus its output cap) or refuses it. */
  #admit(call: CallRecord, bytes: number, json: unknown): ReturnType<typeof admit> {
    const input = Math.ceil(bytes / BYTES_PER_TOKEN);
    const output = outputCapOf(call.api, json);
    const prices = this.#d.prices ?? DEFAULT_PRICES;
    const micros = costMicros(prices, call.model, { input, output, cacheRead: 0, cacheWrite: 0 }) ?? 0;
    return admit(
      this.#db,
      call.caller,
      { ...this.#row(call, { status: 0, latencyMs: 0 }), reservedTokens: input + output, reservedMicros: micros },
      call.startedAt,
    );
  }

  #answer(res: ServerResponse, api: GatewayApi, kind: ErrorKind, message: string): void {
    const e = vendorError(api, kind, message);
    res.writeHead(e.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(e.body) });
    res.end(e.body);
  }

  #refuse(res: ServerResponse, call: CallRecord, r: Refusal, started: number): void {
    void this.#record(call, {
      status: vendorError(call.api, r.kind, '').status,
      refused: r.limit,
      latencyMs: performance.now() - started,
    });
    this.#answer(res, call.api, r.kind, r.message);
  }

  /** Writes the call's audit row: completes its reservation, or queues the row for the next batch. */
  #record(call: CallRecord, r: RecordFacts): Promise<void> {
    const row = this.#row(call, r);
    if (call.reservation) {
      const w = complete(this.#db, call.reservation, row)
        .catch((err: unknown) => this.#d.logger.error({ err }, 'completing a model call failed'))
        .finally(() => this.#writes.delete(w));
      this.#writes.add(w);
      return w;
    }
    this.#queue.push(row);
    if (this.#queue.length >= FLUSH_ROWS) this.#flush();
    else this.#flushTimer ??= setTimeout(() => this.#flush(), FLUSH_MS);
    return Promise.resolve();
  }

  #row(call: CallRecord, r: RecordFacts): NewModelCall {
    const u = r.usage ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
    return {
      accountId: call.caller.accountId,
      agentId: call.caller.agentId,
      conversationId: call.caller.conversationId,
      nodeId: this.#d.nodeId ?? null,
      api: call.api,
      endpoint: call.endpoint,
      model: call.model,
      status: r.status,
      refused: r.refused ?? null,
      inputTokens: u.input,
      outputTokens: u.output,
      cacheReadTokens: u.cacheRead,
      cacheWriteTokens: u.cacheWrite,
      costMicros: r.usage ? costMicros(this.#d.prices ?? DEFAULT_PRICES, call.model, u) : null,
      latencyMs: Math.round(r.latencyMs),
      firstByteMs: r.firstByteMs === undefined || r.firstByteMs === null ? null : Math.round(r.firstByteMs),
      createdAt: call.startedAt,
    };
  }

  /** Writes the queued rows in one statement: a write per call would cost each call a database round of its own. */
  #flush(): void {
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    this.#flushTimer = null;
    const rows = this.#queue.splice(0);
    if (rows.length === 0) return;
    const w = recordCalls(this.#db, rows)
      .catch((err: unknown) => this.#d.logger.error({ err, calls: rows.length }, 'recording model calls failed'))
      .finally(() => this.#writes.delete(w));
    this.#writes.add(w);
  }

  /** The conversation a live sandbox token belongs to, with its agent's and account's limits. */
  async #caller(token: string): Promise<CallerContext | null> {
    if (!API_KEY_PATTERN.test(token)) return null;
    const hash = hashApiKey(token);
    let found = recall(this.#d.db, hash);
    if (!found) {
      const readAt = keyGeneration();
      found = await findKeyByHash(this.#d.db, hash);
      if (found) remember(this.#d.db, hash, found, readAt);
    }
    const key = found?.key;
    if (!key || key.revokedAt || !key.conversationId || !key.scopes.includes('sprite')) return null;
    if (key.expiresAt && key.expiresAt <= new Date()) return null;
    const now = Date.now();
    const hit = this.#contexts.get(key.conversationId);
    if (hit && now - hit.at < CONTEXT_TTL_MS) return hit.value;
    const value = await callerContext(this.#db, key.conversationId);
    if (this.#contexts.size > 10_000) this.#contexts.clear();
    this.#contexts.set(key.conversationId, { at: now, value });
    return value;
  }

  /** The account's credential for this API, the runtime's preferred one first (Claude Code's OAuth token). */
  async #credential(c: CallerContext, api: GatewayApi): Promise<OpenedCredential | 'unreadable' | null> {
    // The launch's own preference (credentialsFor), so the gateway attaches the credential the runtime was set up for.
    const providers =
      c.runtime === 'claude' && api === 'anthropic'
        ? credentialsFor('claude', 'anthropic/')
        : CREDENTIAL_PROVIDERS.filter((p) => CREDENTIAL_API[p].api === api && p !== 'claude_code_oauth_token');
    // Kept as authenticated keys are (core/key-cache-store.ts): a credential written or removed, or an agent's
    // set switched, forgets every entry here at once and on other nodes once the cluster bus tells them; no
    // entry outlives KEY_CACHE_TTL_MS. A read per call put a statement on every call's path.
    const key = `${c.accountId} ${c.agentId ?? ''} ${providers.join(',')}`;
    const now = Date.now();
    const hit = this.#credentials.get(key);
    if (hit && hit.generation === keyGeneration() && now - hit.at < KEY_CACHE_TTL_MS) return hit.value;
    const readAt = keyGeneration();
    const value = await this.#d.credentials.open(c.accountId, providers, { agentId: c.agentId });
    // Only one found and read after the latest change: a missing one is read again on the next call.
    if (value !== null && value !== 'unreadable' && readAt === keyGeneration()) {
      if (this.#credentials.size > 1_000) this.#credentials.clear();
      this.#credentials.set(key, { at: now, generation: readAt, value });
    }
    return value;
  }
}

interface RecordFacts {
  readonly status: number;
  readonly latencyMs: number;
  readonly refused?: string;
  readonly firstByteMs?: number | null;
  readonly usage?: CallUsage | null;
}
