/**
 * Conversation, sandbox and turn rows. Tenant-scoped reads; writes by id come from the engine,
 * which already checked the tenant.
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import { and, asc, desc, eq, inArray, isNull, lt, sql, type SQL } from 'drizzle-orm';
import {
  agents,
  conversations,
  events,
  sandboxes,
  turns,
  type Agent,
  type Conversation,
  type ConversationStatus,
  type EventRow,
  type NewEvent,
  type SandboxRow,
  type Turn,
  type TurnUsage,
} from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { eventRowOf } from './events-store.ts';

export interface ConversationWithSandbox {
  readonly conversation: Conversation;
  readonly sandbox: SandboxRow | null;
  /** Its agent's model, where the read joined it (null: the agent was deleted); the view's effective model. */
  readonly agentModel?: string | null;
}

/** A conversation with its sandbox and its agent's model, joined on the account (an agent is never another's). */
const withSandbox = { conversation: conversations, sandbox: sandboxes, agentModel: agents.model };
const agentOf = and(eq(agents.id, conversations.agentId), eq(agents.accountId, conversations.accountId));

export async function insertConversation(
  db: EngineDb,
  conv: typeof conversations.$inferInsert,
  sandbox: Omit<typeof sandboxes.$inferInsert, 'accountId'>,
): Promise<ConversationWithSandbox> {
  return db.transaction(async (tx) => {
    const [s] = await tx
      .insert(sandboxes)
      .values({ ...sandbox, accountId: conv.accountId })
      .returning();
    const [c] = await tx
      .insert(conversations)
      .values({ ...conv, sandboxId: s!.id })
      .returning();
    return { conversation: c!, sandbox: s! };
  });
}

/** A conversation on a sandbox that already exists (team rotation hands the sandbox to a successor). */
export async function insertConversationOn(
  db: EngineDb,
  conv: typeof conversations.$inferInsert,
  sandbox: SandboxRow,
): Promise<ConversationWithSandbox> {
  const [c] = await db
    .insert(conversations)
    .values({ ...conv, sandboxId: sandbox.id })
    .returning();
  return { conversation: c!, sandbox };
}

export async function getConversation(
  db: EngineDb,
  accountId: string,
  id: string,
): Promise<ConversationWithSandbox | undefined> {
  const [row] = await db
    .select(withSandbox)
    .from(conversations)
    .leftJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
    .leftJoin(agents, agentOf)
    .where(and(eq(conversations.accountId, accountId), eq(conversations.id, id)));
  return row;
}

export async function getConversationById(db: EngineDb, id: string): Promise<ConversationWithSandbox | undefined> {
  const [row] = await db
    .select({ conversation: conversations, sandbox: sandboxes })
    .from(conversations)
    .leftJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
    .where(eq(conversations.id, id));
  return row;
}

export async function listConversations(
  db: EngineDb,
  accountId: string,
  filter: { statuses?: readonly ConversationStatus[] | undefined; agentId?: string | undefined } = {},
): Promise<ConversationWithSandbox[]> {
  const where: SQL[] = [eq(conversations.accountId, accountId), isNull(conversations.poolAgentId)];
  if (filter.statuses && filter.statuses.length > 0) where.push(inArray(conversations.status, [...filter.statuses]));
  if (filter.agentId) where.push(eq(conversations.agentId, filter.agentId));
  return db
    .select(withSandbox)
    .from(conversations)
    .leftJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
    .leftJoin(agents, agentOf)
    .where(and(...where))
    .orderBy(desc(conversations.insertedAt));
}

export async function updateConversation(
  db: EngineDb,
  id: string,
  patch: Partial<typeof conversations.$inferInsert>,
): Promise<void> {
  await db
    .update(conversations)
    .set({ ...patch, updatedAt: new Date() })
    .where(eq(conversations.id, id));
}

/** The patch a turn's start writes beside the running mark (the engine's prompt: its counter, the first prompt). */
export interface RunningMark {
  readonly turnCount?: number;
  readonly firstPrompt?: string;
}

/**
 * A turn's running mark on its conversation, built once per database (a named prepared statement on
 * PostgreSQL): it runs on every turn, and drizzle otherwise rebuilds the update's SQL each time.
 * An absent field keeps the stored value.
 */
export async function markConversationRunning(
  db: EngineDb,
  id: string,
  at: Date,
  mark: RunningMark = {},
): Promise<void> {
  let q = runningMarks.get(db);
  if (!q) runningMarks.set(db, (q = prepareRunningMark(db)));
  await q.execute({
    id,
    at: at.toISOString(),
    now: new Date().toISOString(),
    turnCount: mark.turnCount ?? null,
    firstPrompt: mark.firstPrompt ?? null,
  });
}

