/**
 * One page of an account's conversations for the conversations page: newest activity first, filtered
 * by agent, status and labels, searched by title or first message, paged by a (last activity, id) keyset.
 */
import { and, desc, eq, ilike, inArray, isNull, or, sql, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import {
  agents,
  capacityQueue,
  conversations,
  sandboxes,
  turns,
  type ConversationStatus,
} from '../store/conversation-schema.ts';
import type { ConversationWithSandbox } from './store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { listAgents } from '../agents/store.ts';
import { labelList, labelsWhere, type Label } from './labels.ts';

export { CONVERSATION_STATUSES, type ConversationStatus } from '../store/conversation-schema.ts';

export interface ListingFilter {
  readonly agentId?: string | undefined;
  readonly statuses?: readonly ConversationStatus[] | undefined;
  /** Matched against the title and the first message, case-insensitively. */
  readonly search?: string | undefined;
  /** Only conversations with activity since they were last opened (never opened counts). */
  readonly unread?: boolean | undefined;
  /** Only conversations carrying every one of these labels (a bare key: any value). */
  readonly labels?: readonly Label[] | undefined;
  /** The cursor of the previous page's last row. */
  readonly after?: string | undefined;
  readonly limit: number;
}

export interface ListedConversation {
  readonly id: string;
  readonly title: string | null;
  readonly firstPrompt: string | null;
  readonly status: ConversationStatus;
  readonly agentId: string | null;
  readonly agentName: string | null;
  readonly turnCount: number;
  readonly lastActiveAt: Date;
  readonly unread: boolean;
  /** A permission request of its open turn waits for the user's answer. */
  readonly waiting: boolean;
  /** `key` / `key=value`, sorted. */
  readonly labels: readonly string[];
  /** Its place in the capacity queue (1 = next) while a prompt of it, or it, waits; null otherwise. */
  readonly queuePosition: number | null;
}

export interface ListingPage {
  readonly rows: readonly ListedConversation[];
  /** Pass as `after` for the next page; null on the last page. */
  readonly next: string | null;
}

/** PostgreSQL's text form of a timestamptz: the cursor keeps its microseconds, which a JS Date would drop. */
const cursorSchema = z.tuple([
  z.string().regex(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?[+-]\d\d(:\d\d)?$/),
  z.string().uuid(),
]);

/** `<time>_<id>`: opaque to the page, readable in a URL. */
export function decodeCursor(cursor: string): { at: string; id: string } | null {
  const parsed = cursorSchema.safeParse(cursor.split('_'));
  return parsed.success ? { at: parsed.data[0], id: parsed.data[1] } : null;
}

/** The same rule as each row's `unread`: never opened, or active since it was last opened. */
const UNREAD = sql`(${conversations.lastReadAt} IS NULL OR ${conversations.lastActiveAt} > ${conversations.lastReadAt})`;

/** LIKE's own characters in a search are meant literally. */
const likePattern = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The page's WHERE: account, filters, and strictly after the cursor row in the index's order. */
function pageWhere(accountId: string, f: ListingFilter): SQL {
  // Warm-pool members are not conversations until taken (pool.ts).
  const where: SQL[] = [eq(conversations.accountId, accountId), isNull(conversations.poolAgentId)];
  if (f.agentId) where.push(eq(conversations.agentId, f.agentId));
  if (f.statuses && f.statuses.length > 0) where.push(inArray(conversations.status, [...f.statuses]));
  const q = f.search?.trim();
  if (q) where.push(or(ilike(conversations.title, likePattern(q)), ilike(conversations.firstPrompt, likePattern(q)))!);
  if (f.unread) where.push(UNREAD);
  if (f.labels) where.push(...labelsWhere(f.labels));
  const after = f.after ? decodeCursor(f.after) : null;
  if (after)
    where.push(
      sql`(${conversations.lastActiveAt}, ${conversations.id}) < (${after.at}::timestamptz, ${after.id}::uuid)`,
    );
  return and(...where)!;
}

const cursorAt = sql<string>`${conversations.lastActiveAt}::text`;

/** Whether one of the conversation's turns holds a permission request for the user (at most one turn is open). */
/** The row's place in its account's capacity queue, through the queue's conversation index; null when nothing waits. */
const QUEUE_POSITION = sql<
  number | null
>`(SELECT (SELECT count(*) FROM ${capacityQueue} ahead WHERE ahead.account_id = q.account_id AND (ahead.enqueued_at, ahead.id) <= (q.enqueued_at, q.id)) FROM ${capacityQueue} q WHERE q.conversation_id = ${conversations.id})`.mapWith(
  (v: unknown) => (v === null || v === undefined ? null : Number(v)),
);
const WAITING = sql<boolean>`EXISTS (SELECT 1 FROM ${turns} WHERE ${turns.conversationId} = ${conversations.id} AND ${turns.pendingPermission} IS NOT NULL)`;

/** Whether the conversation waits for the user's answer to a permission request. */
export async function waitingForApproval(db: EngineDb, conversationId: string): Promise<boolean> {
  const [r] = await db
    .select({ id: turns.id })
    .from(turns)
    .where(and(eq(turns.conversationId, conversationId), sql`${turns.pendingPermission} IS NOT NULL`))
    .limit(1);
  return r !== undefined;
}
const ORDER = [desc(conversations.lastActiveAt), desc(conversations.id)] as const;

/**
 * Runs a page query walking the activity index in order. Without fresh statistics (the embedded database
 * never autovacuums, and a busy account outgrows its last ANALYZE) the planner guesses a handful of rows,
 * reads every row of the account through a bitmap scan, joins them all and sorts: 200 ms at 10,000
 * conversations where the index walk takes 0.3 ms (docs/benchmarks.md, listing). The settings last for
 * this transaction only.
 */
async function inIndexOrder<T>(db: EngineDb, query: (tx: EngineDb) => Promise<T>): Promise<T> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`SET LOCAL enable_bitmapscan = off`);
    await tx.execute(sql`SET LOCAL enable_sort = off`);
    return query(tx as unknown as EngineDb);
  });
}

