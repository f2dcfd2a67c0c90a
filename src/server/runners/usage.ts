/**
 * What runs on each runner: the account's conversations whose computer (sandbox) lives there and is not
 * gone, read from the sandbox names, which carry the runner's id (`runner-<id>-<8 hex>`).
 */
import { and, eq, inArray, like } from 'drizzle-orm';
import { conversations, sandboxes } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';

export interface RunnerLoad {
  /** Conversations with a computer on the runner, newest first (at most 5 per runner are kept). */
  readonly conversations: ReadonlyArray<{ id: string; title: string; status: string }>;
  readonly count: number;
}

export async function runnerLoads(db: EngineDb, accountId: string): Promise<Map<string, RunnerLoad>> {
  const rows = await db
    .select({
      name: sandboxes.name,
      id: conversations.id,
      title: conversations.title,
      firstPrompt: conversations.firstPrompt,
      status: conversations.status,
    })
    .from(sandboxes)
    .innerJoin(conversations, eq(conversations.sandboxId, sandboxes.id))
    .where(
      and(
        eq(sandboxes.accountId, accountId),
        like(sandboxes.name, 'runner-%'),
        inArray(sandboxes.status, ['starting', 'ready', 'suspended']),
      ),
    )
    .orderBy(conversations.lastActiveAt);
  const out = new Map<string, { conversations: Array<{ id: string; title: string; status: string }>; count: number }>();
  for (const r of rows.reverse()) {
    const hex = /^runner-([0-9a-f]{32})-/.exec(r.name)?.[1];
    if (!hex) continue;
    const runnerId = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
    const load = out.get(runnerId) ?? { conversations: [], count: 0 };
    load.count++;
    if (load.conversations.length < 5)
      load.conversations.push({
        id: r.id,
        title: (r.title ?? r.firstPrompt ?? 'New conversation').slice(0, 60),
        status: r.status,
      });
    out.set(runnerId, load);
  }
  return out;
}
