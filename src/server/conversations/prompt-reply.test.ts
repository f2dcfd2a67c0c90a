import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'drizzle-orm';
import { listTurns } from './store.ts';
import { startEngineRig, type EngineRig } from './test-rig.ts';
import { allEvents, answerText, waitForStage } from './testing.ts';

/**
 * POST /prompts is answered once the turn row is stored (issue 21): the conversation's running mark
 * and the prompt's way to the agent come after. Shown on PostgreSQL, where another connection can
 * hold the conversation row so that mark waits.
 */
describe('a prompt is answered once its turn is stored (real PostgreSQL, real runner, demo agent)', () => {
  let rig: EngineRig;

  before(async () => {
    rig = await startEngineRig('prompt-reply', { idleTimeoutMs: 0 }, 'postgres');
  });

  after(async () => {
    await rig?.stop();
  });

  it('answers while the running mark waits on a row lock; an interrupt then ends the turn before its prompt is sent', async () => {
    const { db, engine, accountId } = rig;
    const agent = await rig.demoAgent('reply');
    const created = await engine.create(accountId, { agentId: agent.id, prompt: 'remember: the lock test' });
    assert.ok(created.ok, JSON.stringify(created));
    const id = created.value.id;
    const first = await waitForStage(db, id, 'turn', 'done');

    // Another connection holds the conversation row (FOR NO KEY UPDATE: the turn insert's foreign-key
    // check still passes, the conversation's update waits).
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const holding = new Promise<void>((r) => (locked = r));
    const holder = db.transaction(async (tx) => {
      await tx.execute(sql`select 1 from conversations where id = ${id} for no key update`);
      locked();
      await gate;
    });
    await holding;
    try {
      const answered = await Promise.race([
        engine.prompt(accountId, id, 'recall'),
        new Promise<'waiting'>((r) => setTimeout(() => r('waiting'), 20_000)),
      ]);
      assert.notEqual(answered, 'waiting', 'the prompt waited for the conversation row');
      assert.ok(answered !== 'waiting' && answered.ok, JSON.stringify(answered));
      const turnId = answered.value.turnId;
      // Admitted by the capacity queue, the turn is stored `pending`; the turn driver marks it running.
      const stored = (await listTurns(db, id)).at(-1);
      assert.equal(stored?.id, turnId, 'the turn is stored when the answer comes');
      assert.ok(['pending', 'running'].includes(stored.status), `an admitted turn, not queued: ${stored.status}`);
      assert.ok(engine.busy(id));
      const again = await engine.prompt(accountId, id, 'recall');
      assert.equal(!again.ok && again.error.code, 'conversation_busy');
      assert.ok((await engine.interrupt(accountId, id)).ok);
      release();
      await holder;
      await waitForStage(db, id, 'turn', 'interrupted', first.id);
      assert.equal(answerText(await allEvents(db, id), turnId), '', 'the agent never got the interrupted prompt');
      assert.equal((await listTurns(db, id)).at(-1)?.status, 'interrupted');
    } finally {
      release();
      await holder.catch(() => undefined);
    }

    // The conversation goes on: the next prompt reaches the same agent, which remembers.
    const next = await engine.prompt(accountId, id, 'recall');
    assert.ok(next.ok, JSON.stringify(next));
    await waitForStage(db, id, 'turn', 'done', first.id);
    assert.match(answerText(await allEvents(db, id), next.value.turnId), /the lock test/);
    assert.ok((await engine.terminate(accountId, id)).ok);
  });
});
