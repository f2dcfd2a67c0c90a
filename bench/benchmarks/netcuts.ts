/**
 * netcuts: a soak of the runner's link. The runner dials through a loopback proxy that cuts the
 * network every 3 s while demo turns run; reconnect after each restore as a distribution, every turn once.
 */
import type { Benchmark } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { startCutProxy } from '../lib/cut-proxy.ts';
import { verdict } from '../lib/result.ts';
import { SETUP_RUNNER, SETUP_SERVER, startRunnerRig } from '../lib/rig.ts';
import type { RunnerRig } from '../lib/rig.ts';
import { percentile, ratio, round, roundSummary, summarize } from '../lib/stats.ts';
import { slowAnswer } from '../../src/acp/demo/agent.ts';
import { demoAgent } from './turn.ts';

const INTERVAL_MS = 3000;
/** How long the network stays down at each cut: shorter than the daemon's first reconnect delay (1 s). */
const OUTAGE_MS = 500;
/** The goal: the runner back within 2 s of the network returning. */
const TARGET_MS = 2000;
/** A demo turn of about a second: 20 chunks 50 ms apart, so cuts land inside turns. */
const CHUNKS = 20;
const PROMPT = `slow: ${CHUNKS} 50ms`;
const TERMINAL = new Set(['completed', 'failed', 'interrupted']);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Turn {
  readonly id: string;
  readonly status: string;
  readonly reason?: string | null;
}
interface Event {
  readonly id: number;
  readonly stream: string;
  readonly stage: string | null;
  readonly state: string | null;
  readonly turn_id: string | null;
  readonly data: string;
}

