/**
 * listing: 10,000 conversations in one account (embedded PGlite, as `fountain up` has it); the first page,
 * a page 9,000 rows deep, a search and an unread+status filter, through `GET /api/conversations` and the
 * Conversations page, against the same keyset query run directly on the database in the same process.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, desc, eq, sql } from 'drizzle-orm';
import type { Benchmark, BenchContext } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { verdict } from '../lib/result.ts';
import { ratio, round, roundSummary, summarize } from '../lib/stats.ts';
import { findOwner } from '../../src/server/account/store.ts';
import { insertAgent } from '../../src/server/agents/store.ts';
import { listConversationRowsPage, type ListingFilter } from '../../src/server/conversations/listing.ts';
import { startServer } from '../../src/server/start.ts';
import { conversations, sandboxes } from '../../src/server/store/conversation-schema.ts';
import type { EngineDb } from '../../src/server/store/engine-db.ts';

const PAGE = 25;
const DEPTH = 9000;
/** One conversation in this many carries the searched word in its title. */
const RARE = 100;
const WORD = 'zanzibar';
/** The deep page may cost at most this many times the first: a keyset page does not grow with depth. */
const TARGET_DEPTH_RATIO = 2;

interface Case {
  readonly name: string;
  /** The API query string; the same filter runs directly. */
  readonly query: string;
  readonly filter: Omit<ListingFilter, 'limit'>;
}

/** `count` conversations over four agents, a month of activity, most idle, half opened since, each on a runner sandbox. */
async function seed(db: EngineDb, accountId: string, count: number): Promise<void> {
  const agentIds: string[] = [];
  for (let i = 0; i < 4; i++) {
    const a = await insertAgent(db, accountId, {
      name: `bench-${i}`,
      description: '',
      system: '',
      runtime: 'demo',
      model: 'fountain/demo',
      sandboxProvider: 'runner',
      permissionPolicy: {},
      metadata: {},
    });
    if (!a.ok) throw new Error('could not create an agent');
    agentIds.push(a.agent.id);
  }
  const runnerHex = randomUUID().replaceAll('-', '');
  const now = Date.now();
  const BATCH = 500;
  for (let from = 0; from < count; from += BATCH) {
    const n = Math.min(BATCH, count - from);
    const sb = await db
      .insert(sandboxes)
      .values(
        Array.from({ length: n }, () => ({
          accountId,
          provider: 'runner',
          name: `runner-${runnerHex}-${randomBytes(4).toString('hex')}`,
          status: 'suspended' as const,
        })),
      )
      .returning({ id: sandboxes.id });
    await db.insert(conversations).values(
      sb.map((s, j) => {
        const i = from + j;
        const active = new Date(now - Math.floor(Math.random() * 30 * 86_400_000));
        return {
          accountId,
          agentId: agentIds[i % agentIds.length]!,
          sandboxId: s.id,
          title: i % RARE === 0 ? `look into ${WORD} ${i}` : `task ${i}: tidy the build`,
          firstPrompt: `please do task ${i}`,
          status: i % 10 === 0 ? ('terminated' as const) : i % 10 === 1 ? ('failed' as const) : ('idle' as const),
          runtime: 'demo' as const,
          turnCount: 1 + (i % 5),
          lastActiveAt: active,
          lastReadAt: i % 2 === 0 ? new Date(active.getTime() + 1000) : null,
        };
      }),
    );
  }
}

/** The cursor of the row `depth` rows down, as the API would have handed it over after that many rows. */
async function cursorAt(db: EngineDb, accountId: string, depth: number): Promise<string> {
  const [row] = await db
    .select({ at: sql<string>`${conversations.lastActiveAt}::text`, id: conversations.id })
    .from(conversations)
    .where(and(eq(conversations.accountId, accountId)))
    .orderBy(desc(conversations.lastActiveAt), desc(conversations.id))
    .offset(depth - 1)
    .limit(1);
  if (!row) throw new Error(`fewer than ${depth} conversations`);
  return `${row.at}_${row.id}`;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint();
  await fn();
  return msSince(t);
}

