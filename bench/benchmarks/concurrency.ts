/**
 * concurrency: many conversations streaming a paced demo answer at once, an SSE client on each; the
 * latency of every chunk from the agent's write to the client (a wall-clock stamp carried in the chunk
 * text) and the chunks per second sustained, against the same agents' stdout read directly.
 */
import type { Benchmark } from '../lib/bench.ts';
import { isAnswerChunk } from '../lib/api.ts';
import type { StreamEvent } from '../lib/api.ts';
import { cpuMeter, descendantPids, groupCpuMeter } from '../lib/cpu.ts';
import { DirectAgent } from '../lib/direct-acp.ts';
import { verdict } from '../lib/result.ts';
import { SETUP_RUNNER, SETUP_SERVER } from '../lib/rig.ts';
import { ratio, round, roundSummary, summarize } from '../lib/stats.ts';
import type { Summary } from '../lib/stats.ts';
import { slowLineStamp, wallClockMs } from '../../src/acp/demo/agent.ts';
import { demoAgent, openConversation, turn } from './turn.ts';
import type { Conversation } from './turn.ts';

/** The bound over the direct p99 chunk latency at 2 cores: many conversations cost at most this much more. */
const OVER_DIRECT_MS = 50;

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function pool<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Chunk latencies and the stretch they cover: first stamp to last receipt. */
export class Tally {
  readonly latencies: number[] = [];
  firstStamp = Number.POSITIVE_INFINITY;
  lastReceipt = Number.NEGATIVE_INFINITY;
  unstamped = 0;

  add(text: string, receivedAt: number): void {
    const at = slowLineStamp(text);
    if (at === null) {
      this.unstamped++;
      return;
    }
    this.latencies.push(receivedAt - at);
    this.firstStamp = Math.min(this.firstStamp, at);
    this.lastReceipt = Math.max(this.lastReceipt, receivedAt);
  }

  summary(): { latencyMs: Summary; chunks: number; seconds: number; chunksPerSecond: number } {
    const seconds = (this.lastReceipt - this.firstStamp) / 1000;
    return {
      latencyMs: roundSummary(summarize(this.latencies)),
      chunks: this.latencies.length,
      seconds: round(seconds),
      chunksPerSecond: round(this.latencies.length / seconds),
    };
  }
}

/** The chunk text inside an output event's ACP line (a JSON-RPC session/update notification). */
export function chunkText(e: StreamEvent): string {
  const m = JSON.parse(e.data) as { params?: { update?: { content?: { text?: unknown } } } };
  const t = m.params?.update?.content?.text;
  return typeof t === 'string' ? t : '';
}

