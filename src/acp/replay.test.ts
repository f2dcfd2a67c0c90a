import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, realpath } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JournalSkipper } from './skipper.ts';
import { classifyLine } from './message.ts';
import { answerText, recorder, startDemoAgent } from './testing/demo-process.ts';

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const unwrap = <T>(r: { ok: true; value: T } | { ok: false; error: { code: string; message: string } }): T => {
  if (!r.ok) assert.fail(`${r.error.code}: ${r.error.message}`);
  return r.value;
};

/** Deterministic pseudo-random chunk sizes (1..max bytes), so chunk boundaries fall inside lines and characters. */
function chunker(seed: number, max: number): (b: Buffer) => Buffer[] {
  return (b) => {
    let s = seed;
    const out: Buffer[] = [];
    for (let i = 0; i < b.length; ) {
      s = (s * 1103515245 + 12345) & 0x7fffffff;
      const n = 1 + (s % max);
      out.push(b.subarray(i, i + n));
      i += n;
    }
    return out;
  };
}
const bytewise = (b: Buffer): Buffer[] => [...b].map((x) => Buffer.from([x]));

const lines = (b: Buffer): string[] =>
  b
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '');
const isReplyTo = (line: string, id: number): boolean => {
  const c = classifyLine(line);
  return c.ok && (c.message.kind === 'result' || c.message.kind === 'error') && c.message.id === id;
};

