/**
 * gateway: model calls through the server's model gateway against the same calls straight to the
 * model API (a separate process): added p50 per request, time to the first streamed byte, the rate of a long stream, and 200 concurrent streams.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Agent, request } from 'undici';
import type { Benchmark } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { verdict } from '../lib/result.ts';
import { mbPerSecond, round, roundSummary, summarize } from '../lib/stats.ts';
import { insertConversation } from '../../src/server/conversations/store.ts';
import { startServer } from '../../src/server/start.ts';
import type { EngineDb } from '../../src/server/store/engine-db.ts';

const UPSTREAM = join(import.meta.dirname, '..', 'lib', 'model-upstream.mjs');
/** Bytes of one streamed delta event of the upstream (model-upstream.mjs). */
const EVENT_BYTES = 279;

async function startUpstream(key: string): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [UPSTREAM, key], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (l) => {
      const m = /^listening (\S+)$/.exec(l);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`the model upstream exited with ${code}`)));
  });
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export const gatewayBenchmark: Benchmark = {
  name: 'gateway',
  title: 'The model gateway against calling the model API directly',
  async run(ctx) {
    const tmp = mkdtempSync(join(tmpdir(), 'fountain-bench-gateway-'));
    const realKey = `sk-ant-api03-${randomBytes(20).toString('hex')}`;
    const upstream = await startUpstream(realKey);
    const server = await startServer({ dataDir: join(tmp, 'data'), port: 0, env: {} });
    const dispatcher = new Agent({ connections: 512, keepAliveTimeout: 30_000 });
    try {
      const key = server.bootstrapKey!;
      const api = async (method: string, path: string, body?: unknown) => {
        const r = await request(`${server.url}${path}`, {
          method: method as 'GET',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return (await r.body.json()) as { data: { id: string } };
      };
      await api('PUT', '/api/account/inference-credentials/anthropic_api_key', {
        value: realKey,
        base_url: upstream.url,
        validate: false,
      });
      const agent = await api('POST', '/api/agents', {
        name: 'bench-gateway',
        runtime: 'claude',
        model: 'anthropic/claude-sonnet-4-5',
      });
      // The same agent with a budget: each call is admitted under the account's lock and written in flight.
      const budgeted = await api('POST', '/api/agents', {
        name: 'bench-gateway-budget',
        runtime: 'claude',
        model: 'anthropic/claude-sonnet-4-5',
        model_limits: { tokens_per_day: 1e12 },
      });
      const accountId = (await api('GET', '/api/account')).data.id;
      const tokenOf = async (agentId: string) => {
        const conv = await insertConversation(
          server.database.db as unknown as EngineDb,
          { accountId, agentId, runtime: 'claude', status: 'idle' },
          { provider: 'runner', name: `runner-${randomBytes(16).toString('hex')}-${randomBytes(4).toString('hex')}` },
        );
        return server.engine.sandboxTokens.rotate(accountId, conv.conversation.id);
      };
      const gatewayUrl = `${server.url}/api/gateway/anthropic/v1/messages`;
      const targets = {
        direct: { url: `${upstream.url}/v1/messages`, key: realKey },
        gateway: { url: gatewayUrl, key: await tokenOf(agent.data.id) },
        budgeted: { url: gatewayUrl, key: await tokenOf(budgeted.data.id) },
      } as const;
      type Way = keyof typeof targets;
      const body = (stream: boolean) =>
        JSON.stringify({
          model: 'claude-sonnet-4-5',
          max_tokens: 100,
          stream,
          messages: [{ role: 'user', content: 'hello' }],
        });
      const small = body(false);
      const streamed = body(true);
      /** One call: ms to the status line, to the first body byte, to the end, and the bytes read. */
      const once = async (way: Way, events: number | null) => {
        const t0 = process.hrtime.bigint();
        const r = await request(targets[way].url, {
          method: 'POST',
          dispatcher,
          headers: {
            'x-api-key': targets[way].key,
            'content-type': 'application/json',
            ...(events === null ? {} : { 'x-bench-events': String(events) }),
          },
          body: events === null ? small : streamed,
        });
        if (r.statusCode !== 200) throw new Error(`${way}: HTTP ${r.statusCode}: ${await r.body.text()}`);
        let first = -1;
        let bytes = 0;
        for await (const c of r.body) {
          if (first < 0) first = msSince(t0);
          bytes += (c as Buffer).length;
        }
        return { firstMs: first, totalMs: msSince(t0), bytes };
      };

      const rounds = ctx.quick ? 200 : 1000;
      // Warm both paths (connections, JIT, the gateway's caches).
      for (let i = 0; i < 50; i++) for (const w of ['direct', 'gateway', 'budgeted'] as const) await once(w, null);
      const request_: Record<Way, number[]> = { direct: [], gateway: [], budgeted: [] };
      const ttfb: Record<Way, number[]> = { direct: [], gateway: [], budgeted: [] };
      await ctx.measured(async () => {
        for (let i = 0; i < rounds; i++)
          for (const w of (i % 2 ? ['direct', 'gateway', 'budgeted'] : ['budgeted', 'gateway', 'direct']) as Way[])
            request_[w].push((await once(w, null)).totalMs);
        for (let i = 0; i < rounds / 2; i++)
          for (const w of (i % 2 ? ['direct', 'gateway'] : ['gateway', 'direct']) as Way[])
            ttfb[w].push((await once(w, 5)).firstMs);
      });
      ctx.progress(`gateway: ${rounds} requests and ${rounds / 2} stream starts each way`);

      const longEvents = Math.round(((ctx.quick ? 16 : 64) * 1e6) / EVENT_BYTES);
      const rate: Record<Way, number> = { direct: 0, gateway: 0, budgeted: 0 };
      await ctx.measured(async () => {
        for (const w of ['direct', 'gateway', 'direct', 'gateway'] as Way[]) {
          const r = await once(w, longEvents);
          rate[w] = Math.max(rate[w], mbPerSecond(r.bytes, r.totalMs));
        }
      });
      ctx.progress(`gateway: long stream ${rate.gateway} MB/s through, ${rate.direct} MB/s direct`);

      const concurrent = 200;
      let errors = 0;
      const errorSamples: string[] = [];
      const t0 = process.hrtime.bigint();
      const firsts: number[] = [];
      await ctx.measured(async () => {
        await Promise.all(
          Array.from({ length: concurrent }, () =>
            once('gateway', 200).then(
              (r) => void firsts.push(r.firstMs),
              (e: unknown) => {
                errors++;
                if (errorSamples.length < 3) errorSamples.push(String(e));
              },
            ),
          ),
        );
      });
      const concurrentMs = msSince(t0);

      const s = (w: Way) => ({ ...roundSummary(summarize(request_[w])) });
      const t = (w: Way) => ({ ...roundSummary(summarize(ttfb[w])) });
      const addedP50 = round(s('gateway').p50 - s('direct').p50);
      const addedP99 = round(s('gateway').p99 - s('direct').p99);
      const addedBudgetedP50 = round(s('budgeted').p50 - s('direct').p50);
      const addedTtfb = round(t('gateway').p50 - t('direct').p50);
      const rateShare = round(rate.gateway / rate.direct);
      const met = addedP50 <= 2 && addedTtfb <= 1 && rateShare >= 0.5 && errors === 0;
      return {
        setup: {
          server:
            'startServer (embedded PGlite, temporary data dir) in the bench process on 127.0.0.1; the gateway authenticates a real sandbox token, reads limits and writes an audit row per call',
          upstream: 'bench/lib/model-upstream.mjs: an Anthropic Messages API in its own node process on 127.0.0.1',
          client: 'undici request() with a keep-alive pool, in the bench process (shared with the server)',
        },
        figures: {
          rounds,
          requestMs: s('gateway'),
          firstByteMs: t('gateway'),
          addedP50Ms: addedP50,
          addedP99Ms: addedP99,
          budgetedRequestMs: s('budgeted'),
          addedBudgetedP50Ms: addedBudgetedP50,
          addedFirstByteP50Ms: addedTtfb,
          longStreamMB: round((longEvents * EVENT_BYTES) / 1e6),
          longStreamMBps: rate.gateway,
          longStreamShare: rateShare,
          concurrentStreams: concurrent,
          concurrentErrors: errors,
          concurrentMs: round(concurrentMs),
          concurrentFirstByteMs: { ...roundSummary(summarize(firsts)) },
        },
        baseline: {
          description: 'the same calls straight to the model API process, with the real key, from the same client',
          figures: { requestMs: s('direct'), firstByteMs: t('direct'), longStreamMBps: rate.direct },
        },
        ratio: { value: rateShare, meaning: 'long-stream rate through the gateway / straight to the model API' },
        target: {
          description:
            'the gateway adds ≤ 2 ms p50 per request and ≤ 1 ms to the first streamed byte, streams at ≥ 50% of the direct rate, and 200 concurrent streams finish without an error',
          met,
        },
        notes: errorSamples,
        summary:
          `gateway    request p50 ${s('gateway').p50} ms vs ${s('direct').p50} ms direct (+${addedP50} ms; p99 +${addedP99} ms; with a budget +${addedBudgetedP50} ms p50), first byte p50 ${t('gateway').p50} vs ${t('direct').p50} ms (+${addedTtfb} ms), ` +
          `long stream ${rate.gateway} vs ${rate.direct} MB/s (${rateShare}x), ${concurrent} concurrent streams: ${errors} errors in ${round(concurrentMs)} ms (target: ${verdict(met)})`,
      };
    } finally {
      await dispatcher.close();
      await server.stop();
      await upstream.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};
