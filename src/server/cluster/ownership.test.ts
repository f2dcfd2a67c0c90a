import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { eq, inArray, sql } from 'drizzle-orm';
import pino from 'pino';
import { createAccount } from '../account/store.ts';
import { conversations, serverNodes, turns, type Conversation, type Turn } from '../store/conversation-schema.ts';
import { insertConversation, insertTurn } from '../conversations/store.ts';
import { openDatabase, type Database } from '../store/db.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { claimTurn, stampNode } from './store.ts';
import {
  dropSchema,
  openTestDatabase,
  TEST_POSTGRES_URL,
  uniqueSchemaName,
  type TestDatabase,
} from '../store/testing.ts';
import { lossOf, NodeOwnership, type Adopter, type Loss } from './ownership.ts';

const logger = pino({ level: 'silent' });
/** Long enough that no timer fires during a test: every pass below is one the test started. */
const QUIET_MS = 3_600_000;
const EXPIRY_MS = 30_000;

interface Seen {
  provisionings: Array<{ c: Conversation; loss: Loss }>;
  turns: Array<{ c: Conversation; t: Turn; loss: Loss }>;
  released: string[];
}

function recorder(driving: () => string[] = () => []): Adopter & { seen: Seen } {
  const seen: Seen = { provisionings: [], turns: [], released: [] };
  return {
    seen,
    provisioning: async (c, loss) => void seen.provisionings.push({ c, loss }),
    turn: async (c, t, loss) => void seen.turns.push({ c, t, loss }),
    driving,
    release: async (id) => void seen.released.push(id),
  };
}

const node = (db: EngineDb, nodeId: string, shared = true) =>
  new NodeOwnership({ db, nodeId, shared, heartbeatMs: QUIET_MS, expiryMs: EXPIRY_MS, logger });

/** A conversation in `status`, created by `node`, with one turn in `turn` (none when null) driven by `turnNode`. */
async function seed(
  db: EngineDb,
  accountId: string,
  status: Conversation['status'],
  node: string | null,
  turn: Turn['status'] | null = 'running',
  turnNode: string | null = node,
): Promise<{ conversationId: string; turnId: string | null }> {
  const row = await insertConversation(
    db,
    { accountId, runtime: 'demo', status, nodeId: node },
    { provider: 'runner', name: `seed-${randomBytes(6).toString('hex')}`, status: 'ready' },
  );
  const t = turn
    ? await insertTurn(db, {
        conversationId: row.conversation.id,
        turnNumber: 1,
        prompt: 'p',
        status: turn,
        nodeId: turnNode,
      })
    : null;
  return { conversationId: row.conversation.id, turnId: t?.id ?? null };
}

const backdate = (db: EngineDb, nodeId: string) =>
  db.update(serverNodes).set({ heartbeatAt: sql`now() - interval '1 hour'` }).where(eq(serverNodes.nodeId, nodeId));
const turnNode = async (db: EngineDb, id: string) => (await db.select().from(turns).where(eq(turns.id, id)))[0]?.nodeId;

