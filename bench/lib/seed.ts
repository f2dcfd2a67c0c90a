/**
 * Idle conversations written straight into a server's data directory (while no server holds it),
 * as a long-used instance has them: a suspended sandbox, two completed turns and their events each.
 */
import { randomUUID } from 'node:crypto';
import { findOwner } from '../../src/server/account/store.ts';
import { insertAgent } from '../../src/server/agents/store.ts';
import { type Db, openDatabase } from '../../src/server/store/db.ts';
import { conversations, events, sandboxes, turns } from '../../src/server/store/conversation-schema.ts';

const BATCH = 100;

export async function seedIdleConversations(dataDir: string, count: number): Promise<void> {
  const database = await openDatabase({ dataDir });
  try {
    await seedConversations(database.db, count);
  } finally {
    await database.close();
  }
}

/** The same rows written through a database a running server holds (the owner's account). */
export async function seedConversations(db: Db, count: number): Promise<void> {
  const owner = await findOwner(db);
  if (!owner) throw new Error('no owner account: start a server on this database once first');
  const agent = await insertAgent(db, owner.id, {
    name: `idle-${randomUUID().slice(0, 8)}`,
    description: '',
    system: '',
    runtime: 'demo',
    model: 'fountain/demo',
    sandboxProvider: 'runner',
    permissionPolicy: {},
    metadata: {},
  });
  if (!agent.ok) throw new Error('could not create the agent');
  for (let from = 0; from < count; from += BATCH) {
    const n = Math.min(BATCH, count - from);
    const sb = await db
      .insert(sandboxes)
      .values(
        Array.from({ length: n }, () => ({
          accountId: owner.id,
          provider: 'runner',
          name: `runner-${randomUUID().replaceAll('-', '')}-${randomUUID().slice(0, 8)}`,
          status: 'suspended' as const,
        })),
      )
      .returning({ id: sandboxes.id });
    const convs = await db
      .insert(conversations)
      .values(
        sb.map((s, i) => ({
          accountId: owner.id,
          agentId: agent.agent.id,
          sandboxId: s.id,
          title: `idle ${from + i}`,
          firstPrompt: 'hello',
          status: 'idle' as const,
          runtime: 'demo' as const,
          turnCount: 2,
        })),
      )
      .returning({ id: conversations.id });
    const ts = convs.flatMap((c) =>
      [1, 2].map((k) => ({
        conversationId: c.id,
        turnNumber: k,
        prompt: `prompt ${k}`,
        status: 'completed' as const,
        stopReason: 'end_turn',
        startedAt: new Date(),
        endedAt: new Date(),
      })),
    );
    const tRows = await db.insert(turns).values(ts).returning({ id: turns.id, conversationId: turns.conversationId });
    await db.insert(events).values(
      tRows.flatMap((t) => [
        {
          conversationId: t.conversationId,
          turnId: t.id,
          kind: 'stage' as const,
          stage: 'turn',
          state: 'started' as const,
          data: '{}',
        },
        ...Array.from({ length: 8 }, (_, i) => ({
          conversationId: t.conversationId,
          turnId: t.id,
          kind: 'output' as const,
          stream: 'acp' as const,
          seq: i,
          data: JSON.stringify({
            jsonrpc: '2.0',
            method: 'session/update',
            params: {
              sessionId: 's',
              update: {
                sessionUpdate: 'agent_message_chunk',
                content: { type: 'text', text: `word ${i} of an answer ` },
              },
            },
          }),
        })),
        {
          conversationId: t.conversationId,
          turnId: t.id,
          kind: 'stage' as const,
          stage: 'turn',
          state: 'done' as const,
          data: '{}',
        },
      ]),
    );
  }
}
