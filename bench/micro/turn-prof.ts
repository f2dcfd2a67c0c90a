/**
 * Issue 21: CPU profile of warm demo turns (only the measured loop), summarised by self time per
 * function and inclusive time per module. PG=1 for PostgreSQL; N turns; OUT=file for the raw profile.
 */
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import pino from 'pino';
import { startRunnerRig } from '../lib/rig.ts';
import { openConversation, turn } from '../benchmarks/turn.ts';
import { TEST_POSTGRES_URL, dropSchema, uniqueSchemaName } from '../../src/server/store/testing.ts';
const N = Number(process.env.N ?? 60);
const onPg = process.env.PG === '1';
const schema = onPg ? uniqueSchemaName() : undefined;
const rig = await startRunnerRig({
  logger: pino({ enabled: false }),
  ...(onPg ? { env: { FOUNTAIN_DATABASE_URL: TEST_POSTGRES_URL }, databaseSchema: schema! } : {}),
});
const { conv } = await openConversation(rig, 'hello');
for (let i = 0; i < 5; i++) await turn(conv, 'hello there');
const s = new Session();
s.connect();
await s.post('Profiler.enable');
await s.post('Profiler.setSamplingInterval', { interval: 200 });
await s.post('Profiler.start');
const c0 = process.cpuUsage();
for (let i = 0; i < N; i++) await turn(conv, 'hello there');
const c = process.cpuUsage(c0);
const { profile } = await s.post('Profiler.stop');
if (process.env.OUT) writeFileSync(process.env.OUT, JSON.stringify(profile));
console.log(`cpu per turn ${((c.user + c.system) / 1000 / N).toFixed(2)} ms`);
type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] };
const nodes = new Map<number, Node>(profile.nodes.map((n: Node) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of nodes.values()) for (const ch of n.children ?? []) parent.set(ch, n.id);
const counts = new Map<number, number>();
const deltas: number[] = profile.timeDeltas ?? [];
// each sample's weight is the time until the next one, in µs
(profile.samples ?? []).forEach((id: number, i: number) =>
  counts.set(id, (counts.get(id) ?? 0) + (deltas[i + 1] ?? 0)),
);
let idle = 0;
for (const [id, k] of counts) if (nodes.get(id)!.callFrame.functionName === '(idle)') idle += k;
let total = 0;
for (const k of counts.values()) total += k;
console.log(
  `main thread busy per turn ${((total - idle) / 1000 / N).toFixed(2)} ms of wall ${(total / 1000 / N).toFixed(2)} ms`,
);
const mod = (url: string): string => {
  if (!url) return '(native)';
  const m = url.match(/node_modules\/((@[^/]+\/)?[^/]+)/);
  if (m) return m[1]!;
  const s2 = url.match(/\/(src\/[^/]+\/[^/]+|bench\/[^/]+)/);
  if (s2) return s2[1]!;
  if (url.startsWith('node:')) return url;
  return url.slice(-40);
};
const selfFn = (id: number) => nodes.get(id)!;
const self = new Map<string, number>();
const incl = new Map<string, number>();
for (const [id, k] of counts) {
  const n = nodes.get(id)!;
  const key = `${n.callFrame.functionName || '(anon)'} ${mod(n.callFrame.url)}:${n.callFrame.lineNumber}`;
  self.set(key, (self.get(key) ?? 0) + k);
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const m = mod(nodes.get(cur)!.callFrame.url);
    if (m === '(native)') continue;
    if (!seen.has(m)) {
      seen.add(m);
      incl.set(m, (incl.get(m) ?? 0) + k);
    }
  }
}
const pct = (k: number) => (k / 1000 / N).toFixed(2).padStart(6);
console.log('--- self');
for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP ?? 40)))
  console.log(pct(v), k);
console.log('--- inclusive per module');
for (const [k, v] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(pct(v), k);
conv.stream.close();
await rig.stop();
if (schema) await dropSchema(schema);
