/**
 * The audit log: one row per security-relevant change (keys, accounts, runners).
 * Writes go through `audit()` so every entry has the same shape.
 */
import { and, desc, eq } from 'drizzle-orm';
import type { Db } from '../store/db.ts';
import { auditLog, type AuditActor, type AuditEntry } from '../store/schema.ts';

export interface AuditInput {
  accountId: string | null;
  actor: AuditActor;
  action: string;
  subjectId?: string | null;
  data?: Record<string, unknown>;
}

export async function audit(db: Db, entry: AuditInput): Promise<void> {
  await db.insert(auditLog).values({
    accountId: entry.accountId,
    actor: entry.actor,
    action: entry.action,
    subjectId: entry.subjectId ?? null,
    data: entry.data ?? {},
  });
}

/** Newest first; optionally one action only. */
export async function listAudit(db: Db, accountId: string, action?: string): Promise<AuditEntry[]> {
  return db
    .select()
    .from(auditLog)
    .where(
      action ? and(eq(auditLog.accountId, accountId), eq(auditLog.action, action)) : eq(auditLog.accountId, accountId),
    )
    .orderBy(desc(auditLog.id));
}
