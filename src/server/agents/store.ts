/**
 * Agent rows: one per (account, name). Queries are tenant-scoped; a foreign id reads as absent.
 */
import { and, asc, count, eq, ilike, inArray, isNull, type SQL } from 'drizzle-orm';
import {
  agents,
  conversations,
  type Agent,
  type CustomRuntime,
  type PermissionPolicy,
  type SessionSettings,
  type ModelLimits,
  type Runtime,
} from '../store/conversation-schema.ts';
import type { McpServer, Skill } from '../store/environment-schema.ts';
import { isUniqueViolation, type EngineDb } from '../store/engine-db.ts';
import { keysChanged } from '../core/key-cache-store.ts';

export interface AgentFields {
  name: string;
  description: string;
  system: string;
  runtime: Runtime;
  model: string;
  sandboxProvider: string | null;
  permissionPolicy: PermissionPolicy;
  metadata: Record<string, unknown>;
}

/** The environment an agent launches with, its skills and MCP servers; defaults when left out. */
export interface AgentEnvironmentFields {
  environmentId: string | null;
  skills: Skill[];
  mcpServers: Record<string, McpServer>;
  allowedEnvironmentIds: string[] | null;
  /** The runner it is pinned to; null: not pinned. */
  runnerId: string | null;
  /** Through the model gateway (default) or the key in the agent process's env. */
  credentialDelivery: 'gateway' | 'direct';
  /** What the model gateway holds its calls to. */
  modelLimits: ModelLimits;
  /** A custom runtime's launch; null for the built-in ones. */
  customRuntime: CustomRuntime | null;
  /** The ACP session settings its conversations start with. */
  sessionSettings: SessionSettings;
  /** The account's credential set it uses. */
  credentialSet: string;
  /** Sandboxes kept warm for its next conversations (0..WARM_POOL_MAX). */
  warmPool: number;
}

export type AgentWrite<T> = { ok: true; agent: T } | { ok: false; reason: 'name_taken' };

const escapeLike = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`);

export async function listAgents(
  db: EngineDb,
  accountId: string,
  filter: { search?: string | undefined; runtimes?: readonly string[] | undefined } = {},
): Promise<Agent[]> {
  const where: SQL[] = [eq(agents.accountId, accountId)];
  if (filter.search) where.push(ilike(agents.name, `%${escapeLike(filter.search)}%`));
  if (filter.runtimes && filter.runtimes.length > 0) where.push(inArray(agents.runtime, filter.runtimes as Runtime[]));
  return db
    .select()
    .from(agents)
    .where(and(...where))
    .orderBy(asc(agents.name));
}

export async function getAgent(db: EngineDb, accountId: string, id: string): Promise<Agent | undefined> {
  const [row] = await db
    .select()
    .from(agents)
    .where(and(eq(agents.accountId, accountId), eq(agents.id, id)));
  return row;
}

export async function findAgentByName(db: EngineDb, accountId: string, name: string): Promise<Agent | undefined> {
  const [row] = await db
    .select()
    .from(agents)
    .where(and(eq(agents.accountId, accountId), eq(agents.name, name)));
  return row;
}

export async function insertAgent(
  db: EngineDb,
  accountId: string,
  fields: AgentFields & Partial<AgentEnvironmentFields>,
): Promise<AgentWrite<Agent>> {
  try {
    const [row] = await db
      .insert(agents)
      .values({ accountId, ...fields })
      .returning();
    return { ok: true, agent: row! };
  } catch (e) {
    if (isUniqueViolation(e)) return { ok: false, reason: 'name_taken' };
    throw e;
  }
}

export async function updateAgent(
  db: EngineDb,
  accountId: string,
  id: string,
  patch: Partial<AgentFields & AgentEnvironmentFields>,
): Promise<AgentWrite<Agent | undefined>> {
  try {
    const [row] = await db
      .update(agents)
      .set({ ...patch, updatedAt: new Date() })
      .where(and(eq(agents.accountId, accountId), eq(agents.id, id)))
      .returning();
    // The model gateway remembers each agent's opened credential briefly: a changed set must be read anew.
    if (patch.credentialSet !== undefined) await keysChanged();
    return { ok: true, agent: row };
  } catch (e) {
    if (isUniqueViolation(e)) return { ok: false, reason: 'name_taken' };
    throw e;
  }
}

export async function deleteAgent(db: EngineDb, accountId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(agents)
    .where(and(eq(agents.accountId, accountId), eq(agents.id, id)))
    .returning({ id: agents.id });
  return rows.length > 0;
}

/** Conversations per agent id, for the read-only `conversation_count`. */
export async function conversationCounts(db: EngineDb, agentIds: readonly string[]): Promise<Map<string, number>> {
  if (agentIds.length === 0) return new Map();
  const rows = await db
    .select({ agentId: conversations.agentId, n: count() })
    .from(conversations)
    // Warm-pool members are not conversations yet.
    .where(and(inArray(conversations.agentId, [...agentIds]), isNull(conversations.poolAgentId)))
    .groupBy(conversations.agentId);
  return new Map(rows.filter((r) => r.agentId !== null).map((r) => [r.agentId!, Number(r.n)]));
}
