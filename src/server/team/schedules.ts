/**
 * Schedules as a service for the schedule routes (they never query the store themselves): the team's
 * or one agent's schedules, one by its agent and id, create, change, delete. Firing is the scheduler's.
 */
import type { EngineDb } from '../store/engine-db.ts';
import type { Schedule, schedules } from '../store/team-schema.ts';
import * as store from './store.ts';

type NewSchedule = typeof schedules.$inferInsert;

/** The account's schedules (one agent's when given), oldest first. */
export const listSchedules = (db: EngineDb, accountId: string, agentId?: string): Promise<Schedule[]> =>
  store.listSchedules(db, accountId, agentId);

/** One of the account's schedules of that agent; anything else reads as absent. */
export const getSchedule = (
  db: EngineDb,
  accountId: string,
  agentId: string,
  id: string,
): Promise<Schedule | undefined> => store.getSchedule(db, accountId, agentId, id);

export const createSchedule = (db: EngineDb, row: NewSchedule): Promise<Schedule> => store.insertSchedule(db, row);

/** Changes a schedule; undefined when it is gone. */
export const updateSchedule = (db: EngineDb, id: string, patch: Partial<NewSchedule>): Promise<Schedule | undefined> =>
  store.updateSchedule(db, id, patch);

/** Deletes a schedule; false when it was already gone. */
export const deleteSchedule = (db: EngineDb, id: string): Promise<boolean> => store.deleteSchedule(db, id);
