/**
 * checkpoint: the time and size of a checkpoint (the demo conversation's HOME, and a 20 MB workspace of
 * 1,000 files) taken and restored through the runner adapter, against `tar` of the same directory run
 * directly; and a lost sandbox's restore to the first answer against a cold start with no checkpoint.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import type { Benchmark } from '../lib/bench.ts';
import { msSince } from '../lib/bench.ts';
import { isAnswerChunk } from '../lib/api.ts';
import { verdict } from '../lib/result.ts';
import { SETUP_RUNNER, SETUP_SERVER, type RunnerRig } from '../lib/rig.ts';
import { ratio, round, roundSummary, summarize } from '../lib/stats.ts';
import type { Handle } from '../../src/sandbox/index.ts';
import { captureArchive, DEFAULT_SPEC, restoreArchive } from '../../src/server/checkpoints/sandbox-archive.ts';
import { until } from '../../src/server/conversations/testing.ts';
import { openConversation, turn } from './turn.ts';

const SPEC = { ...DEFAULT_SPEC, home: '/home/sprite' };
const FILES = 1000;
const FILE_BYTES = 20_000;

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = process.hrtime.bigint();
  const value = await fn();
  return { ms: msSince(t0), value };
}

const must = <T>(r: { ok: true; value: T } | { ok: false; error: unknown }, what: string): T => {
  if (!r.ok) throw new Error(`${what} failed: ${JSON.stringify(r.error)}`);
  return r.value;
};

/** `tar` run directly on the sandbox's directory, as the floor: the same archive without the adapter. */
function tarDirect(dir: string, out: string): { ms: number; bytes: number } {
  const t0 = process.hrtime.bigint();
  execFileSync('tar', ['-czf', out, '-C', dir, '.']);
  return { ms: msSince(t0), bytes: statSync(out).size };
}

function untarDirect(archive: string, into: string): number {
  mkdirSync(into, { recursive: true });
  const t0 = process.hrtime.bigint();
  execFileSync('tar', ['-xzf', archive, '-C', into]);
  return msSince(t0);
}

/** Captures `handle` `runs` times and restores the last into a fresh sandbox `runs` times; tar of `dir` alike. */
async function series(rig: RunnerRig, handle: Handle, dir: string, runs: number, scratch: string) {
  const take: number[] = [];
  const put: number[] = [];
  const tarMs: number[] = [];
  const untarMs: number[] = [];
  let bytes = 0;
  let tarBytes = 0;
  let archive: Buffer = Buffer.alloc(0);
  for (let i = 0; i < runs; i++) {
    const t = await timed(async () => must(await captureArchive(rig.adapter, handle, SPEC), 'capture'));
    take.push(t.ms);
    archive = t.value;
    bytes = archive.length;
    const d = tarDirect(dir, join(scratch, 'direct.tgz'));
    tarMs.push(d.ms);
    tarBytes = d.bytes;
  }
  for (let i = 0; i < runs; i++) {
    const fresh = await rig.sandbox();
    put.push((await timed(async () => must(await restoreArchive(rig.adapter, fresh, SPEC, archive), 'restore'))).ms);
    await rig.adapter.lifecycle.destroy(fresh);
    untarMs.push(untarDirect(join(scratch, 'direct.tgz'), join(scratch, `untar-${i}`)));
  }
  return {
    captureMs: roundSummary(summarize(take)),
    restoreMs: roundSummary(summarize(put)),
    bytes,
    tarMs: roundSummary(summarize(tarMs)),
    untarMs: roundSummary(summarize(untarMs)),
    tarBytes,
  };
}

