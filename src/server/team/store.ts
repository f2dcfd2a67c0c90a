/**
 * Team queries: the conversations bound to the team channel, their turns' usage and replies, the
 * account-wide event page of the team stream, and the schedule rows with their firing queue.
 */
import { streamFilter } from '../conversations/events-store.ts';
import { and, asc, desc, eq, gt, inArray, isNotNull, lte, sql, type SQL } from 'drizzle-orm';
import {
  conversations,
  events,
  sandboxes,
  turns,
  type EventRow,
  type EventStream,
  type Turn,
} from '../store/conversation-schema.ts';
import type { ConversationWithSandbox } from '../conversations/store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { scheduleRuns, schedules, TEAM_CHANNEL, type Schedule, type ScheduleRun } from '../store/team-schema.ts';

/** The account's team conversations (one agent's when given), newest first. */
export async function teamConversations(
  db: EngineDb,
  accountId: string,
  agentId?: string,
): Promise<ConversationWithSandbox[]> {
  const where: SQL[] = [
    eq(conversations.accountId, accountId),
    eq(conversations.channelId, TEAM_CHANNEL),
    isNotNull(conversations.agentId),
  ];
  if (agentId) where.push(eq(conversations.agentId, agentId));
  return db
    .select({ conversation: conversations, sandbox: sandboxes })
    .from(conversations)
    .leftJoin(sandboxes, eq(sandboxes.id, conversations.sandboxId))
    .where(and(...where))
    .orderBy(desc(conversations.insertedAt), desc(conversations.id));
}

/** conversation id → agent id of the account's team conversations. */
export async function teamConversationAgents(db: EngineDb, accountId: string): Promise<Map<string, string>> {
  const rows = await db
    .select({ id: conversations.id, agentId: conversations.agentId })
    .from(conversations)
    .where(
      and(
        eq(conversations.accountId, accountId),
        eq(conversations.channelId, TEAM_CHANNEL),
        isNotNull(conversations.agentId),
      ),
    );
  return new Map(rows.map((r) => [r.id, r.agentId!]));
}

/** Input and output tokens summed over the turns of these conversations. */
export async function usageTotal(
  db: EngineDb,
  conversationIds: readonly string[],
): Promise<{ input: number; output: number }> {
  if (conversationIds.length === 0) return { input: 0, output: 0 };
  const [row] = await db
    .select({
      input: sql<string>`coalesce(sum((${turns.usage} ->> 'input')::bigint), 0)`,
      output: sql<string>`coalesce(sum((${turns.usage} ->> 'output')::bigint), 0)`,
    })
    .from(turns)
    .where(inArray(turns.conversationId, [...conversationIds]));
  return { input: Number(row?.input ?? 0), output: Number(row?.output ?? 0) };
}

export async function lastTurn(db: EngineDb, conversationId: string): Promise<Turn | undefined> {
  const [t] = await db
    .select()
    .from(turns)
    .where(eq(turns.conversationId, conversationId))
    .orderBy(desc(turns.turnNumber))
    .limit(1);
  return t;
}

/** The conversation's latest `n` turns, newest first. */
export async function recentTurns(db: EngineDb, conversationId: string, n: number): Promise<Turn[]> {
  if (n <= 0) return [];
  return db
    .select()
    .from(turns)
    .where(eq(turns.conversationId, conversationId))
    .orderBy(desc(turns.turnNumber))
    .limit(n);
}

export async function unbindTeam(db: EngineDb, accountId: string, agentId: string): Promise<void> {
  await db
    .update(conversations)
    .set({ channelId: null, updatedAt: new Date() })
    .where(
      and(
        eq(conversations.accountId, accountId),
        eq(conversations.agentId, agentId),
        eq(conversations.channelId, TEAM_CHANNEL),
      ),
    );
}

export async function setTitle(db: EngineDb, conversationId: string, title: string | null): Promise<void> {
  await db
    .update(conversations)
    .set({ title, titleFromAgent: false, updatedAt: new Date() })
    .where(eq(conversations.id, conversationId));
}

export interface TeamEventRow {
  readonly event: EventRow;
  readonly agentId: string;
}

/** Events of every team conversation of the account after `after`, oldest first. */
export async function pageTeamEvents(
  db: EngineDb,
  accountId: string,
  q: { after: number; limit: number; streams?: ReadonlyArray<EventStream | 'stage'> | undefined },
): Promise<TeamEventRow[]> {
  const where: SQL[] = [
    eq(conversations.accountId, accountId),
    eq(conversations.channelId, TEAM_CHANNEL),
    isNotNull(conversations.agentId),
    gt(events.id, q.after),
  ];
  const streams = streamFilter(q.streams);
  if (streams) where.push(streams);
  const rows = await db
    .select({ event: events, agentId: conversations.agentId })
    .from(events)
    .innerJoin(conversations, eq(conversations.id, events.conversationId))
    .where(and(...where))
    .orderBy(asc(events.id))
    .limit(q.limit);
  return rows.map((r) => ({ event: r.event, agentId: r.agentId! }));
}

// ---------------------------------------------------------------- schedules