const runningMarks = new WeakMap<EngineDb, ReturnType<typeof prepareRunningMark>>();
const prepareRunningMark = (db: EngineDb) =>
  db
    .update(conversations)
    .set({
      status: 'running',
      lastActiveAt: sql`${sql.placeholder('at')}::timestamptz`,
      updatedAt: sql`${sql.placeholder('now')}::timestamptz`,
      turnCount: sql`coalesce(${sql.placeholder('turnCount')}::integer, ${conversations.turnCount})`,
      firstPrompt: sql`coalesce(${sql.placeholder('firstPrompt')}::text, ${conversations.firstPrompt})`,
    })
    .where(eq(conversations.id, sql.placeholder('id')))
    .prepare('fountain_conversation_running');

export async function updateSandbox(
  db: EngineDb,
  id: string,
  patch: Partial<typeof sandboxes.$inferInsert>,
): Promise<void> {
  await db
    .update(sandboxes)
    .set({ ...patch, updatedAt: new Date() })
    .where(eq(sandboxes.id, id));
}

export async function insertSandbox(db: EngineDb, row: typeof sandboxes.$inferInsert): Promise<SandboxRow> {
  const [s] = await db.insert(sandboxes).values(row).returning();
  return s!;
}

export async function deleteConversationRows(db: EngineDb, id: string, sandboxId: string | null): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.delete(conversations).where(eq(conversations.id, id));
    if (!sandboxId) return;
    // A rotated sandbox is shared by its released conversations and their successor: the row goes with the last.
    const [other] = await tx
      .select({ id: conversations.id })
      .from(conversations)
      .where(eq(conversations.sandboxId, sandboxId))
      .limit(1);
    if (!other) await tx.delete(sandboxes).where(eq(sandboxes.id, sandboxId));
  });
}

/** Idle conversations whose sandbox is up and whose last activity is older than `cutoff`. */
export async function idleCandidates(db: EngineDb, cutoff: Date): Promise<ConversationWithSandbox[]> {
  return db
    .select({ conversation: conversations, sandbox: sandboxes })
    .from(conversations)
    .innerJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
    .where(
      and(eq(conversations.status, 'idle'), eq(sandboxes.status, 'ready'), lt(conversations.lastActiveAt, cutoff)),
    );
}

/** Live conversations whose ready sandbox was resumed (or else created) before `bornBefore`: max-lifetime candidates. */
export async function agedCandidates(db: EngineDb, bornBefore: Date): Promise<ConversationWithSandbox[]> {
  return db
    .select({ conversation: conversations, sandbox: sandboxes })
    .from(conversations)
    .innerJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
    .where(
      and(
        inArray(conversations.status, ['idle', 'running']),
        eq(sandboxes.status, 'ready'),
        lt(sql`coalesce(${sandboxes.lastResumedAt}, ${sandboxes.insertedAt})`, bornBefore),
      ),
    );
}

export async function insertTurn(db: EngineDb, row: typeof turns.$inferInsert): Promise<Turn> {
  const [t] = await db.insert(turns).values(row).returning();
  return t!;
}

/** A prompted turn's row, stored running: the one write before the prompt's "queued" answer. */
export interface PromptTurn {
  readonly conversationId: string;
  readonly turnNumber: number;
  readonly prompt: string;
  readonly startedAt: Date;
  readonly nodeId: string | null;
  readonly model: string | null;
}

/** The prompt's turn insert, built once per database like the prompt's read (a named prepared statement on PostgreSQL). */
export async function insertPromptTurn(db: EngineDb, row: PromptTurn): Promise<Turn> {
  let q = promptTurnInserts.get(db);
  if (!q) promptTurnInserts.set(db, (q = preparePromptTurnInsert(db)));
  const [t] = await q.execute({ ...row, startedAt: row.startedAt.toISOString() });
  return t!;
}

const promptTurnInserts = new WeakMap<EngineDb, ReturnType<typeof preparePromptTurnInsert>>();
const preparePromptTurnInsert = (db: EngineDb) =>
  db
    .insert(turns)
    .values({
      conversationId: sql`${sql.placeholder('conversationId')}::uuid`,
      turnNumber: sql`${sql.placeholder('turnNumber')}::integer`,
      prompt: sql`${sql.placeholder('prompt')}::text`,
      status: 'running',
      startedAt: sql`${sql.placeholder('startedAt')}::timestamptz`,
      nodeId: sql`${sql.placeholder('nodeId')}::text`,
      model: sql`${sql.placeholder('model')}::text`,
    })
    .returning()
    .prepare('fountain_prompt_turn');

