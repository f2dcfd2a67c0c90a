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
/** An SSE line longer than this is a text delta, never a usage event: its bytes are not kept. */
const MAX_LINE = 1024 * 1024;
const NL = 0x0a;
const SAGE = Buffer.from('sage');
const EMPTY = Buffer.alloc(0);

export class UsageReader {
  readonly #sse: boolean;
  #usage: CallUsage | null = null;
  /** The bytes after the last line break seen (SSE): the start of a line still arriving. */
  #pending: Buffer = EMPTY;
  #json: Buffer[] = [];
  #jsonBytes = 0;

  constructor(contentType: string | undefined) {
    this.#sse = (contentType ?? '').includes('text/event-stream');
  }

  /**
   * Most of a long stream is deltas without usage: a line is decoded and parsed only when its bytes
   * hold "sage" (usage, usageMetadata), found with Buffer.indexOf, so the text passes by unread.
   */
  feed(chunk: Uint8Array): void {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (!this.#sse) {
      if (this.#jsonBytes + buf.length <= MAX_JSON_READ) this.#json.push(Buffer.from(buf));
      this.#jsonBytes += buf.length;
      return;
    }
    const firstNl = buf.indexOf(NL);
    if (firstNl < 0) {
      // No line ends here: keep it for the line it belongs to (bounded: such a line is a text delta, not usage).
      if (this.#pending.length + buf.length <= MAX_LINE) this.#pending = Buffer.concat([this.#pending, buf]);
      return;
    }
    let from = 0;
    if (this.#pending.length > 0) {
      const line = Buffer.concat([this.#pending, buf.subarray(0, firstNl)]);
      if (line.indexOf(SAGE) >= 0) this.#sseLine(line.toString('utf8'));
      this.#pending = EMPTY;
      from = firstNl + 1;
    }
    const lastNl = buf.lastIndexOf(NL);
    for (let hit = buf.indexOf(SAGE, from); hit >= 0 && hit < lastNl; hit = buf.indexOf(SAGE, from)) {
      const start = buf.lastIndexOf(NL, hit) + 1;
      const end = buf.indexOf(NL, hit);
      this.#sseLine(buf.toString('utf8', Math.max(start, from), end));
      from = end + 1;
    }
    if (lastNl + 1 < buf.length) this.#pending = Buffer.from(buf.subarray(lastNl + 1));
  }

  /** The usage reported, or null when the answer carried none. */
  end(): CallUsage | null {
    if (this.#sse) {
      if (this.#pending.length > 0 && this.#pending.indexOf(SAGE) >= 0) this.#sseLine(this.#pending.toString('utf8'));
      this.#pending = EMPTY;
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
