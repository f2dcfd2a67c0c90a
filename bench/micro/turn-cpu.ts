/**
 * A/B probe (issue 21): warm demo turns through a real server and runner; prints the bench process's CPU
 * per turn, the statements per turn (drizzle's logger), p50 and the POST's p50. PG=1 for PostgreSQL; N turns.
 */
import pino from 'pino';
import { startRunnerRig } from '../lib/rig.ts';
import { openConversation, turn } from '../benchmarks/turn.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../../src/server/store/testing.ts';
const N = Number(process.env.N ?? 30);
const onPg = process.env.PG === '1';
let count = 0;
const schema = onPg ? uniqueSchemaName() : undefined;
const rig = await startRunnerRig({
  logger: pino({ enabled: false }),
  queryLogger: {
    logQuery: () => {
      count++;
    },
  },
  ...(onPg ? { env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL }, databaseSchema: schema! } : {}),
});
const { conv } = await openConversation(rig, 'hello');
for (let i = 0; i < 5; i++) await turn(conv, 'hello there');
const walls: number[] = [];
const accepts: number[] = [];
count = 0;
const c0 = process.cpuUsage();
for (let i = 0; i < N; i++) {
  const r = await turn(conv, 'hello there');
  walls.push(r.ms);
  accepts.push(r.acceptMs);
}
const c = process.cpuUsage(c0);
await new Promise((r) => setTimeout(r, 200));
const stmts = count / N;
walls.sort((a, b) => a - b);
accepts.sort((a, b) => a - b);
const { loadavg } = await import('node:os');
console.log(
  JSON.stringify({
    tree: process.env.TREE,
    db: onPg ? 'pg' : 'pglite',
    cpuMsPerTurn: +((c.user + c.system) / 1000 / N).toFixed(2),
    stmtsPerTurn: stmts,
    p50: +walls[N >> 1]!.toFixed(1),
    acceptP50: +accepts[N >> 1]!.toFixed(1),
    load: loadavg()[0],
  }),
);
conv.stream.close();
await rig.stop();
if (schema) await dropSchema(schema);
