/**
 * Follows one conversation's SSE stream, reconnecting with Last-Event-ID, and hands each
 * event to the caller in order. Ends when the caller aborts or the idle timeout passes.
 */
import type { FountainApi } from './api.ts';
import { readSse } from './api.ts';
import { logEventSchema } from './schemas.ts';
import type { LogEvent } from './schemas.ts';

export interface FollowOptions {
  api: FountainApi;
  conversationId: string;
  onEvent: (ev: LogEvent & { id: string | null }) => void;
  signal: AbortSignal;
  /** Start after this event id (as Last-Event-ID); null replays the whole conversation. */
  since?: string | null;
  /** Give up after this long without any event; FOUNTAIN_STREAM_IDLE_TIMEOUT seconds, default 1800. */
  idleTimeoutMs?: number;
}

export async function follow(opts: FollowOptions): Promise<void> {
  const idleMs = opts.idleTimeoutMs ?? Number(process.env.FOUNTAIN_STREAM_IDLE_TIMEOUT ?? 1800) * 1000;
  let lastId: string | null = opts.since ?? null;
  let lastEventAt = Date.now();
  while (!opts.signal.aborted) {
    if (Date.now() - lastEventAt > idleMs) throw new Error('the event stream was idle for too long');
    try {
      const body = await opts.api.openStream(`/api/conversations/${opts.conversationId}/stream`, lastId, opts.signal);
      for await (const msg of readSse(body)) {
        lastEventAt = Date.now();
        if (msg.id) lastId = msg.id;
        let json: unknown;
        try {
          json = JSON.parse(msg.data);
        } catch {
          continue;
        }
        const ev = logEventSchema.safeParse(json);
        if (ev.success) opts.onEvent({ ...ev.data, id: msg.id });
      }
    } catch (e) {
      if (opts.signal.aborted) return;
      if ((e as { status?: number }).status === 404) throw e;
    }
    if (!opts.signal.aborted) await new Promise((r) => setTimeout(r, 500));
  }
}