export async function updateTurn(db: EngineDb, id: string, patch: Partial<typeof turns.$inferInsert>): Promise<void> {
  await db.update(turns).set(patch).where(eq(turns.id, id));
}

/** The acp_prompt_id write of every turn, built once per database (a named prepared statement on PostgreSQL). */
const promptIdWrites = new WeakMap<EngineDb, ReturnType<typeof preparePromptIdWrite>>();
const preparePromptIdWrite = (db: EngineDb) =>
  db
    .update(turns)
    .set({ acpPromptId: sql`${sql.placeholder('promptId')}::integer` })
    .where(eq(turns.id, sql.placeholder('turnId')))
    .prepare('fountain_turn_acp_prompt_id');

/** Records the request id the turn's prompt went out with: from here a dropped runner means recovery. */
export async function setTurnPromptId(db: EngineDb, turnId: string, promptId: number): Promise<void> {
  let q = promptIdWrites.get(db);
  if (!q) promptIdWrites.set(db, (q = preparePromptIdWrite(db)));
  await q.execute({ turnId, promptId });
}

export async function listTurns(db: EngineDb, conversationId: string): Promise<Turn[]> {
  return db.select().from(turns).where(eq(turns.conversationId, conversationId)).orderBy(asc(turns.turnNumber));
}

/** Turns left pending or running (e.g. by a server that stopped mid-turn). */
export async function openTurns(db: EngineDb, conversationId: string): Promise<Turn[]> {
  return db
    .select()
    .from(turns)
    .where(and(eq(turns.conversationId, conversationId), inArray(turns.status, ['pending', 'running'])))
    .orderBy(asc(turns.turnNumber));
}

export async function getTurn(db: EngineDb, id: string): Promise<Turn | undefined> {
  const [t] = await db.select().from(turns).where(eq(turns.id, id));
  return t;
}

/**
 * What a new prompt checks, in one round trip: the tenant's conversation with its sandbox, and
 * whether a turn is still open (queued, pending or running) on it.
 */
export async function getConversationForPrompt(
  db: EngineDb,
  accountId: string,
  id: string,
): Promise<PromptRead | undefined> {
  let q = promptReads.get(db);
  if (!q) promptReads.set(db, (q = preparePromptRead(db)));
  const [row] = await q.execute({ accountId, id });
  return row;
}

/** What a prompt needs to know of its conversation, read at once: its sandbox, an open turn, its agent (null when deleted). */
export interface PromptRead extends ConversationWithSandbox {
  readonly turnOpen: boolean;
  readonly agent: Agent | null;
}

/** The prompt's read is on the path to its "queued" answer: built once per database, like the prompt id write. */
const promptReads = new WeakMap<EngineDb, ReturnType<typeof preparePromptRead>>();
const preparePromptRead = (db: EngineDb) =>
  db
    .select({
      conversation: conversations,
      sandbox: sandboxes,
      turnOpen:
        sql<boolean>`exists (select 1 from ${turns} where ${turns.conversationId} = ${conversations.id} and ${turns.status} in ('queued', 'pending', 'running'))`.mapWith(
          Boolean,
        ),
      agent: agents,
    })
    .from(conversations)
    .leftJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
    .leftJoin(agents, and(eq(agents.id, conversations.agentId), eq(agents.accountId, conversations.accountId)))
    .where(and(eq(conversations.accountId, sql.placeholder('accountId')), eq(conversations.id, sql.placeholder('id'))))
    .prepare('fountain_conversation_for_prompt');

/** Marks a running conversation idle again; a no-op when something else (terminate, failure) changed its status meanwhile. */
export async function settleRunningConversation(
  db: EngineDb,
  id: string,
  patch: Partial<typeof conversations.$inferInsert>,
): Promise<void> {
  await db
    .update(conversations)
    .set({ ...patch, status: 'idle', updatedAt: new Date() })
    .where(and(eq(conversations.id, id), eq(conversations.status, 'running')));
}

/** `usage_total` with a turn's usage added (turns of one conversation never overlap, but nodes may). */
function usageTotalPlus(u: TurnUsage): SQL {
  const sum = (key: 'input' | 'output' | 'cache_read' | 'cache_write', n: number | undefined) =>
    sql`coalesce((${conversations.usageTotal}->>${key})::bigint, 0) + ${n ?? 0}`;
  const cost = u.cost
    ? sql`jsonb_build_object('cost', jsonb_build_object('amount', ${u.cost.amount}::float8, 'currency', ${u.cost.currency}::text))`
    : sql`'{}'::jsonb`;
  return sql`${conversations.usageTotal} || jsonb_build_object('input', ${sum('input', u.input)}, 'output', ${sum('output', u.output)}, 'cache_read', ${sum('cache_read', u.cache_read)}, 'cache_write', ${sum('cache_write', u.cache_write)}) || ${cost}`;
}

