/**
 * Reads the token usage a model API reports, beside the bytes passing through: SSE events as they
 * stream (Anthropic message_start/message_delta, OpenAI response.completed and chat usage chunks, Gemini usageMetadata) or a JSON body.
 */

export interface CallUsage {
  /** Input tokens not read from a cache. */
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);
const obj = (v: unknown): Record<string, unknown> | null =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

/** Bodies beyond this are passed on but not read for usage (a JSON answer this large has its usage lost). */
const MAX_JSON_READ = 16 * 1024 * 1024;

export class UsageReader {
  readonly #sse: boolean;
  #usage: CallUsage | null = null;
  #line = '';
  #json: Buffer[] = [];
  #jsonBytes = 0;
  readonly #decoder = new TextDecoder();

  constructor(contentType: string | undefined) {
    this.#sse = (contentType ?? '').includes('text/event-stream');
  }

  feed(chunk: Uint8Array): void {
    if (!this.#sse) {
      if (this.#jsonBytes + chunk.length <= MAX_JSON_READ) this.#json.push(Buffer.from(chunk));
      this.#jsonBytes += chunk.length;
      return;
    }
    const text = this.#line + this.#decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      this.#sseLine(text.slice(start, nl));
      start = nl + 1;
    }
    this.#line = text.slice(start);
  }

  /** The usage reported, or null when the answer carried none. */
  end(): CallUsage | null {
    if (this.#sse) {
      if (this.#line) this.#sseLine(this.#line);
      this.#line = '';
    } else if (this.#jsonBytes > 0 && this.#jsonBytes <= MAX_JSON_READ) {
      try {
        const v: unknown = JSON.parse(Buffer.concat(this.#json).toString('utf8'));
        // Gemini's streamGenerateContent without alt=sse answers one JSON array of chunks.
        for (const item of Array.isArray(v) ? v : [v]) this.#apply(item);
      } catch {
        // Not JSON (an HTML error page, say): no usage.
      }
      this.#json = [];
    }
    return this.#usage;
  }

  #sseLine(raw: string): void {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (!line.startsWith('data:')) return;
    // Most events are deltas without usage: parsed only when they could carry it.
    if (!line.includes('sage')) return;
    try {
      this.#apply(JSON.parse(line.slice(5)));
    } catch {
      // `[DONE]` and anything else that is not JSON.
    }
  }

  #set(u: Partial<CallUsage>): void {
    const cur = this.#usage ?? { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
    this.#usage = { ...cur, ...u };
  }

  #apply(v: unknown): void {
    const o = obj(v);
    if (!o) return;
    // Anthropic: message_start carries input and cache counts, message_delta the running output count.
    if (o.type === 'message_start') return this.#anthropic(obj(obj(o.message)?.usage));
    if (o.type === 'message_delta' || o.type === 'message') return this.#anthropic(obj(o.usage));
    // OpenAI Responses: the final event's response, or a non-streamed response object.
    const response = obj(o.response);
    if (response && typeof o.type === 'string' && o.type.startsWith('response.'))
      return this.#openai(obj(response.usage));
    if (o.object === 'response') return this.#openai(obj(o.usage));
    // Chat Completions: a usage object on the last chunk (stream_options.include_usage) or the completion.
    const u = obj(o.usage);
    if (u && ('prompt_tokens' in u || 'completion_tokens' in u)) {
      const cached = num(obj(u.prompt_tokens_details)?.cached_tokens);
      return this.#set({
        input: Math.max(0, num(u.prompt_tokens) - cached),
        output: num(u.completion_tokens),
        cacheRead: cached,
      });
    }
    // Gemini: every chunk may carry usageMetadata; the last one is the call's.
    const g = obj(o.usageMetadata);
    if (g) {
      const cached = num(g.cachedContentTokenCount);
      this.#set({
        input: Math.max(0, num(g.promptTokenCount) - cached),
        output: num(g.candidatesTokenCount) + num(g.thoughtsTokenCount),
        cacheRead: cached,
      });
    }
  }

  #anthropic(u: Record<string, unknown> | null): void {
    if (!u) return;
    const p: Partial<CallUsage> = {};
    if ('input_tokens' in u && u.input_tokens !== null) p.input = num(u.input_tokens);
    if ('output_tokens' in u && u.output_tokens !== null) p.output = num(u.output_tokens);
    if ('cache_read_input_tokens' in u && u.cache_read_input_tokens !== null)
      p.cacheRead = num(u.cache_read_input_tokens);
    if ('cache_creation_input_tokens' in u && u.cache_creation_input_tokens !== null)
      p.cacheWrite = num(u.cache_creation_input_tokens);
    this.#set(p);
  }

  #openai(u: Record<string, unknown> | null): void {
    if (!u) return;
    const cached = num(obj(u.input_tokens_details)?.cached_tokens);
    this.#set({ input: Math.max(0, num(u.input_tokens) - cached), output: num(u.output_tokens), cacheRead: cached });
  }
}
