/**
 * The Drizzle tables of the team's schedules: one row per schedule, one per firing (schedule_runs).
 * Mirrored by migrations/0040_team.sql, which also holds the foreign keys.
 */
import { boolean, integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** The reserved channel that makes a conversation an agent's teammate (one live per agent). */
export const TEAM_CHANNEL = 'fountain:team';

export const schedules = pgTable('schedules', {
  id: uuid('id').primaryKey().defaultRandom(),
  accountId: uuid('account_id').notNull(),
  agentId: uuid('agent_id').notNull(),
  name: text('name'),
  cron: text('cron').notNull(),
  prompt: text('prompt').notNull(),
  oneOff: boolean('one_off').notNull().default(false),
  enabled: boolean('enabled').notNull().default(true),
  nextRunAt: ts('next_run_at'),
  lastRunAt: ts('last_run_at'),
  lastConversationId: uuid('last_conversation_id'),
  lastError: text('last_error'),
  insertedAt: ts('inserted_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

export const RUN_STATUSES = ['pending', 'delivered', 'given_up'] as const;

export const scheduleRuns = pgTable('schedule_runs', {
  id: uuid('id').primaryKey().defaultRandom(),
  scheduleId: uuid('schedule_id').notNull(),
  firedAt: ts('fired_at').notNull(),
  runAfter: ts('run_after').notNull(),
  attempts: integer('attempts').notNull().default(0),
  status: text('status', { enum: RUN_STATUSES }).notNull().default('pending'),
  conversationId: uuid('conversation_id'),
  error: text('error'),
  insertedAt: ts('inserted_at').notNull().defaultNow(),
  updatedAt: ts('updated_at').notNull().defaultNow(),
});

export type Schedule = typeof schedules.$inferSelect;
export type ScheduleRun = typeof scheduleRuns.$inferSelect;
