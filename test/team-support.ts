/**
 * Shared by the team end-to-end tests: JSON calls over fetch and an SSE reader that keeps the raw
 * text (to see `: connected` first) and parses `id`/`event`/`data` blocks.
 */
import assert from 'node:assert/strict';
import { until } from '../src/server/engine/testing.ts';

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Reply {
  status: number;
  body: Json;
  headers: Headers;
}

export async function call(base: string, key: string, method: string, path: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  let parsed: Json = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

export interface SseEvent {
  id: number | null;
  event: string;
  data: Json;
}

export interface Stream {
  readonly events: SseEvent[];
  raw(): string;
  heartbeats(): number;
  close(): void;
  /** The first event matching `pred` at index ≥ `from`. */
  wait(pred: (e: SseEvent) => boolean, what: string, from?: number): Promise<SseEvent>;
}

export function openStream(url: string, key: string, lastEventId?: number): Stream {
  const events: SseEvent[] = [];
  let raw = '';
  let beats = 0;
  const ctl = new AbortController();
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: 'text/event-stream' };
  if (lastEventId !== undefined) headers['last-event-id'] = String(lastEventId);
  void (async () => {
    const res = await fetch(url, { headers, signal: ctl.signal });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const text = dec.decode(value, { stream: true });
      raw += text;
      buf += text;
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const ev: SseEvent = { id: null, event: 'message', data: null };
        let comment = true;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) {
            if (line.includes('heartbeat')) beats++;
            continue;
          }
          comment = false;
          const [k, ...rest] = line.split(':');
          const v = rest.join(':').replace(/^ /, '');
          if (k === 'id') ev.id = Number(v);
          else if (k === 'event') ev.event = v;
          else if (k === 'data') ev.data = JSON.parse(v);
        }
        if (!comment) events.push(ev);
      }
    }
  })().catch((e: unknown) => {
    if (!(e instanceof Error && e.name === 'AbortError')) throw e;
  });
  return {
    events,
    raw: () => raw,
    heartbeats: () => beats,
    close: () => ctl.abort(),
    wait: (pred, what, from = 0) => until(() => events.slice(from).find(pred), what, 60_000),
  };
}

export const stageIs = (stage: string, state: string, agentId?: string) => (e: SseEvent) =>
  e.data?.stage === stage && e.data?.state === state && (agentId === undefined || e.data?.agent_id === agentId);