describe('recovery over a real byte journal of the demo agent', { timeout: 60_000 }, () => {
  it('skips turn 1 (and its stale permission request), then restores turn 2 and its pending permission', async () => {
    const home = await realpath(await mkdtemp(join(tmpdir(), 'fountain-acp-replay-')));
    dirs.push(home);
    const p = startDemoAgent({ home, cwd: home });
    try {
      unwrap(await p.client.initialize()); // id 0
      const { sessionId } = unwrap(await p.client.newSession({ cwd: home })); // id 1

      // Turn 1 (id 2): a permission request, answered.
      const t1 = unwrap(p.client.prompt('run: echo one'));
      const stale = await p.rec.nextPermission();
      unwrap(await p.client.answerPermission(stale.id, { outcome: 'selected', optionId: 'allow_once' }));
      assert.equal(unwrap(await t1.done).stopReason, 'end_turn');

      // Turn 2 (id 3): the connection "drops" while its permission request is pending.
      const t2 = unwrap(p.client.prompt('run: echo two'));
      assert.equal(t2.id, 3);
      const pending = await p.rec.nextPermission(1);
      assert.notDeepEqual(pending.id, stale.id);
      const journal = Buffer.concat(p.journal);
      const all = lines(journal);
      assert.equal(all.filter((l) => l.includes('"session/request_permission"')).length, 2);
      p.client.close('runner_disconnected');
      assert.equal(
        unwrap(await t2.done.then((r) => (r.ok ? r : { ok: true as const, value: r.error.code }))),
        'acp_closed',
      );

      // The skipper on its own: everything up to and including the reply to id 2 is dropped, the rest passes unchanged.
      const boundary = all.findIndex((l) => isReplyTo(l, 2));
      const kept = `${all.slice(boundary + 1).join('\n')}\n`;
      assert.ok(kept.includes('"session/request_permission"') && !kept.includes('echo one'));
      for (const chunking of [(b: Buffer) => [b], bytewise, chunker(7, 97), chunker(11, 4096)]) {
        const skipper = new JournalSkipper(2);
        const out: Buffer[] = [];
        for (const piece of chunking(journal)) out.push(Buffer.from(unwrap(skipper.push(piece))));
        assert.equal(skipper.boundarySeen, true);
        assert.equal(skipper.discardedLines, boundary + 1);
        assert.equal(Buffer.concat(out).toString('utf8'), kept);
      }
      const early = new JournalSkipper(2);
      unwrap(
        early.push(
          Buffer.from(
            all
              .slice(0, boundary)
              .map((l) => `${l}\n`)
              .join(''),
          ),
        ),
      );
      assert.equal(early.boundarySeen, false, 'no boundary before the reply to the previous request');

      // Attach: a new client over the journal (cut at odd places), then the live tail.
      const rec2 = recorder();
      const { client: c2, turn: restored } = p.reattach(
        { sessionId, promptId: 3, pendingPermissionId: pending.id },
        rec2,
        chunker(3, 53),
      );
      assert.equal(c2.boundarySeen, true);
      assert.deepEqual(rec2.permissions, [], 'neither the stale nor the restored request is asked again');
      assert.deepEqual(
        rec2.messages.map((m) => m.raw),
        all.slice(boundary + 1),
      );
      assert.equal(rec2.messages[0]?.ctx.seq, boundary + 1);
      const held = c2.heldPermissions;
      assert.equal(held.length, 1);
      assert.deepEqual(held[0]?.id, pending.id);
      assert.equal(held[0]?.params?.toolCall.title, 'Run `echo two`');
      assert.equal(c2.nextRequestId, 4);

      // The engine answers after the reconnect; it reaches the agent and the attached prompt resolves the turn.
      const attached = c2.attachPrompt({ sessionId, promptId: 3 });
      assert.equal(attached.ok ? 'ok' : attached.error.code, 'acp_invalid_state');
      const from = rec2.notifications.length;
      unwrap(await c2.answerPermission(pending.id, { outcome: 'selected', optionId: 'allow_once' }));
      assert.equal(unwrap(await restored).stopReason, 'end_turn');
      assert.ok(
        rec2.messages.some((m) => isReplyTo(m.raw, 3)),
        'the reply itself is delivered to onMessage too',
      );
      assert.match(answerText(rec2, from), /Its output:\ntwo$/);
      assert.deepEqual(rec2.problems, []);
    } finally {
      await p.stop();
    }
  });

  it('with replayThrough, lines stored before the drop are not delivered again: every line exactly once', async () => {
    const home = await realpath(await mkdtemp(join(tmpdir(), 'fountain-acp-replay-')));
    dirs.push(home);
    const p = startDemoAgent({ home, cwd: home });
    try {
      unwrap(await p.client.initialize());
      const { sessionId } = unwrap(await p.client.newSession({ cwd: home }));
      unwrap(await unwrap(p.client.prompt('remember: first')).done); // id 2
      const t = unwrap(p.client.prompt('run: echo three')); // id 3
      const pending = await p.rec.nextPermission();
      const stored = [...p.rec.messages];
      const last = stored.at(-1);
      assert.ok(last);
      p.client.close('server restart');

      const rec2 = recorder();
      const { client: c2, turn: restored } = p.reattach(
        { sessionId, promptId: t.id, pendingPermissionId: pending.id, replayThrough: last.ctx.seq },
        rec2,
        chunker(5, 31),
      );
      assert.deepEqual(rec2.messages, [], 'everything in the journal was already stored');
      assert.deepEqual(
        c2.heldPermissions.map((h) => h.id),
        [pending.id],
      );
      unwrap(await c2.answerPermission(pending.id, { outcome: 'selected', optionId: 'allow_once' }));
      assert.equal(unwrap(await restored).stopReason, 'end_turn');
      const combined = [...stored, ...rec2.messages];
      assert.deepEqual(
        combined.map((m) => m.ctx.seq),
        combined.map((_, i) => i),
        'no line twice, none missing',
      );
      assert.deepEqual(
        combined.map((m) => m.raw),
        lines(Buffer.concat(p.journal)),
      );
      // The next prompt continues the numbering.
      const next = unwrap(c2.prompt('recall'));
      assert.equal(next.id, t.id + 1);
      unwrap(await next.done);
      assert.match(answerText(rec2), /I remember:\n- first$/);
    } finally {
      await p.stop();
    }
  });
});
