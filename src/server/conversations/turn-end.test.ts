import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { listTurns } from './store.ts';
import { startEngineRig, type EngineRig } from './test-rig.ts';
import { allEvents, answerText, until } from './testing.ts';

/**
 * A turn row says it ended only once every event of the turn is stored: a client that polls
 * GET /turns and then reads the events finds the whole answer. Shown with a long batching delay,
 * which the turn's end must not wait out or skip.
 */
describe('a turn row ends after its events are stored (embedded database, real runner, demo agent)', () => {
  let rig: EngineRig;

  before(async () => {
    rig = await startEngineRig('turn-end', { idleTimeoutMs: 0, eventFlushMs: 1_500, eventFlushMax: 10_000 });
  });

  after(async () => {
    await rig?.stop();
  });

  it('the answer is stored when the turn row reads completed', async () => {
    const { db, engine, accountId } = rig;
    const agent = await rig.demoAgent('turn-end');
    const created = await engine.create(accountId, { agentId: agent.id, prompt: 'remember: the stored answer' });
    assert.ok(created.ok, JSON.stringify(created));
    const id = created.value.id;
    const turn = await until(
      async () => (await listTurns(db, id)).find((t) => ['completed', 'failed', 'interrupted'].includes(t.status)),
      'the first turn to end',
    );
    assert.equal(turn.status, 'completed');
    assert.match(answerText(await allEvents(db, id), turn.id), /the stored answer/);
    assert.ok((await engine.terminate(accountId, id)).ok);
  });
});
