import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createAccount } from '../account/store.ts';
import { insertAgent } from '../agents/store.ts';
import {
  endTurnRows,
  endTurnRowsWithEvent,
  getConversationById,
  markConversationRunning,
  getConversationForPrompt,
  getTurn,
  insertConversation,
  insertPromptTurn,
  insertTurn,
  setTurnPromptId,
  settleRunningConversation,
  updateConversation,
  updateTurn,
} from './store.ts';
import { openTestDatabase, type TestDatabase, type TestDriver } from '../store/testing.ts';
import pino from 'pino';
import { EventLog } from './event-log.ts';
import { pageEvents } from './events-store.ts';
import type { EventRow } from '../store/conversation-schema.ts';

for (const driver of ['pglite', 'postgres'] as TestDriver[]) {
  describe(`prompt queries on ${driver}`, () => {
    let t: TestDatabase;
    /** A conversation with no agent on a ready runner sandbox, in an account of its own named `name`. */
    const ownConversation = async (
      db: TestDatabase['database']['db'],
      name: string,
      status: 'idle' | 'running',
      turnCount: number,
      sandboxName: string,
    ) => {
      const acct = await createAccount(db, { name, email: `${name}-${driver}@example.test`, role: 'owner' });
      const { conversation } = await insertConversation(
        db,
        {
          accountId: acct.id,
          agentId: null,
          title: null,
          firstPrompt: null,
          status,
          runtime: 'demo',
          permissionPolicy: {},
          source: 'api',
          turnCount,
        },
        { provider: 'runner', name: sandboxName, status: 'ready' },
      );
      return conversation;
    };
    before(async () => {
      t = await openTestDatabase(driver);
    });
    after(async () => {
      await t?.dispose();
    });

    it('reads a conversation for a prompt in one query: tenant-scoped, with whether a turn is open', async () => {
      const { db } = t.database;
      const acct = await createAccount(db, { name: 'p', email: `p-${driver}@example.test`, role: 'owner' });
      const other = await createAccount(db, { name: 'q', email: `q-${driver}@example.test`, role: 'user' });
      const agent = await insertAgent(db, acct.id, {
        name: 'a',
        description: '',
        system: '',
        runtime: 'demo',
        model: 'fountain/demo',
        sandboxProvider: null,
        permissionPolicy: {},
        metadata: {},
      });
      assert.ok(agent.ok);
      const { conversation: c, sandbox: s } = await insertConversation(
        db,
        {
          accountId: acct.id,
          agentId: agent.agent.id,
          title: null,
          firstPrompt: null,
          status: 'idle',
          runtime: 'demo',
          permissionPolicy: {},
          source: 'api',
          turnCount: 0,
        },
        { provider: 'runner', name: 'x', status: 'ready' },
      );
      const fresh = await getConversationForPrompt(db, acct.id, c.id);
      assert.equal(fresh?.conversation.id, c.id);
      assert.equal(fresh?.sandbox?.id, s?.id);
      assert.equal(fresh?.turnOpen, false);
      assert.equal(
        await getConversationForPrompt(db, other.id, c.id),
        undefined,
        "another tenant's conversation is not found",
      );

      const turn = await insertTurn(db, {
        conversationId: c.id,
        turnNumber: 1,
        prompt: 'hi',
        status: 'running',
        startedAt: new Date(),
      });
      assert.equal((await getConversationForPrompt(db, acct.id, c.id))?.turnOpen, true);
      await setTurnPromptId(db, turn.id, 3);
      await setTurnPromptId(db, turn.id, 5);
      assert.equal((await getTurn(db, turn.id))?.acpPromptId, 5, 'the prepared write runs again with new values');
      await updateTurn(db, turn.id, { status: 'completed', endedAt: new Date() });
      assert.equal((await getConversationForPrompt(db, acct.id, c.id))?.turnOpen, false);

      const startedAt = new Date(Date.now() - 1_000);
      for (const n of [2, 3]) {
        const prompted = await insertPromptTurn(db, {
          conversationId: c.id,
          turnNumber: n,
          prompt: `p${n}`,
          startedAt,
          nodeId: 'node-x',
          model: n === 2 ? 'm' : null,
        });
        assert.equal(prompted.status, 'running');
        assert.equal(prompted.turnNumber, n);
        assert.equal(prompted.prompt, `p${n}`);
        assert.equal(prompted.startedAt?.getTime(), startedAt.getTime(), 'read back as a Date');
        assert.equal(prompted.model, n === 2 ? 'm' : null);
        assert.deepEqual(await getTurn(db, prompted.id), prompted, 'the prepared insert returns the stored row');
        await updateTurn(db, prompted.id, { status: 'completed', endedAt: new Date() });
      }
    });

    it('marks a conversation running with the prepared statement: an absent field keeps its stored value', async () => {
      const { db } = t.database;
      const c = await ownConversation(db, 'm', 'idle', 0, 'm');
      const at = new Date(Date.now() + 5_000);
      await markConversationRunning(db, c.id, at, { turnCount: 1, firstPrompt: 'first' });
      let row = (await getConversationById(db, c.id))!.conversation;
      assert.deepEqual(
        [row.status, row.turnCount, row.firstPrompt, row.lastActiveAt.getTime()],
        ['running', 1, 'first', at.getTime()],
      );
      await updateConversation(db, c.id, { status: 'idle' });
      await markConversationRunning(db, c.id, at, { turnCount: 2 });
      row = (await getConversationById(db, c.id))!.conversation;
      assert.deepEqual([row.status, row.turnCount, row.firstPrompt], ['running', 2, 'first']);
      await markConversationRunning(db, c.id, at);
      assert.equal((await getConversationById(db, c.id))!.conversation.turnCount, 2);
    });

    it('settles a running conversation to idle, and leaves any other status alone', async () => {
      const { db } = t.database;
      const c = await ownConversation(db, 'r', 'running', 1, 'y');
      await settleRunningConversation(db, c.id, { acpNextId: 7 });
      const idle = (await getConversationById(db, c.id))!.conversation;
      assert.equal(idle.status, 'idle');
      assert.equal(idle.acpNextId, 7);
      await updateConversation(db, c.id, { status: 'terminated' });
      await settleRunningConversation(db, c.id, { acpNextId: 9 });
      const kept = (await getConversationById(db, c.id))!.conversation;
      assert.equal(kept.status, 'terminated');
      assert.equal(kept.acpNextId, 7);
    });

    it('ends a turn in one statement: its row, its running conversation settled, the usage added; a stopped conversation keeps its status', async () => {
      const { db } = t.database;
      const c = await ownConversation(db, 's', 'running', 1, 'z');
      const first = await insertTurn(db, {
        conversationId: c.id,
        turnNumber: 1,
        prompt: 'hi',
        status: 'running',
        startedAt: new Date(),
      });
      const endedAt = new Date(Date.now() + 60_000);
      const usage = { input: 3, output: 5, cost: { amount: 0.5, currency: 'USD' } };
      await endTurnRows(db, {
        turnId: first.id,
        patch: { status: 'completed', stopReason: 'end_turn', endedAt, usage },
        conversationId: c.id,
        settle: { lastActiveAt: endedAt, acpNextId: 4 },
        usage,
      });
      const ended = (await getTurn(db, first.id))!;
      assert.equal(ended.status, 'completed');
      assert.equal(ended.stopReason, 'end_turn');
      assert.equal(ended.endedAt?.getTime(), endedAt.getTime());
      const idle = (await getConversationById(db, c.id))!.conversation;
      assert.equal(idle.status, 'idle');
      assert.equal(idle.acpNextId, 4);
      assert.equal(idle.lastActiveAt.getTime(), endedAt.getTime());
      assert.deepEqual(
        { ...idle.usageTotal },
        { input: 3, output: 5, cache_read: 0, cache_write: 0, cost: { amount: 0.5, currency: 'USD' } },
      );

      // Terminated meanwhile: the turn still ends and its usage still counts; the status and the rest stay.
      await updateConversation(db, c.id, { status: 'terminated' });
      const second = await insertTurn(db, {
        conversationId: c.id,
        turnNumber: 2,
        prompt: 'again',
        status: 'running',
        startedAt: new Date(),
      });
      await endTurnRows(db, {
        turnId: second.id,
        patch: { status: 'failed', reason: 'terminated' },
        conversationId: c.id,
        settle: { lastActiveAt: new Date(), acpNextId: 9 },
        usage: { input: 1, output: 1 },
      });
      assert.equal((await getTurn(db, second.id))?.status, 'failed');
      const kept = (await getConversationById(db, c.id))!.conversation;
      assert.equal(kept.status, 'terminated');
      assert.equal(kept.acpNextId, 4);
      assert.equal(kept.lastActiveAt.getTime(), endedAt.getTime());
      assert.equal(kept.usageTotal.input, 4);
      assert.equal(kept.usageTotal.output, 6);
      await endTurnRows(db, {
        turnId: second.id,
        patch: { reason: 'again' },
        conversationId: c.id,
        settle: { lastActiveAt: new Date(), acpNextId: 11 },
        usage: null,
      });
      assert.equal(
        (await getConversationById(db, c.id))!.conversation.acpNextId,
        4,
        'without usage, a stopped conversation is not touched',
      );
    });
    it('ends a turn with its stage event in one statement, published by the event log between the events before and after it', async () => {
      const { db } = t.database;
      const c = await ownConversation(db, 'e', 'running', 1, 'w');
      const turn = await insertTurn(db, {
        conversationId: c.id,
        turnNumber: 1,
        prompt: 'hi',
        status: 'running',
        startedAt: new Date(),
      });
      // A long batching delay: the event appended before must still be stored and published first.
      const log = new EventLog(db, pino({ enabled: false }), { flushMs: 10_000, flushMax: 100 });
      const seen: EventRow[] = [];
      log.subscribe(c.id, (r) => seen.push(r));
      const endedAt = new Date();
      const end = (turnId: string) =>
        endTurnRowsWithEvent(
          db,
          {
            turnId: turn.id,
            patch: { status: 'completed', stopReason: 'end_turn', endedAt },
            conversationId: c.id,
            settle: { lastActiveAt: endedAt, acpNextId: 2 },
            usage: null,
          },
          log.stageEvent(c.id, turnId, 'turn', 'done', { turn_id: turn.id }),
        );

      // A statement that fails stores nothing: neither the rows nor the event.
      await assert.rejects(log.storeWith(() => end('not-a-uuid')));
      assert.equal((await getTurn(db, turn.id))?.status, 'running');
      assert.equal((await getConversationById(db, c.id))!.conversation.status, 'running');

      log.output(c.id, turn.id, 'acp', 'before');
      const done = await log.storeWith(() => end(turn.id));
      log.output(c.id, turn.id, 'acp', 'after');
      await log.flush();
      assert.deepEqual(
        seen.map((r) => r.data),
        ['before', JSON.stringify({ turn_id: turn.id }), 'after'],
      );
      assert.ok(seen[0]!.id < done.id && done.id < seen[2]!.id, 'ids follow the order');
      assert.equal(done.state, 'done');
      const stored = await pageEvents(db, c.id, { after: 0, limit: 10 });
      assert.deepEqual(
        stored.map((r) => r.id),
        seen.map((r) => r.id),
      );
      assert.equal((await getTurn(db, turn.id))?.status, 'completed');
      const idle = (await getConversationById(db, c.id))!.conversation;
      assert.equal(idle.status, 'idle');
      assert.equal(idle.acpNextId, 2);
      await log.close();
    });
  });
}
