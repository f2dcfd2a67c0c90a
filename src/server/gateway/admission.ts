/**
 * Admission of a call held to a budget, atomic across server nodes: under one advisory lock per
 * account, read what was spent and is in flight, decide, and write the call as in flight with its
 * reservation; and the writes of calls' usage, each with its running totals in one transaction.
 */
import { eq, sql } from 'drizzle-orm';
import type { EngineDb } from '../store/engine-db.ts';
import { budgetRefusal, hasRate, type Refusal } from './limits.ts';
import { modelCalls, withTurn, type CallerContext, type NewModelCall } from './store.ts';
import { addToTotals, IN_FLIGHT, spent } from './totals.ts';

/** The advisory lock class the gateway's admissions take (the account's id hashed is the object). */
const ADMISSION_LOCK = 28_001;

/** Refused with the limit reached, or admitted: the in-flight row's id, to complete when the call ends. */
export type Admission = { readonly refused: Refusal } | { readonly id: string };

export function admit(
  db: EngineDb,
  caller: CallerContext,
  row: NewModelCall & { reservedTokens: number; reservedMicros: number },
  now: Date,
): Promise<Admission> {
  return db.transaction(async (tx) => {
    // Two calls for one account, on any nodes, decide one after the other: the second sees the first in flight.
    await tx.execute(sql`SELECT pg_advisory_xact_lock(${ADMISSION_LOCK}, hashtext(${caller.accountId}))`);
    const refused = budgetRefusal(caller, await spent(tx, caller, now, hasRate(caller)));
    if (refused) return { refused };
    const [ins] = await tx
      .insert(modelCalls)
      .values(withTurn({ ...row, status: IN_FLIGHT, refused: null, latencyMs: 0 }))
      .returning({ id: modelCalls.id });
    return { id: ins!.id };
  });
}

/** Completes an admitted call with what it used: from then on it counts as used, no longer as reserved. */
export function complete(db: EngineDb, id: string, done: NewModelCall): Promise<void> {
  return db.transaction(async (tx) => {
    await completeRow(tx, id, done);
    await addToTotals(tx, [done]);
  });
}

/**
 * Stores calls in one statement, with their running totals. Each one's turn is the latest of its
 * conversation's turns started by the time the call was (`createdAt`): a call belongs to the turn
 * that was running when it began.
 */
export async function recordCalls(db: EngineDb, rows: readonly NewModelCall[]): Promise<void> {
  if (rows.length === 0) return;
  await db.transaction(async (tx) => {
    await tx.insert(modelCalls).values(rows.map(withTurn));
    await addToTotals(tx, rows);
  });
}

async function completeRow(db: EngineDb, id: string, done: NewModelCall): Promise<void> {
  // Only what the call's end decides; a status of 0 (no HTTP answer has it) would leave the call in flight.
  await db
    .update(modelCalls)
    .set({
      status: done.status === IN_FLIGHT ? 599 : done.status,
      refused: done.refused ?? null,
      inputTokens: done.inputTokens ?? 0,
      outputTokens: done.outputTokens ?? 0,
      cacheReadTokens: done.cacheReadTokens ?? 0,
      cacheWriteTokens: done.cacheWriteTokens ?? 0,
      costMicros: done.costMicros ?? null,
      latencyMs: done.latencyMs,
      firstByteMs: done.firstByteMs ?? null,
    })
    .where(eq(modelCalls.id, id));
}