export const checkpointBenchmark: Benchmark = {
  name: 'checkpoint',
  title:
    'checkpoint capture and restore (demo HOME, 20 MB workspace) vs tar directly; restore to first answer vs a cold start',
  async run(ctx) {
    const runs = ctx.quick ? 2 : 5;
    const rig = await ctx.rig();
    const scratch = mkdtempSync(join(tmpdir(), 'fountain-bench-checkpoint-'));
    try {
      // The demo conversation: a few turns, then its HOME as a checkpoint.
      ctx.progress('checkpoint: the demo conversation');
      const cold: number[] = [];
      const restored: number[] = [];
      let demo: Awaited<ReturnType<typeof series>> | null = null;
      for (let i = 0; i < runs; i++) {
        const { conv, coldMs } = await openConversation(rig, `remember: the code is ${i}`);
        cold.push(coldMs);
        let last = '';
        for (const p of ['remember: blue', 'remember: green']) last = (await turn(conv, p)).turnId;
        const view = (await conv.api.call('GET', `/api/conversations/${conv.id}`)).data as {
          sandbox: { name: string };
        };
        const handle = rig.adapter.buildHandle(view.sandbox.name);
        if (i === 0) demo = await series(rig, handle, join(rig.root, view.sandbox.name), runs, scratch);
        // The checkpoint after the last turn is in: wait for it to be stored, then lose the sandbox.
        await until(async () => {
          const rows = (await rig.server.database.db.execute(
            sql`SELECT 1 FROM checkpoints WHERE conversation_id = ${conv.id} AND turn_id = ${last}`,
          )) as unknown as { rows: unknown[] };
          return rows.rows.length > 0;
        }, 'the checkpoint of the last turn');
        must(await rig.adapter.lifecycle.destroy(handle), 'destroy');
        const t0 = process.hrtime.bigint();
        const sent = await conv.api.call('POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'recall' });
        const first = await conv.stream.next(
          (e) => isAnswerChunk(e) && e.turn_id === sent.turn_id && e.receivedAt > t0,
          180_000,
        );
        restored.push(Number(first.receivedAt - t0) / 1e6);
        if (!conv.stream.events.some((e) => e.kind === 'stage' && e.stage === 'sandbox' && e.data.includes('restored')))
          throw new Error('the conversation was not restored from its checkpoint');
        // 204, no body: not through Api.call, which reads JSON.
        await fetch(`${conv.api.baseUrl}/api/conversations/${conv.id}/terminate`, {
          method: 'POST',
          headers: { authorization: `Bearer ${conv.api.key}` },
        });
        conv.stream.close();
      }

      // A workspace of 1,000 files, 20 MB of incompressible bytes, plus a repository.
      ctx.progress(`checkpoint: a ${(FILES * FILE_BYTES) / 1e6} MB workspace, ${runs} runs`);
      const big = await rig.sandbox();
      const bigDir = join(rig.root, big.name);
      for (let d = 0; d < 10; d++) {
        mkdirSync(join(bigDir, 'work', `d${d}`), { recursive: true });
        for (let f = 0; f < FILES / 10; f++)
          writeFileSync(join(bigDir, 'work', `d${d}`, `f${f}.bin`), randomBytes(FILE_BYTES));
      }
      const ws = await series(rig, big, bigDir, runs, scratch);
      await rig.adapter.lifecycle.destroy(big);

      const c = roundSummary(summarize(cold));
      const r = roundSummary(summarize(restored));
      const r50 = ratio(r.p50, c.p50);
      const met = r50 <= 2;
      const d = demo!;
      return {
        setup: {
          server: SETUP_SERVER,
          runner: SETUP_RUNNER,
          workspace: `${FILES} files of ${FILE_BYTES} random bytes in 10 folders`,
          restore:
            'the sandbox destroyed through the adapter behind Fountain; the next prompt provisions, restores, session/load',
        },
        figures: {
          runs,
          demoCaptureMs: { ...d.captureMs },
          demoRestoreMs: { ...d.restoreMs },
          demoBytes: d.bytes,
          workspaceCaptureMs: { ...ws.captureMs },
          workspaceRestoreMs: { ...ws.restoreMs },
          workspaceBytes: ws.bytes,
          restoreToFirstAnswerMs: { ...r },
          coldToFirstAnswerMs: { ...c },
          ratioRestoreToCold: r50,
        },
        baseline: {
          description:
            'tar -czf / tar -xzf of the same sandbox directory run directly in the bench process; a new conversation to its first answer (no checkpoint)',
          figures: {
            demoTarMs: { ...d.tarMs },
            demoUntarMs: { ...d.untarMs },
            demoTarBytes: d.tarBytes,
            workspaceTarMs: { ...ws.tarMs },
            workspaceUntarMs: { ...ws.untarMs },
            workspaceTarBytes: ws.tarBytes,
            coldToFirstAnswerMs: { ...c },
          },
        },
        ratio: {
          value: r50,
          meaning: 'restore to first answer p50 / cold start to first answer p50 (lower is better)',
        },
        target: { description: 'restore to first answer ≤ 2x a cold start (issue 29)', met },
        notes: [
          `workspace capture ${ratio(ws.captureMs.p50, ws.tarMs.p50)}x and restore ${ratio(ws.restoreMs.p50, ws.untarMs.p50)}x of tar directly`,
        ],
        summary: `checkpoint demo ${d.bytes} B in ${d.captureMs.p50} ms (tar ${d.tarMs.p50} ms); ${round(ws.bytes / 1e6, 3)} MB workspace in ${ws.captureMs.p50} ms, restored in ${ws.restoreMs.p50} ms (tar ${ws.tarMs.p50} / ${ws.untarMs.p50} ms); restore to first answer ${r.p50} ms vs cold ${c.p50} ms → ${r50}x (target ≤2x: ${verdict(met)})`,
      };
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  },
};
