/**
 * HTTP and SSE helpers the end-to-end conversation and team tests share: a JSON call against the
 * public API, an SSE reader, and the agent's reply text of a turn.
 */
import assert from 'node:assert/strict';
import { until } from '../../src/server/conversations/testing.ts';

export type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Reply {
  status: number;
  body: Json;
  headers: Headers;
}

export async function call(
  base: string,
  key: string | null,
  method: string,
  path: string,
  body?: unknown,
  raw?: string,
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined || raw !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, {
    method,
    headers,
    ...(raw !== undefined ? { body: raw } : body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: Json = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/**
 * Messages a teammate. One whose computer is still starting answers 503 provisioning ("try again
 * shortly"), as a loaded machine's may: this tries again, as a client does, and returns the first other answer.
 */
export async function messageTeammate(base: string, key: string, agentId: string, prompt: string): Promise<Reply> {
  return until(
    async () => {
      const sent = await call(base, key, 'POST', `/api/team/${agentId}/messages`, { prompt });
      return sent.status === 503 && sent.body?.error === 'provisioning' ? null : sent;
    },
    `the message to ${agentId} to be taken`,
    60_000,
  );
}

export interface SseEvent {
  id: number | null;
  event: string;
  data: Json;
}

export interface Stream {
  readonly events: SseEvent[];
  /** Everything received, comments included (to see `: connected` first). */
  raw(): string;
  /** How many `: heartbeat` comments arrived. */
  heartbeats(): number;
  close(): void;
  readonly done: Promise<void>;
  /** The first stage event `stage/state` after event id `after`. */
  stage(stage: string, state: string, afterId?: number): Promise<SseEvent>;
  /** The first event matching `pred` at index ≥ `from`. */
  wait(pred: (e: SseEvent) => boolean, what: string, from?: number): Promise<SseEvent>;
}

/** A minimal SSE reader over fetch: collects events until closed. */
export function openStream(url: string, key: string, lastEventId?: number): Stream {
  const events: SseEvent[] = [];
  let raw = '';
  let beats = 0;
  const ctl = new AbortController();
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, accept: 'text/event-stream' };
  if (lastEventId !== undefined) headers['last-event-id'] = String(lastEventId);
  const done = (async () => {
    const res = await fetch(url, { headers, signal: ctl.signal });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) return;
      const text = dec.decode(value, { stream: true });
      raw += text;
      buf += text;
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const ev: SseEvent = { id: null, event: 'message', data: null };
        let isComment = true;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) {
            if (line.includes('heartbeat')) beats++;
            continue;
          }
          isComment = false;
          const [k, ...rest] = line.split(':');
          const v = rest.join(':').replace(/^ /, '');
          if (k === 'id') ev.id = Number(v);
          else if (k === 'event') ev.event = v;
          else if (k === 'data') ev.data = JSON.parse(v);
        }
        if (!isComment) events.push(ev);
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
    done,
    stage: (stage, state, afterId = 0) =>
      until(
        () => events.find((e) => (e.id ?? 0) > afterId && e.data?.stage === stage && e.data?.state === state),
        `${stage}/${state} on the stream`,
        60_000,
      ),
    wait: (pred, what, from = 0) => until(() => events.slice(from).find(pred), what, 60_000),
  };
}

/** A stage event `stage/state`, of one teammate when `agentId` is given (team stream events carry it). */
export const stageIs = (stage: string, state: string, agentId?: string) => (e: SseEvent) =>
  e.data?.stage === stage && e.data?.state === state && (agentId === undefined || e.data?.agent_id === agentId);

/** The agent's reply in a turn: its agent_message_chunk texts, joined, from stored events. */
export function answerOf(events: readonly Json[], turnId: string): string {
  let text = '';
  for (const e of events) {
    if (e?.turn_id !== turnId || e?.stream !== 'acp') continue;
    const m = JSON.parse(e.data);
    const u = m.params?.update;
    if (m.method === 'session/update' && u?.sessionUpdate === 'agent_message_chunk') text += u.content?.text ?? '';
  }
  return text;
}

/** The same, from SSE events (whose data is the stored event). */
export const answer = (events: readonly SseEvent[], turnId: string): string =>
  answerOf(
    events.map((e) => e.data),
    turnId,
  );

/** A JSON call bound to one server and key, as the tests write `api(method, path, body)`. */
export type Api = (method: string, path: string, body?: unknown) => Promise<Reply>;

/**
 * What the runner, checkpoint and restore tests poll for over the public API: a runner online by name,
 * every stored event of a conversation (paged), and the event that ends a turn.
 */
export function watchOver(api: Api) {
  const events = async (id: string): Promise<Json[]> => {
    const all: Json[] = [];
    for (let after = 0; ; ) {
      const page = await api('GET', `/api/conversations/${id}/events?after=${after}&limit=1000`);
      all.push(...(page.body.data as Json[]));
      if (!page.body.meta.has_more) return all;
      after = page.body.meta.next_cursor;
    }
  };
  return {
    events,
    online: (name: string, timeoutMs = 60_000) =>
      until(
        async () => ((await api('GET', '/api/runners')).body.data as Json[]).find((r) => r.name === name && r.online),
        `runner ${name} online`,
        timeoutMs,
      ),
    turnEnd: (id: string, turnId: string, timeoutMs?: number) =>
      until(
        async () =>
          (await events(id)).find(
            (e) => e.stage === 'turn' && e.state !== 'started' && JSON.parse(e.data).turn_id === turnId,
          ),
        `turn ${turnId} to end`,
        timeoutMs,
      ),
  };
}
