// Microbenchmark (issue 21): a turn's end as the three statements it was vs endTurnRows (one), CPU and wall per end,
// interleaved rounds. Usage: npx tsx bench/micro/turn-end.ts pglite|postgres
import { and, eq, sql } from 'drizzle-orm';
import { createAccount } from '../../src/server/account/store.ts';
import { conversations, type TurnUsage } from '../../src/server/store/conversation-schema.ts';
import {
  endTurnRows,
  insertConversation,
  insertTurn,
  updateConversation,
  updateTurn,
} from '../../src/server/conversations/store.ts';
import type { EngineDb } from '../../src/server/store/engine-db.ts';
import { openTestDatabase, type TestDriver } from '../../src/server/store/testing.ts';
const driver = (process.argv[2] ?? 'pglite') as TestDriver;
const t = await openTestDatabase(driver);
const db = t.database.db as unknown as EngineDb;
const acct = await createAccount(t.database.db, { name: 'p', email: `p@example.test`, role: 'owner' });
const { conversation: c } = await insertConversation(
  db,
  {
    accountId: acct.id,
    agentId: null,
    title: null,
    firstPrompt: null,
    status: 'running',
    runtime: 'demo',
    permissionPolicy: {},
    source: 'api',
    turnCount: 0,
  },
  { provider: 'runner', name: 'x', status: 'ready' },
);
const usage: TurnUsage = {
  input: 2,
  output: 21,
  cache_read: 0,
  cache_write: 0,
  cost: { amount: 0.000086, currency: 'USD' },
};
async function old(turnId: string) {
  const endedAt = new Date();
  const sum = (key: 'input' | 'output' | 'cache_read' | 'cache_write', n: number | undefined) =>
    sql`coalesce((${conversations.usageTotal}->>${key})::bigint, 0) + ${n ?? 0}`;
  const cost = sql`jsonb_build_object('cost', jsonb_build_object('amount', ${usage.cost!.amount}::float8, 'currency', ${usage.cost!.currency}::text))`;
  await Promise.all([
    updateTurn(db, turnId, { status: 'completed', stopReason: 'end_turn', endedAt, pendingPermission: null, usage }),
    db
      .update(conversations)
      .set({ lastActiveAt: endedAt, acpNextId: 6, status: 'idle', updatedAt: new Date() })
      .where(and(eq(conversations.id, c.id), eq(conversations.status, 'running'))),
    db
      .update(conversations)
      .set({
        usageTotal: sql`${conversations.usageTotal} || jsonb_build_object('input', ${sum('input', usage.input)}, 'output', ${sum('output', usage.output)}, 'cache_read', ${sum('cache_read', usage.cache_read)}, 'cache_write', ${sum('cache_write', usage.cache_write)}) || ${cost}`,
      })
      .where(eq(conversations.id, c.id)),
  ]);
}
async function neu(turnId: string) {
  const endedAt = new Date();
  await endTurnRows(db, {
    turnId,
    patch: { status: 'completed', stopReason: 'end_turn', endedAt, pendingPermission: null, usage },
    conversationId: c.id,
    settle: { lastActiveAt: endedAt, acpNextId: 6 },
    usage,
  });
}
let n = 0;
async function round(f: (id: string) => Promise<void>, reps: number) {
  let cpu = 0;
  let wall = 0;
  for (let i = 0; i < reps; i++) {
    const turn = await insertTurn(db, { conversationId: c.id, turnNumber: ++n, prompt: 'hi', status: 'running' });
    await updateConversation(db, c.id, { status: 'running' });
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await f(turn.id);
    const c1 = process.cpuUsage(c0);
    wall += performance.now() - t0;
    cpu += c1.user + c1.system;
  }
  return [cpu / reps, (wall * 1000) / reps];
}
await round(old, 100);
await round(neu, 100);
const res = { old: [] as number[][], neu: [] as number[][] };
for (let r = 0; r < 8; r++) {
  res.old.push(await round(old, 100));
  res.neu.push(await round(neu, 100));
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!.toFixed(0);
const { loadavg } = await import('node:os');
console.log(
  driver,
  'three statements: cpu µs',
  med(res.old.map((x) => x[0]!)),
  'wall µs',
  med(res.old.map((x) => x[1]!)),
  '| one statement: cpu µs',
  med(res.neu.map((x) => x[0]!)),
  'wall µs',
  med(res.neu.map((x) => x[1]!)),
  '| load',
  loadavg()[0]!.toFixed(1),
);
await t.dispose();
