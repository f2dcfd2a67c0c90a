/**
 * One page of an account's conversations for the conversations page: newest activity first, filtered
 * by agent and status, searched by title or first message, paged by a (last activity, id) keyset.
 */
import { and, desc, eq, ilike, inArray, or, sql, type SQL } from 'drizzle-orm';
import { z } from 'zod';
import { agents, conversations, type ConversationStatus } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';

export interface ListingFilter {
  readonly agentId?: string | undefined;
  readonly statuses?: readonly ConversationStatus[] | undefined;
  /** Matched against the title and the first message, case-insensitively. */
  readonly search?: string | undefined;
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
}

export interface ListingPage {
  readonly rows: readonly ListedConversation[];
  /** Pass as `after` for the next page; null on the last page. */
  readonly next: string | null;
}

/** PostgreSQL's text form of a timestamptz: the cursor keeps its microseconds, which a JS Date would drop. */
const cursorSchema = z.tuple([z.string().regex(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?[+-]\d\d(:\d\d)?$/), z.string().uuid()]);

/** `<time>_<id>`: opaque to the page, readable in a URL. */
export function decodeCursor(cursor: string): { at: string; id: string } | null {
  const parsed = cursorSchema.safeParse(cursor.split('_'));
  return parsed.success ? { at: parsed.data[0], id: parsed.data[1] } : null;
}

/** LIKE's own characters in a search are meant literally. */
const likePattern = (s: string): string => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export async function listConversationPage(db: EngineDb, accountId: string, f: ListingFilter): Promise<ListingPage> {
  const where: SQL[] = [eq(conversations.accountId, accountId)];
  if (f.agentId) where.push(eq(conversations.agentId, f.agentId));
  if (f.statuses && f.statuses.length > 0) where.push(inArray(conversations.status, [...f.statuses]));
  const q = f.search?.trim();
  if (q) where.push(or(ilike(conversations.title, likePattern(q)), ilike(conversations.firstPrompt, likePattern(q)))!);
  const after = f.after ? decodeCursor(f.after) : null;
  if (after) {
    // Row comparison in the index's order: strictly after the cursor row.
    where.push(sql`(${conversations.lastActiveAt}, ${conversations.id}) < (${after.at}::timestamptz, ${after.id}::uuid)`);
  }
  const rows = await db
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
      cursorAt: sql<string>`${conversations.lastActiveAt}::text`,
    })
    .from(conversations)
    .leftJoin(agents, eq(agents.id, conversations.agentId))
    .where(and(...where))
    .orderBy(desc(conversations.lastActiveAt), desc(conversations.id))
    .limit(f.limit + 1);
  const page = rows.slice(0, f.limit);
  const last = page.at(-1);
  return {
    rows: page.map(({ lastReadAt, cursorAt: _, ...r }) => ({ ...r, unread: lastReadAt === null || r.lastActiveAt > lastReadAt })),
    next: rows.length > f.limit && last ? `${last.cursorAt}_${last.id}` : null,
  };
}

/** The account's conversation count, for the page header; cheap with the account index. */
export async function countConversations(db: EngineDb, accountId: string): Promise<number> {
  const [r] = await db.select({ n: sql<number>`count(*)::int` }).from(conversations).where(eq(conversations.accountId, accountId));
  return r?.n ?? 0;
}