export const concurrencyBenchmark: Benchmark = {
  name: 'concurrency',
  title:
    'many conversations streaming at once: chunk latency agent write → SSE client, and chunks/s sustained, vs the same agents read directly',
  async run(ctx) {
    const conversations = ctx.quick ? 20 : 200;
    const chunksEach = ctx.quick ? 40 : 100;
    const everyMs = 100;
    const prompt = `slow: ${chunksEach} ${everyMs}ms stamped`;
    const offered = round((conversations * 1000) / everyMs);

    ctx.progress(`concurrency: direct stdio, ${conversations} demo agents × ${chunksEach} chunks every ${everyMs} ms`);
    const direct = new Tally();
    let directAgentsCpuMs = 0;
    const agents = await pool(Array.from({ length: conversations }), 10, () => DirectAgent.start());
    try {
      for (const { agent } of agents) agent.onChunk = (text) => direct.add(text, wallClockMs());
      const agentsCpu = groupCpuMeter(agents.map(({ agent }) => agent.pid));
      await Promise.all(agents.map(({ agent, sessionId }) => agent.prompt(sessionId, prompt)));
      directAgentsCpuMs = agentsCpu();
    } finally {
      await Promise.all(agents.map(({ agent }) => agent.stop()));
    }

    const rig = await ctx.rig();
    ctx.progress(`concurrency: through Fountain, opening ${conversations} conversations`);
    await demoAgent(rig); // once, before the conversations that share it race to create it
    const convs: Conversation[] = await pool(
      Array.from({ length: conversations }),
      10,
      async () => (await openConversation(rig, 'warm up')).conv,
    );
    const fountain = new Tally();
    try {
      for (const c of convs) {
        c.stream.onEvent = (e) => {
          if (isAnswerChunk(e)) fountain.add(chunkText(e), wallClockMs());
        };
      }
      ctx.progress(
        `concurrency: ${conversations} conversations × ${chunksEach} chunks every ${everyMs} ms, an SSE client on each`,
      );
      const cpu = cpuMeter({
        server: process.pid,
        serverMainThread: { pid: process.pid, thread: process.pid },
        runner: rig.runnerPid,
      });
      // The agents (and the shells the process backend starts them through) are alive since their first turn.
      const agentsCpu = groupCpuMeter(descendantPids(rig.runnerPid));
      const ends = await ctx.measured(() => Promise.all(convs.map((c) => turn(c, prompt))));
      const spent = cpu();
      const agentsCpuMs = agentsCpu();
      const failed = ends.filter((r) => r.state !== 'done').length;
      if (failed > 0) throw new Error(`${failed} of ${conversations} turns did not end done`);
      const f = fountain.summary();
      const perChunk = (ms: number) => round((ms * 1000) / Math.max(1, f.chunks));
      const d = direct.summary();
      const expected = conversations * chunksEach;
      const met = f.latencyMs.p99 <= d.latencyMs.p99 + OVER_DIRECT_MS && f.chunks === expected;
      const accept = roundSummary(summarize(ends.map((r) => r.acceptMs)));
      return {
        setup: {
          server: SETUP_SERVER,
          runner: SETUP_RUNNER,
          agent: `runtime demo, \`${prompt}\`: each chunk carries the wall-clock time the agent wrote it`,
          clients: `one SSE client per conversation (/api/conversations/{id}/stream) in the bench process, which also runs the server`,
        },
        figures: {
          conversations,
          chunksEach,
          offeredChunksPerSecond: offered,
          delivered: f.chunks,
          expected,
          latencyMs: { ...f.latencyMs },
          p50Ms: f.latencyMs.p50,
          p99Ms: f.latencyMs.p99,
          chunksPerSecond: f.chunksPerSecond,
          seconds: f.seconds,
          promptAcceptMs: { ...accept },
          serverCpuMs: round(spent.server!),
          runnerCpuMs: round(spent.runner!),
          serverCpuUsPerChunk: perChunk(spent.server!),
          serverMainThreadCpuUsPerChunk: perChunk(spent.serverMainThread!),
          runnerCpuUsPerChunk: perChunk(spent.runner!),
          agentsCpuMs: round(agentsCpuMs),
          agentsCpuUsPerChunk: perChunk(agentsCpuMs),
          agentsCoresBusy: round(agentsCpuMs / 1000 / f.seconds),
        },
        baseline: {
          description: `the same ${conversations} demo agents spawned by the bench process and driven over their own stdio at once, each chunk's stamp compared with the time it was read`,
          figures: {
            delivered: d.chunks,
            latencyMs: { ...d.latencyMs },
            p50Ms: d.latencyMs.p50,
            p99Ms: d.latencyMs.p99,
            chunksPerSecond: d.chunksPerSecond,
            seconds: d.seconds,
            agentsCpuMs: round(directAgentsCpuMs),
            agentsCpuUsPerChunk: round((directAgentsCpuMs * 1000) / Math.max(1, d.chunks)),
            agentsCoresBusy: round(directAgentsCpuMs / 1000 / d.seconds),
          },
        },
        ratio: {
          value: ratio(f.latencyMs.p99, d.latencyMs.p99),
          meaning: 'fountain p99 chunk latency / direct stdio p99 chunk latency (lower is better)',
        },
        target: {
          description: `p99 chunk latency agent write → SSE client ≤ the direct p99 + ${OVER_DIRECT_MS} ms at 2 cores, every chunk delivered`,
          met,
        },
        notes: [
          'Latency: the agent stamps each chunk with performance.timeOrigin + performance.now() as it writes it; the client subtracts it from the same clock when the SSE event is parsed. Same machine, same clock.',
          'chunksPerSecond: chunks received / (first stamp → last receipt) over all conversations; offeredChunksPerSecond is what the agents write when nothing falls behind.',
          'The SSE clients share the bench process (and its event loop) with the server, as in the other benchmarks: their parsing is in the figures.',
          "agentsCpuMs: CPU of the agent processes themselves over the stretch (direct: the spawned agents; through Fountain: every process below the runner), and agentsCoresBusy that over the stretch's seconds: on 2 cores, what the agents leave for everything else.",
          'serverCpuMs covers the bench process (server and clients, every thread); serverMainThreadCpuUsPerChunk only its event-loop thread (not the database worker, not V8 helpers); runnerCpuMs the runner child, not the agents.',
        ],
        summary: `concurrency ${conversations} conversations: p99 ${f.latencyMs.p99} ms / p50 ${f.latencyMs.p50} ms agent→SSE vs direct ${d.latencyMs.p99} / ${d.latencyMs.p50} ms (target p99 ≤ direct + ${OVER_DIRECT_MS} ms: ${verdict(met)}); ${f.chunksPerSecond} chunks/s sustained of ${offered} offered (direct ${d.chunksPerSecond}); ${f.chunks}/${expected} delivered; server ${perChunk(spent.server!)} µs CPU/chunk (event-loop thread ${perChunk(spent.serverMainThread!)}); the agents themselves ${perChunk(agentsCpuMs)} µs/chunk (direct ${round((directAgentsCpuMs * 1000) / Math.max(1, d.chunks))})`,
      };
    } finally {
      for (const c of convs) c.stream.close();
      await pool(convs, 10, (c) => c.api.call('DELETE', `/api/conversations/${c.id}`).catch(() => undefined));
    }
  },
};