async function call(rig: RunnerRig, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${rig.server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${rig.apiKey}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function json<T>(rig: RunnerRig, method: string, path: string, body?: unknown): Promise<T> {
  const res = await call(rig, method, path, body);
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** Every stored event of a conversation, paging by cursor. */
async function allEvents(rig: RunnerRig, conversationId: string): Promise<Event[]> {
  const out: Event[] = [];
  let after = 0;
  for (;;) {
    const page = await json<{ data: Event[]; meta: { has_more: boolean; next_cursor: number | null } }>(
      rig,
      'GET',
      `/api/conversations/${conversationId}/events?after=${after}&limit=1000`,
    );
    out.push(...page.data);
    if (!page.meta.has_more || page.meta.next_cursor === null) return out;
    after = page.meta.next_cursor;
  }
}

/** The agent's answer in one turn, from its stored ACP events. */
function answerOf(events: readonly Event[], turnId: string): string {
  let text = '';
  for (const e of events) {
    if (e.turn_id !== turnId || e.stream !== 'acp') continue;
    const m = JSON.parse(e.data) as {
      method?: string;
      params?: { update?: { sessionUpdate?: string; content?: { text?: string } } };
    };
    const u = m.params?.update;
    if (m.method === 'session/update' && u?.sessionUpdate === 'agent_message_chunk') text += u.content?.text ?? '';
  }
  return text;
}

interface Driven {
  /** Every turn the server accepted, with its conversation. */
  readonly turns: Array<{ readonly conversationId: string; readonly turnId: string }>;
  /** Conversations that ended failed under the cuts (a new one took over), with why. */
  readonly lost: string[];
  /** Milliseconds from each accepted prompt to its turn's end. */
  readonly turnMs: number[];
  /** Prompts answered 503 (runner away) or 409 (still busy) and sent again. */
  refused: number;
}

/** Opens a demo conversation and waits for its first turn, so provisioning is behind it. */
async function openConversation(rig: RunnerRig, agentId: string): Promise<{ conversationId: string; turnId: string }> {
  const created = await json<{ data: { id: string }; turn_id?: string }>(rig, 'POST', '/api/conversations', {
    agent_id: agentId,
    prompt: PROMPT,
  });
  const conversationId = created.data.id;
  const turns = await untilTurnsEnd(rig, conversationId);
  return { conversationId, turnId: turns.at(-1)!.id };
}

async function untilTurnsEnd(rig: RunnerRig, conversationId: string): Promise<Turn[]> {
  for (;;) {
    const turns = (await json<{ data: Turn[] }>(rig, 'GET', `/api/conversations/${conversationId}/turns`)).data;
    if (turns.length > 0 && turns.every((t) => TERMINAL.has(t.status))) return turns;
    await sleep(100);
  }
}

/**
 * Demo turns one after another until `stop()` says so: a prompt refused while the runner is away is
 * sent again after its Retry-After; a conversation that ended failed is replaced (and reported).
 */
async function driveTurns(rig: RunnerRig, agentId: string, first: string, stop: () => boolean): Promise<Driven> {
  const out: Driven = { turns: [], lost: [], turnMs: [], refused: 0 };
  let conversationId = first;
  while (!stop()) {
    const res = await call(rig, 'POST', `/api/conversations/${conversationId}/prompts`, { prompt: PROMPT });
    const text = await res.text();
    if (res.status === 503 || res.status === 409) {
      out.refused++;
      // runner_offline (the network is cut) or the conversation still busy: both say when to try again.
      await sleep(Math.min(1000, Number(res.headers.get('retry-after') ?? '0.2') * 1000 || 200));
      continue;
    }
    if (res.status === 410) {
      const conv = await json<{ data: { status: string; reason?: string | null } }>(
        rig,
        'GET',
        `/api/conversations/${conversationId}`,
      );
      out.lost.push(`${conversationId}: ${conv.data.status} (${conv.data.reason ?? 'no reason'})`);
      const next = await openConversation(rig, agentId);
      out.turns.push({ conversationId: next.conversationId, turnId: next.turnId });
      conversationId = next.conversationId;
      continue;
    }
    if (!res.ok) throw new Error(`prompt: HTTP ${res.status} ${text.slice(0, 300)}`);
    out.turns.push({ conversationId, turnId: String((JSON.parse(text) as { turn_id: unknown }).turn_id) });
    const t0 = process.hrtime.bigint();
    await untilTurnsEnd(rig, conversationId);
    out.turnMs.push(msSince(t0));
  }
  return out;
}

/** Milliseconds from now until `check()` holds, polling every `everyMs`. */
async function timeUntil(check: () => boolean | Promise<boolean>, everyMs: number, limitMs: number): Promise<number> {
  const t0 = process.hrtime.bigint();
  for (;;) {
    if (await check()) return msSince(t0);
    if (msSince(t0) > limitMs) return Number.POSITIVE_INFINITY;
    await sleep(everyMs);
  }
}

export const netcutsBenchmark: Benchmark = {
  name: 'netcuts',
  title: `runner reconnect after network cuts every ${INTERVAL_MS / 1000} s (${OUTAGE_MS} ms outages) while demo turns run, vs the network's own return`,
  async run(ctx) {
    const cuts = ctx.quick ? 8 : 100;
    let target = '';
    const proxy = await startCutProxy(() => target);
    // The daemon's own account of each reconnect: the attempt counter says whether the backoff started over.
    const redials: Array<{ attempt: number; delayMs: number; reason: string }> = [];
    const rig = await startRunnerRig({
      logger: ctx.logger,
      runnerLogLevel: 'info',
      onRunnerLog: (line) => {
        if (!line.includes('runner: disconnected; reconnecting')) return;
        try {
          const l = JSON.parse(line) as { attempt: number; delayMs: number; reason: string };
          redials.push({ attempt: l.attempt, delayMs: l.delayMs, reason: l.reason });
        } catch {
          // not JSON: the runner writes JSON lines when its stderr is not a terminal
        }
      },
      runnerBaseUrl: (serverUrl) => {
        target = serverUrl;
        return proxy.url;
      },
    });
    const reconnectMs: number[] = [];
    const networkMs: number[] = [];
    let midTurn = 0;
    try {
      const { agentId } = await demoAgent(rig);
      // Provisioned before the first cut: what is soaked is the link under running turns.
      const first = await openConversation(rig, agentId);
      const conversations = new Set([first.conversationId]);
      let stopping = false;
      let busy = false;
      let driverError: unknown = null;
      const turns = driveTurns(rig, agentId, first.conversationId, () => stopping).catch((e: unknown) => {
        driverError = e;
        return { turns: [], lost: [], turnMs: [], refused: 0 } as Driven;
      });
      const busyWatch = (async () => {
        while (!stopping) {
          const ts = (await json<{ data: Turn[] }>(rig, 'GET', `/api/conversations/${first.conversationId}/turns`))
            .data;
          busy = ts.some((t) => !TERMINAL.has(t.status));
          await sleep(50);
        }
      })().catch(() => undefined);
      ctx.progress(
        `netcuts: ${cuts} cuts of ${OUTAGE_MS} ms, one every ${INTERVAL_MS / 1000} s, while \`${PROMPT}\` turns run`,
      );
      const start = Date.now();
      for (let i = 0; i < cuts; i++) {
        await sleep(Math.max(0, start + (i + 1) * INTERVAL_MS - Date.now()));
        if (busy) midTurn++;
        proxy.cut();
        // The server sees the runner go at once (the proxy resets its side), so "back" below is a new socket.
        await timeUntil(() => !rig.host.whereis(rig.runnerId), 5, 10_000);
        await sleep(OUTAGE_MS);
        proxy.restore();
        const [back, net] = await Promise.all([
          ctx.measured(() => timeUntil(() => rig.host.whereis(rig.runnerId) !== undefined, 5, 60_000)),
          timeUntil(
            () =>
              fetch(`${proxy.url}/health`).then(
                (r) => r.ok,
                () => false,
              ),
            5,
            60_000,
          ),
        ]);
        reconnectMs.push(back);
        networkMs.push(net);
        if ((i + 1) % 10 === 0) ctx.progress(`netcuts: ${i + 1}/${cuts} cuts, last back in ${Math.round(back)} ms`);
      }
      stopping = true;
      const driven = await turns;
      await busyWatch;
      if (driverError) throw driverError;
      const accepted = [{ conversationId: first.conversationId, turnId: first.turnId }, ...driven.turns];
      for (const t of accepted) conversations.add(t.conversationId);

      // Every turn the server accepted ended completed, with its whole answer exactly once and one `done`.
      const expected = slowAnswer(CHUNKS).join('');
      const problems: string[] = driven.lost.map((l) => `conversation ${l}`);
      let listed = 0;
      for (const conversationId of conversations) {
        const final = (await json<{ data: Turn[] }>(rig, 'GET', `/api/conversations/${conversationId}/turns`)).data;
        listed += final.length;
        const events = await allEvents(rig, conversationId);
        const byId = new Map(final.map((t) => [t.id, t]));
        for (const { turnId: id } of accepted.filter((t) => t.conversationId === conversationId)) {
          const t = byId.get(id);
          if (!t) problems.push(`${id}: not listed`);
          else if (t.status !== 'completed') problems.push(`${id}: ${t.status} (${t.reason ?? 'no reason'})`);
          const done = events.filter((e) => e.turn_id === id && e.stage === 'turn' && e.state === 'done').length;
          if (done !== 1) problems.push(`${id}: ${done} turn-done events`);
          const answer = answerOf(events, id);
          if (answer !== expected)
            problems.push(`${id}: answer of ${answer.length} chars, expected ${expected.length}`);
        }
      }
      if (listed !== accepted.length) problems.push(`${listed} turns listed, ${accepted.length} accepted`);
      const exactlyOnce = problems.length === 0;

      const back = roundSummary(summarize(reconnectMs));
      const net = roundSummary(summarize(networkMs));
      const p90 = round(percentile(reconnectMs, 90));
      const within = reconnectMs.filter((ms) => ms <= TARGET_MS).length;
      const met = exactlyOnce && within === reconnectMs.length;
      return {
        setup: {
          server: SETUP_SERVER,
          runner: `${SETUP_RUNNER}, through a loopback TCP proxy (bench/lib/cut-proxy.ts)`,
          cut: `every ${INTERVAL_MS} ms: reset every proxied connection, refuse new ones for ${OUTAGE_MS} ms, then pass again`,
          turns: `\`${PROMPT}\` on the demo agent, one after another; a prompt refused while the runner is away is resent`,
        },
        figures: {
          cuts,
          cutsMidTurn: midTurn,
          reconnectMs: { ...back, p90 },
          withinTargetOfRestore: within,
          redials: {
            n: redials.length,
            maxAttempt: Math.max(0, ...redials.map((r) => r.attempt)),
            byAttempt: Object.fromEntries(
              [...new Set(redials.map((r) => r.attempt))]
                .sort((x, y) => x - y)
                .map((a) => [String(a), redials.filter((r) => r.attempt === a).length]),
            ),
            countedReasons: Object.fromEntries(
              [...new Set(redials.filter((r) => r.attempt > 1).map((r) => r.reason))].map((why) => [
                why,
                redials.filter((r) => r.attempt > 1 && r.reason === why).length,
              ]),
            ),
          },
          turnsAccepted: accepted.length,
          turnMs: { ...roundSummary(summarize(driven.turnMs)) },
          promptsResent: driven.refused,
          conversations: conversations.size,
          turnsCompletedOnce: exactlyOnce,
          problems: problems.length ? Object.fromEntries(problems.slice(0, 20).map((p, i) => [String(i), p])) : null,
        },
        baseline: {
          description:
            'the network itself: from the same restore, until a fresh HTTP request through the proxy is answered (polled every 5 ms)',
          figures: { networkBackMs: { ...net } },
        },
        ratio: {
          value: ratio(back.p50, net.p50),
          meaning:
            'p50 runner back after restore / p50 network back after restore (the daemon’s backoff wait is the gap)',
        },
        target: {
          description: `every turn completed exactly once, and the runner back within ${TARGET_MS / 1000} s of each restore`,
          met,
        },
        notes: problems.length ? [`turn problems: ${problems.slice(0, 5).join('; ')}`] : [],
        summary: `netcuts   ${cuts} cuts: runner back after restore p50 ${back.p50} / p90 ${p90} / max ${back.max} ms (network ${net.p50} ms); ${within}/${cuts} within ${TARGET_MS / 1000} s; ${accepted.length} turns, ${exactlyOnce ? 'each completed once' : `${problems.length} problems`} (${midTurn} cuts mid-turn) → ${verdict(met)}`,
      };
    } finally {
      await rig.stop();
      await proxy.close();
    }
  },
};