/**
 * A turn's end in one statement (one commit): the turn row's end, its conversation settled idle
 * unless something else (terminate, failure) changed its status meanwhile, and the turn's usage added
 * to the conversation's total. One UPDATE of the conversation, since a statement may change a row once.
 */
/** A turn's end: its row's patch, and its conversation's side (settled if still running, the usage added). */
export interface TurnEnd {
  readonly turnId: string;
  readonly patch: Partial<typeof turns.$inferInsert>;
  readonly conversationId: string;
  readonly settle: { readonly lastActiveAt: Date; readonly acpNextId: number | null };
  readonly usage: TurnUsage | null;
}

export async function endTurnRows(db: EngineDb, end: TurnEnd): Promise<void> {
  await db.with(settleConversation(db, end)).update(turns).set(end.patch).where(eq(turns.id, end.turnId));
}

/**
 * The same end with the turn's stage event in the same statement and commit (one statement fewer
 * per turn): the rows and the event are stored together or not at all. The event log orders it
 * (EventLog.storeWith), so its id follows every event of the turn.
 */
export async function endTurnRowsWithEvent(db: EngineDb, end: TurnEnd, event: NewEvent): Promise<EventRow> {
  const row = eventRowOf(event);
  const ended = db
    .$with('ended')
    .as(db.update(turns).set(end.patch).where(eq(turns.id, end.turnId)).returning({ id: turns.id }));
  const [stored] = await db
    .with(settleConversation(db, end), ended)
    .insert(events)
    .values({ ...row, id: undefined })
    .returning({ id: events.id });
  if (!stored || !Number.isSafeInteger(Number(stored.id)))
    throw new Error('endTurnRowsWithEvent: no event id returned');
  return { ...row, id: Number(stored.id) };
}

/** The conversation's side of a turn's end, as a CTE: settled idle if still running, usage added in any case. */
function settleConversation(db: EngineDb, { conversationId, settle, usage }: TurnEnd) {
  const running = sql`${conversations.status} = 'running'`;
  const ifRunning = (value: SQL, otherwise: SQL) => sql`case when ${running} then ${value} else ${otherwise} end`;
  return db.$with('settled').as(
    db
      .update(conversations)
      .set({
        status: sql`case when ${running} then 'idle' else ${conversations.status} end`,
        lastActiveAt: ifRunning(
          sql`${settle.lastActiveAt.toISOString()}::timestamptz`,
          sql`${conversations.lastActiveAt}`,
        ),
        acpNextId: ifRunning(sql`${settle.acpNextId}::integer`, sql`${conversations.acpNextId}`),
        updatedAt: ifRunning(sql`${new Date().toISOString()}::timestamptz`, sql`${conversations.updatedAt}`),
        ...(usage ? { usageTotal: usageTotalPlus(usage) } : {}),
      })
      // Without usage to add, a conversation no longer running is left alone.
      .where(usage ? eq(conversations.id, conversationId) : and(eq(conversations.id, conversationId), running))
      .returning({ id: conversations.id }),
  );
}

/** Takes the agent's session title unless the user gave one; true when it changed the conversation. */
export async function setAgentTitle(db: EngineDb, id: string, title: string): Promise<boolean> {
  const rows = await db
    .update(conversations)
    .set({ title, titleFromAgent: true, updatedAt: new Date() })
    .where(
      and(
        eq(conversations.id, id),
        sql`(${conversations.title} IS NULL OR ${conversations.titleFromAgent})`,
        sql`${conversations.title} IS DISTINCT FROM ${title}`,
      ),
    )
    .returning({ id: conversations.id });
  return rows.length > 0;
}

/**
 * The person has now seen everything up to the conversation's latest activity; the mark never moves
 * backwards (nor behind the activity, whatever the clocks). False when the account has no such conversation.
 */
export async function markConversationRead(db: EngineDb, accountId: string, id: string): Promise<boolean> {
  const rows = await db
    .update(conversations)
    .set({
      lastReadAt: sql`GREATEST(now(), ${conversations.lastActiveAt}, COALESCE(${conversations.lastReadAt}, ${conversations.lastActiveAt}))`,
    })
    .where(and(eq(conversations.id, id), eq(conversations.accountId, accountId)))
    .returning({ id: conversations.id });
  return rows.length > 0;
}