/** One row more than the page tells whether another page follows; the cursor is the last kept row's. */
function cut<T extends { cursorAt: string; id: string }>(rows: T[], limit: number): { page: T[]; next: string | null } {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return { page, next: rows.length > limit && last ? `${last.cursorAt}_${last.id}` : null };
}

export async function listConversationPage(db: EngineDb, accountId: string, f: ListingFilter): Promise<ListingPage> {
  const rows = await inIndexOrder(db, (tx) =>
    tx
      .select({
        id: conversations.id,
        title: conversations.title,
        firstPrompt: conversations.firstPrompt,
        status: conversations.status,
        agentId: conversations.agentId,
        agentName: agents.name,
        turnCount: conversations.turnCount,
        lastActiveAt: conversations.lastActiveAt,
        lastReadAt: conversations.lastReadAt,
        waiting: WAITING,
        labels: conversations.labels,
        queuePosition: QUEUE_POSITION,
        cursorAt,
      })
      .from(conversations)
      .leftJoin(agents, eq(agents.id, conversations.agentId))
      .where(pageWhere(accountId, f))
      .orderBy(...ORDER)
      .limit(f.limit + 1),
  );
  const { page, next } = cut(rows, f.limit);
  return {
    rows: page.map(({ lastReadAt, cursorAt: _, labels, ...r }) => ({
      ...r,
      labels: labelList(labels),
      unread: lastReadAt === null || r.lastActiveAt > lastReadAt,
    })),
    next,
  };
}

/** The same page as whole rows with their sandboxes, for the API's paged `GET /api/conversations`. */
export async function listConversationRowsPage(
  db: EngineDb,
  accountId: string,
  f: ListingFilter,
): Promise<{ rows: ConversationWithSandbox[]; next: string | null }> {
  const rows = await inIndexOrder(db, (tx) =>
    tx
      .select({
        conversation: conversations,
        sandbox: sandboxes,
        agentModel: agents.model,
        cursorAt,
        id: conversations.id,
      })
      .from(conversations)
      .leftJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
      .leftJoin(agents, and(eq(agents.id, conversations.agentId), eq(agents.accountId, conversations.accountId)))
      .where(pageWhere(accountId, f))
      .orderBy(...ORDER)
      .limit(f.limit + 1),
  );
  const { page, next } = cut(rows, f.limit);
  return {
    rows: page.map((r) => ({ conversation: r.conversation, sandbox: r.sandbox, agentModel: r.agentModel })),
    next,
  };
}

/** The account's conversation count, for the page header; cheap with the account index. */
export async function countConversations(db: EngineDb, accountId: string): Promise<number> {
  const [r] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(conversations)
    .where(and(eq(conversations.accountId, accountId), isNull(conversations.poolAgentId)));
  return r?.n ?? 0;
}

/** The account's agents as the page's agent filter and "new conversation" choice name them. */
export async function agentChoices(db: EngineDb, accountId: string): Promise<Array<{ id: string; name: string }>> {
  return (await listAgents(db, accountId)).map((a) => ({ id: a.id, name: a.name }));
}
