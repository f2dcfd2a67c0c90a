/**
 * A small client for Fountain's public HTTP API, used by the CLI commands.
 * Every reply is parsed with zod; failures surface as ApiError with the server's code.
 */
import { z } from 'zod';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly retryAfter: string | null;
  constructor(status: number, code: string, message: string, retryAfter: string | null = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

const errorBody = z
  .object({ error: z.string().optional(), message: z.string().optional(), reason: z.string().optional() })
  .loose();

export interface ApiOptions {
  baseUrl: string;
  apiKey: string;
  /**
   * Sends a request; default: the global fetch. `fountain up` passes its own server's app, which
   * answers in this process (the same routes, keys and checks) without a loopback connection.
   */
  fetch?: (request: Request) => Promise<Response>;
}

export class FountainApi {
  readonly #baseUrl: string;
  readonly #apiKey: string;
  readonly #fetch: (request: Request) => Promise<Response>;

  constructor(opts: ApiOptions) {
    this.#baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.#apiKey = opts.apiKey;
    this.#fetch = opts.fetch ?? ((request) => fetch(request));
  }

  get baseUrl(): string {
    return this.#baseUrl;
  }

  /** Sends a JSON request and parses the reply with `schema`; 204 parses `undefined`. */
  async request<S extends z.ZodType>(method: string, path: string, schema: S, body?: unknown): Promise<z.infer<S>> {
    let res: Response;
    try {
      res = await this.#fetch(
        new Request(this.#baseUrl + path, {
          method,
          headers: {
            authorization: `Bearer ${this.#apiKey}`,
            accept: 'application/json',
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        }),
      );
    } catch (e) {
      throw new ApiError(
        0,
        'unreachable',
        `cannot reach ${this.#baseUrl}: ${(e as Error).cause ?? (e as Error).message}`,
      );
    }
    const text = await res.text();
    let json: unknown = undefined;
    if (text !== '') {
      try {
        json = JSON.parse(text);
      } catch {
        throw new ApiError(
          res.status,
          'bad_reply',
          `${method} ${path}: the server answered ${res.status} with non-JSON`,
        );
      }
    }
    if (!res.ok) {
      const e = errorBody.safeParse(json);
      const code = (e.success && (e.data.error ?? e.data.reason)) || `http_${res.status}`;
      const message = (e.success && e.data.message) || code;
      throw new ApiError(res.status, code, message, res.headers.get('retry-after'));
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      throw new ApiError(
        res.status,
        'bad_reply',
        `${method} ${path}: unexpected reply (${parsed.error.issues[0]?.message})`,
      );
    }
    return parsed.data;
  }

  /** Opens an SSE stream; the caller reads it with `readSse`. */
  async openStream(path: string, lastEventId: string | null, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    let res: Response;
    try {
      res = await this.#fetch(
        new Request(this.#baseUrl + path, {
          headers: {
            authorization: `Bearer ${this.#apiKey}`,
            accept: 'text/event-stream',
            ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
          },
          signal,
        }),
      );
    } catch (e) {
      throw new ApiError(0, 'unreachable', `cannot reach ${this.#baseUrl}: ${(e as Error).message}`);
    }
    if (!res.ok || !res.body)
      throw new ApiError(res.status, `http_${res.status}`, `stream ${path} answered ${res.status}`);
    return res.body;
  }
}

export interface SseMessage {
  id: string | null;
  event: string;
  data: string;
}

/** Parses a text/event-stream body into messages (comments and heartbeats are skipped). */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buffer = '';
  let id: string | null = null;
  let event = 'message';
  let data: string[] = [];
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).replace(/\r$/, '');
      buffer = buffer.slice(nl + 1);
      if (line === '') {
        if (data.length > 0) yield { id, event, data: data.join('\n') };
        id = null;
        event = 'message';
        data = [];
      } else if (line.startsWith(':')) {
        continue;
      } else {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') id = value;
        else if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
      }
    }
  }
}