export async function listSchedules(db: EngineDb, accountId: string, agentId?: string): Promise<Schedule[]> {
  const where: SQL[] = [eq(schedules.accountId, accountId)];
  if (agentId) where.push(eq(schedules.agentId, agentId));
  return db
    .select()
    .from(schedules)
    .where(and(...where))
    .orderBy(asc(schedules.insertedAt), asc(schedules.id));
}

export async function getSchedule(
  db: EngineDb,
  accountId: string,
  agentId: string,
  id: string,
): Promise<Schedule | undefined> {
  const [row] = await db
    .select()
    .from(schedules)
    .where(and(eq(schedules.accountId, accountId), eq(schedules.agentId, agentId), eq(schedules.id, id)));
  return row;
}

export async function getScheduleById(db: EngineDb, id: string): Promise<Schedule | undefined> {
  const [row] = await db.select().from(schedules).where(eq(schedules.id, id));
  return row;
}

export async function insertSchedule(db: EngineDb, row: typeof schedules.$inferInsert): Promise<Schedule> {
  const [s] = await db.insert(schedules).values(row).returning();
  return s!;
}

export async function updateSchedule(
  db: EngineDb,
  id: string,
  patch: Partial<typeof schedules.$inferInsert>,
): Promise<Schedule | undefined> {
  const [s] = await db
    .update(schedules)
    .set({ ...patch, updatedAt: new Date() })
    .where(eq(schedules.id, id))
    .returning();
  return s;
}

export async function deleteSchedule(db: EngineDb, id: string): Promise<boolean> {
  const rows = await db.delete(schedules).where(eq(schedules.id, id)).returning({ id: schedules.id });
  return rows.length > 0;
}

export async function deleteAgentSchedules(db: EngineDb, accountId: string, agentId: string): Promise<string[]> {
  const rows = await db
    .delete(schedules)
    .where(and(eq(schedules.accountId, accountId), eq(schedules.agentId, agentId)))
    .returning({ id: schedules.id });
  return rows.map((r) => r.id);
}

/** Enabled schedules whose next_run_at has come. */
export async function dueSchedules(db: EngineDb, now: Date, limit: number): Promise<Schedule[]> {
  return db
    .select()
    .from(schedules)
    .where(and(eq(schedules.enabled, true), lte(schedules.nextRunAt, now)))
    .orderBy(asc(schedules.nextRunAt))
    .limit(limit);
}

/**
 * Claims one due time of a schedule: a compare-and-swap of next_run_at and the firing's queue row in
 * one transaction. Of several nodes racing for the same due time exactly one gets true.
 */
export async function claimFiring(
  db: EngineDb,
  s: Schedule,
  firedAt: Date,
  nextRunAt: Date | null,
  now: Date,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const swapped = await tx
      .update(schedules)
      .set({ nextRunAt, updatedAt: now })
      // Compared at millisecond precision: what a JavaScript Date read from the row can hold.
      .where(
        and(
          eq(schedules.id, s.id),
          eq(schedules.enabled, true),
          sql`date_trunc('milliseconds', ${schedules.nextRunAt}) = ${firedAt.toISOString()}::timestamptz`,
        ),
      )
      .returning({ id: schedules.id });
    if (swapped.length === 0) return false;
    const inserted = await tx
      .insert(scheduleRuns)
      .values({ scheduleId: s.id, firedAt, runAfter: now })
      .onConflictDoNothing()
      .returning({ id: scheduleRuns.id });
    return inserted.length > 0;
  });
}

/**
 * Takes up to `limit` pending firings whose time has come and leases them to this node until
 * `leaseUntil` (rows another node holds locked are skipped, not waited for).
 */
export async function leaseRuns(db: EngineDb, now: Date, leaseUntil: Date, limit: number): Promise<ScheduleRun[]> {
  const result = await db.execute(sql`
    UPDATE schedule_runs SET run_after = ${leaseUntil.toISOString()}::timestamptz, attempts = attempts + 1, updated_at = ${now.toISOString()}::timestamptz
    WHERE id IN (
      SELECT id FROM schedule_runs
      WHERE status = 'pending' AND run_after <= ${now.toISOString()}::timestamptz
      ORDER BY run_after
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    )
    RETURNING id`);
  const ids = (
    (result as unknown as { rows?: Array<{ id: string }> }).rows ?? (result as unknown as Array<{ id: string }>)
  ).map((r) => r.id);
  if (ids.length === 0) return [];
  return db.select().from(scheduleRuns).where(inArray(scheduleRuns.id, ids)).orderBy(asc(scheduleRuns.firedAt));
}

export async function updateRun(
  db: EngineDb,
  id: string,
  patch: Partial<typeof scheduleRuns.$inferInsert>,
): Promise<void> {
  await db
    .update(scheduleRuns)
    .set({ ...patch, updatedAt: new Date() })
    .where(eq(scheduleRuns.id, id));
}

export async function runsOf(db: EngineDb, scheduleId: string): Promise<ScheduleRun[]> {
  return db
    .select()
    .from(scheduleRuns)
    .where(eq(scheduleRuns.scheduleId, scheduleId))
    .orderBy(asc(scheduleRuns.firedAt));
}
