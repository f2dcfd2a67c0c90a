/**
 * A small client for the server's HTTP API on loopback: JSON calls with the bearer key, and one
 * SSE subscription to a conversation's stream that resolves waiters on matching events.
 */
import { z } from 'zod';

export const eventSchema = z.object({
  id: z.number(),
  kind: z.enum(['output', 'stage']),
  stream: z.string(),
  data: z.string(),
  stage: z.string().nullable(),
  state: z.string().nullable(),
  turn_id: z.string().nullable(),
});
export type StreamEvent = z.infer<typeof eventSchema> & { readonly receivedAt: bigint };

export class Api {
  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {}

  async call(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text.slice(0, 300)}`);
    // A 204 (terminate, delete) has no body.
    return (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>;
  }
}

/** True for an ACP output event carrying an agent message chunk. */
export const isAnswerChunk = (e: StreamEvent): boolean =>
  e.kind === 'output' && e.data.includes('"agent_message_chunk"');

/** One SSE connection to /api/conversations/{id}/stream, kept open; events are also counted. */
export class EventStream {
  readonly events: StreamEvent[] = [];
  /** Called with every event as it is read, before waiters. */
  onEvent: (e: StreamEvent) => void = () => {};
  readonly #abort = new AbortController();
  #waiters: Array<{ match: (e: StreamEvent) => boolean; resolve: (e: StreamEvent) => void }> = [];
  #failed: Error | null = null;

  private constructor() {}

  static async open(api: Api, conversationId: string): Promise<EventStream> {
    const s = new EventStream();
    const res = await fetch(`${api.baseUrl}/api/conversations/${conversationId}/stream`, {
      headers: { authorization: `Bearer ${api.key}`, accept: 'text/event-stream' },
      signal: s.#abort.signal,
    });
    if (!res.ok || !res.body) throw new Error(`stream: HTTP ${res.status}`);
    void s.#read(res.body);
    return s;
  }

  /** Resolves with the first event (already seen or coming) that matches. */
  next(match: (e: StreamEvent) => boolean, timeoutMs = 120_000): Promise<StreamEvent> {
    const seen = this.events.find(match);
    if (seen) return Promise.resolve(seen);
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('timed out waiting for an event')), timeoutMs);
      this.#waiters.push({
        match,
        resolve: (e) => {
          clearTimeout(t);
          resolve(e);
        },
      });
    });
  }

  close(): void {
    this.#abort.abort();
  }

  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of body) {
        buf += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const data = block
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('\n');
          if (!data) continue;
          const parsed = eventSchema.safeParse(JSON.parse(data));
          if (!parsed.success) continue;
          const e: StreamEvent = { ...parsed.data, receivedAt: process.hrtime.bigint() };
          this.events.push(e);
          this.onEvent(e);
          const ready = this.#waiters.filter((w) => w.match(e));
          this.#waiters = this.#waiters.filter((w) => !w.match(e));
          for (const w of ready) w.resolve(e);
        }
      }
    } catch (e) {
      if (!this.#abort.signal.aborted) this.#failed = e instanceof Error ? e : new Error(String(e));
    }
  }
}

export const turnEnded =
  (turnId: string) =>
  (e: StreamEvent): boolean =>
    e.kind === 'stage' &&
    e.stage === 'turn' &&
    e.turn_id === turnId &&
    (e.state === 'done' || e.state === 'failed' || e.state === 'interrupted');