describe('turn ownership on PostgreSQL shared by several nodes', () => {
  const schema = uniqueSchemaName();
  let one: Database;
  let two: Database;
  let db: EngineDb;
  let db2: EngineDb;
  let accountId: string;

  before(async () => {
    one = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    // A second pool: the racing nodes below really run their claims side by side.
    two = await openDatabase({ url: TEST_POSTGRES_URL, schema });
    db = one.db as unknown as EngineDb;
    db2 = two.db as unknown as EngineDb;
    accountId = (await createAccount(one.db, { name: 'owner', role: 'owner' })).id;
  });

  // Each test starts from a database with no open work and no nodes: leftovers would be lost work too.
  beforeEach(async () => {
    await db
      .update(turns)
      .set({ status: 'completed' })
      .where(inArray(turns.status, ['pending', 'running']));
    await db
      .update(conversations)
      .set({ status: 'idle' })
      .where(inArray(conversations.status, ['pending', 'running']));
    await db.delete(serverNodes);
  });

  after(async () => {
    await one?.close();
    await two?.close();
    await dropSchema(schema);
  });

  it('adopts only the work of nodes whose heartbeat expired or that never had one', async () => {
    await stampNode(db, 'alive');
    await stampNode(db, 'stale');
    await backdate(db, 'stale');
    await stampNode(db, 'ancient');
    await db
      .update(serverNodes)
      .set({ heartbeatAt: sql`now() - interval '2 days'` })
      .where(eq(serverNodes.nodeId, 'ancient'));
    const alive = await seed(db, accountId, 'running', 'alive');
    const stale = await seed(db, accountId, 'running', 'stale');
    const gone = await seed(db, accountId, 'running', 'gone');
    const legacy = await seed(db, accountId, 'running', null);
    const provisioning = await seed(db, accountId, 'pending', 'stale', 'pending');
    const provisioningAlive = await seed(db, accountId, 'pending', 'alive', 'pending');
    // Left running without an open turn: settled idle only when the node of its last turn is lost.
    const abandoned = await seed(db, accountId, 'running', 'stale', 'completed');
    const closing = await seed(db, accountId, 'running', 'alive', 'completed');

    const me = node(db, 'me');
    const adopter = recorder();
    await me.start(adopter);
    await me.stop();

    const adoptedTurns = adopter.seen.turns.map((x) => x.t.id).sort();
    assert.deepEqual(adoptedTurns, [stale.turnId, gone.turnId, legacy.turnId].sort());
    for (const { t } of adopter.seen.turns) assert.equal(t.nodeId, 'me', 'the handed-over row is the claimed one');
    for (const id of adoptedTurns) assert.equal(await turnNode(db, id!), 'me');
    assert.equal(await turnNode(db, alive.turnId!), 'alive');
    const byTurn = new Map(adopter.seen.turns.map((x) => [x.t.id, x.loss]));
    assert.match(byTurn.get(stale.turnId!)!.turnReason, /^server node stale stopped during the turn/);
    assert.equal(byTurn.get(stale.turnId!)!.recoveryReason, 'server_node_lost');
    assert.equal(byTurn.get(legacy.turnId!)!.nodeId, null);

    assert.deepEqual(
      adopter.seen.provisionings.map((x) => x.c.id),
      [provisioning.conversationId],
    );
    assert.match(
      adopter.seen.provisionings[0]!.loss.provisioningReason,
      /server node stale stopped while provisioning/,
    );
    const conv = async (id: string) => (await db.select().from(conversations).where(eq(conversations.id, id)))[0]!;
    assert.equal((await conv(provisioningAlive.conversationId)).nodeId, 'alive');
    assert.equal((await conv(abandoned.conversationId)).status, 'idle');
    assert.equal((await conv(closing.conversationId)).status, 'running');

    // Only a row silent for days is reaped; a freshly lost node's row stays for the runner hosts to see.
    const rows = (await db.select().from(serverNodes)).map((r) => r.nodeId).sort();
    assert.deepEqual(rows, ['alive', 'me', 'stale']);

    // A second pass finds nothing more: what was claimed is this node's, and this node is alive.
    const again = node(db, 'other');
    const second = recorder();
    await again.start(second);
    await again.stop();
    assert.deepEqual([second.seen.turns.length, second.seen.provisionings.length], [0, 0]);
  });

  it('two nodes racing for a lost node’s work: each piece is adopted exactly once', async () => {
    const lost = `lost-${randomBytes(4).toString('hex')}`;
    const seeded = [];
    for (let i = 0; i < 24; i++) seeded.push(await seed(db, accountId, 'running', lost));
    const provisionings = [];
    for (let i = 0; i < 6; i++)
      provisionings.push(await seed(db, accountId, 'pending', lost, i % 2 ? 'pending' : null));

    const a = node(db, 'racer-a');
    const b = node(db2, 'racer-b');
    const ra = recorder();
    const rb = recorder();
    // Both boot at once, then sweep again side by side.
    await Promise.all([a.start(ra), b.start(rb)]);
    await Promise.all([a.sweep(), b.sweep(), a.sweep(), b.sweep()]);
    await Promise.all([a.stop(), b.stop()]);

    const ta = ra.seen.turns.map((x) => x.t.id);
    const tb = rb.seen.turns.map((x) => x.t.id);
    assert.deepEqual([...ta, ...tb].sort(), seeded.map((s) => s.turnId).sort(), 'every turn adopted');
    assert.equal(new Set([...ta, ...tb]).size, ta.length + tb.length, 'no turn adopted twice');
    for (const id of ta) assert.equal(await turnNode(db, id), 'racer-a');
    for (const id of tb) assert.equal(await turnNode(db, id), 'racer-b');
    const pa = ra.seen.provisionings.map((x) => x.c.id);
    const pb = rb.seen.provisionings.map((x) => x.c.id);
    assert.deepEqual([...pa, ...pb].sort(), provisionings.map((p) => p.conversationId).sort());
    assert.equal(new Set([...pa, ...pb]).size, pa.length + pb.length, 'no provisioning adopted twice');
  });

  it('the claim itself: of many concurrent claims on one row, exactly one succeeds', async () => {
    const lost = `lost-${randomBytes(4).toString('hex')}`;
    for (let round = 0; round < 5; round++) {
      const { turnId } = await seed(db, accountId, 'running', lost);
      await Promise.all([stampNode(db, 'claim-a'), stampNode(db, 'claim-b')]);
      const claims = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          claimTurn(i % 2 ? db : db2, turnId!, lost, { self: i % 2 ? 'claim-a' : 'claim-b', expiryMs: EXPIRY_MS }),
        ),
      );
      const won = claims.filter((c) => c !== undefined);
      assert.equal(won.length, 1, `round ${round}: ${won.length} claims won`);
      assert.equal(await turnNode(db, turnId!), won[0]!.nodeId);
    }
  });

  it('a node presumed lost lets go of the turns another node adopted, and only those', async () => {
    const kept = await seed(db, accountId, 'running', 'slow');
    const taken = await seed(db, accountId, 'running', 'slow');
    const slow = node(db, 'slow');
    const slowAdopter = recorder(() => [kept.turnId!, taken.turnId!]);
    await slow.start(slowAdopter);
    await slow.beat();
    assert.deepEqual(slowAdopter.seen.released, [], 'nothing was taken yet');

    // The slow node missed its beats; a peer adopts one of its turns (the other finished meanwhile, say).
    await backdate(db, 'slow');
    await db.update(turns).set({ status: 'completed' }).where(eq(turns.id, kept.turnId!));
    const peer = node(db2, 'peer');
    const peerAdopter = recorder();
    await peer.start(peerAdopter);
    assert.deepEqual(
      peerAdopter.seen.turns.map((x) => x.t.id),
      [taken.turnId],
    );

    await slow.beat();
    assert.deepEqual(slowAdopter.seen.released, [taken.turnId]);
    await Promise.all([slow.stop(), peer.stop()]);
  });

  it('a node that stops cleanly removes its row, so its turns are adopted without waiting for the expiry', async () => {
    const leaving = node(db, 'leaving');
    await leaving.start(recorder());
    const { turnId } = await seed(db, accountId, 'running', 'leaving');
    const peer = node(db2, 'stayer');
    const before = recorder();
    await peer.start(before);
    assert.equal(before.seen.turns.length, 0, 'a live node keeps its turn');
    await leaving.stop();
    await leaving.leave();
    const after = recorder();
    await peer.stop();
    const peer2 = node(db2, 'stayer-2');
    await peer2.start(after);
    await peer2.stop();
    assert.deepEqual(
      after.seen.turns.map((x) => x.t.id),
      [turnId],
    );
  });
});