export const listingBenchmark: Benchmark = {
  name: 'listing',
  title: `10,000 conversations: first page, a page ${DEPTH} rows deep, a search and an unread filter through GET /api/conversations and the Conversations page, vs the same keyset query run directly`,
  async run(ctx: BenchContext) {
    const count = 10_000;
    const rounds = ctx.quick ? 8 : 30;
    const tmp = mkdtempSync(join(tmpdir(), 'fountain-bench-listing-'));
    const server = await startServer({
      dataDir: join(tmp, 'server'),
      port: 0,
      env: { FOUNTAIN_HOME: join(tmp, 'home') },
    });
    try {
      const db = server.database.db as unknown as EngineDb;
      const owner = await findOwner(server.database.db);
      if (!owner) throw new Error('no owner account');
      const key = server.bootstrapKey!;
      ctx.progress(`listing: storing ${count} conversations`);
      const seedStart = process.hrtime.bigint();
      await seed(db, owner.id, count);
      const seedMs = round(msSince(seedStart));
      const deep = await cursorAt(db, owner.id, DEPTH);
      const signin = await fetch(`${server.url}/signin`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: server.url },
        body: new URLSearchParams({ api_key: key }),
      });
      const cookie = (signin.headers.get('set-cookie') ?? '').split(';')[0]!;

      const cases: Case[] = [
        { name: 'first', query: '', filter: {} },
        { name: 'deep', query: `&after=${encodeURIComponent(deep)}`, filter: { after: deep } },
        { name: 'search', query: `&q=${WORD}`, filter: { search: WORD } },
        { name: 'unreadIdle', query: '&unread=true&status=idle', filter: { unread: true, statuses: ['idle'] } },
      ];
      const webPath: Record<string, string> = {
        first: '/conversations',
        deep: `/conversations?after=${encodeURIComponent(deep)}`,
        search: `/conversations?q=${WORD}`,
        unreadIdle: '/conversations?unread=1&status=idle',
      };
      const api = (c: Case) => async () => {
        const res = await fetch(`${server.url}/api/conversations?limit=${PAGE}${c.query}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        if (res.status !== 200) throw new Error(`GET /api/conversations${c.query}: ${res.status}`);
        const body = (await res.json()) as { data: unknown[] };
        if (body.data.length === 0) throw new Error(`${c.name}: an empty page`);
      };
      const web = (c: Case) => async () => {
        const res = await fetch(server.url + webPath[c.name]!, { headers: { cookie } });
        if (res.status !== 200) throw new Error(`${webPath[c.name]}: ${res.status}`);
        await res.text();
      };
      const direct = (c: Case) => () => listConversationRowsPage(db, owner.id, { ...c.filter, limit: PAGE });

      // Warm every path once (query plans, JIT), then interleave the three so load swings hit each alike.
      for (const c of cases) {
        await api(c)();
        await web(c)();
        await direct(c)();
      }
      const samples: Record<string, { api: number[]; web: number[]; direct: number[] }> = {};
      ctx.progress(`listing: ${rounds} rounds of ${cases.length} pages × (API, web page, direct query)`);
      await ctx.measured(async () => {
        for (let r = 0; r < rounds; r++) {
          for (const c of cases) {
            const s = (samples[c.name] ??= { api: [], web: [], direct: [] });
            s.api.push(await timed(api(c)));
            s.web.push(await timed(web(c)));
            s.direct.push(await timed(direct(c)));
          }
        }
      });
      const sum = (xs: number[]) => roundSummary(summarize(xs));
      const figures: Record<string, Record<string, unknown>> = {};
      const base: Record<string, Record<string, unknown>> = {};
      for (const c of cases) {
        const s = samples[c.name]!;
        figures[`${c.name}ApiMs`] = { ...sum(s.api) };
        figures[`${c.name}WebMs`] = { ...sum(s.web) };
        base[`${c.name}DirectMs`] = { ...sum(s.direct) };
      }
      const p50 = (name: string, kind: 'api' | 'web' | 'direct') => sum(samples[name]![kind]).p50;
      const depthRatio = ratio(p50('deep', 'api'), p50('first', 'api'));
      const r = ratio(p50('first', 'api'), p50('first', 'direct'));
      const met = depthRatio <= TARGET_DEPTH_RATIO;
      return {
        setup: {
          server:
            'startServer (Hono on node http, embedded PGlite in a temporary data dir) in the bench process on 127.0.0.1',
          data: `${count} conversations of one account, stored directly: 4 agents, last activity spread over 30 days, 80% idle / 10% ended / 10% failed, half opened since their last activity, each on a (parked) runner sandbox; 1 in ${RARE} titled with "${WORD}"`,
          pages: `${PAGE} rows; deep = the cursor of row ${DEPTH}; search = q=${WORD} (title or first message, case-insensitive); unreadIdle = unread=true&status=idle`,
        },
        figures: { conversations: count, rounds, pageSize: PAGE, seedMs, ...figures, deepOverFirstApi: depthRatio },
        baseline: {
          description:
            'listConversationRowsPage (the keyset query the API runs, rows and their sandboxes) called directly on the same database in the same process: no HTTP, no auth, no conversation views',
          figures: base,
        },
        ratio: { value: r, meaning: 'API first page p50 / the same query run directly p50' },
        target: {
          description: `paging stays fast: a page ${DEPTH} rows deep within ${TARGET_DEPTH_RATIO}x of the first page through the API (p50)`,
          met,
        },
        notes: [],
        summary:
          `listing    10k conversations, API p50: first ${p50('first', 'api')} ms, deep ${p50('deep', 'api')} ms, search ${p50('search', 'api')} ms, unread ${p50('unreadIdle', 'api')} ms; ` +
          `web page first ${p50('first', 'web')} ms; direct query first ${p50('first', 'direct')} ms / deep ${p50('deep', 'direct')} ms / search ${p50('search', 'direct')} ms → API ${r}x direct; deep/first ${depthRatio}x (target ≤${TARGET_DEPTH_RATIO}x: ${verdict(met)})`,
      };
    } finally {
      await server.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};