describe('turn ownership alone on the database (PGlite)', () => {
  let t: TestDatabase;
  before(async () => {
    t = await openTestDatabase('pglite');
  });
  after(async () => {
    await t?.dispose();
  });

  it('a restart adopts everything its predecessor left open at once, heartbeat or not', async () => {
    const db = t.database.db as unknown as EngineDb;
    const accountId = (await createAccount(t.database.db, { name: 'owner', role: 'owner' })).id;
    await stampNode(db, 'previous');
    const running = await seed(db, accountId, 'running', 'previous');
    const provisioning = await seed(db, accountId, 'pending', 'previous', null);
    const idleLeftRunning = await seed(db, accountId, 'running', 'previous', 'completed');
    const me = node(db, 'restarted', false);
    const adopter = recorder();
    await me.start(adopter);
    await me.stop();
    assert.deepEqual(
      adopter.seen.turns.map((x) => x.t.id),
      [running.turnId],
    );
    assert.deepEqual(adopter.seen.turns[0]!.loss, lossOf('previous', false));
    assert.equal(adopter.seen.turns[0]!.loss.turnReason, 'the server restarted during the turn');
    assert.equal(adopter.seen.turns[0]!.loss.recoveryReason, 'runner_offline');
    assert.deepEqual(
      adopter.seen.provisionings.map((x) => x.c.id),
      [provisioning.conversationId],
    );
    const [c] = await db.select().from(conversations).where(eq(conversations.id, idleLeftRunning.conversationId));
    assert.equal(c!.status, 'idle');
  });
});
