/**
 * Agents as a service: what routes and web pages call (they never query the store themselves). The
 * list with its filters and conversation counts, one agent, create, update, delete; the vocabulary.
 */
import type { Agent } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import * as store from './store.ts';
import type { AgentEnvironmentFields, AgentFields, AgentWrite } from './store.ts';

export { RUNTIMES, VERDICTS } from '../store/conversation-schema.ts';
export type { AgentEnvironmentFields, AgentFields, AgentWrite } from './store.ts';
export { agentWarner, type AgentPlacement, type AgentWarning } from './warnings.ts';

export interface AgentFilter {
  readonly search?: string | undefined;
  readonly runtimes?: readonly string[] | undefined;
  /** Only agents whose environment is one of these (empty: any). */
  readonly environmentIds?: readonly string[] | undefined;
  readonly hasSkills?: boolean | undefined;
  readonly hasMcp?: boolean | undefined;
}

/** The account's agents by name; the search and runtimes are filtered by the query, the rest here. */
export async function listAgents(db: EngineDb, accountId: string, filter: AgentFilter = {}): Promise<Agent[]> {
  const rows = await store.listAgents(db, accountId, { search: filter.search, runtimes: filter.runtimes });
  const envs = filter.environmentIds;
  return rows.filter((a) => {
    if (envs && envs.length > 0 && !(a.environmentId && envs.includes(a.environmentId))) return false;
    if (filter.hasSkills !== undefined && a.skills.length > 0 !== filter.hasSkills) return false;
    if (filter.hasMcp !== undefined && Object.keys(a.mcpServers).length > 0 !== filter.hasMcp) return false;
    return true;
  });
}

/** One of the account's agents; another account's id reads as absent. */
export const getAgent = (db: EngineDb, accountId: string, id: string): Promise<Agent | undefined> =>
  store.getAgent(db, accountId, id);

/** A new agent; refused when the account already has one of that name. */
export const createAgent = (
  db: EngineDb,
  accountId: string,
  fields: AgentFields & Partial<AgentEnvironmentFields>,
): Promise<AgentWrite<Agent>> => store.insertAgent(db, accountId, fields);

/** Changes the fields given; refused on a name taken, `agent` undefined when there is no such agent. */
export const updateAgent = (
  db: EngineDb,
  accountId: string,
  id: string,
  patch: Partial<AgentFields & AgentEnvironmentFields>,
): Promise<AgentWrite<Agent | undefined>> => store.updateAgent(db, accountId, id, patch);

/** Deletes the agent (its conversations stay); false when there was none. */
export const deleteAgent = (db: EngineDb, accountId: string, id: string): Promise<boolean> =>
  store.deleteAgent(db, accountId, id);

/** Conversations per agent id (the read-only `conversation_count`). */
export const conversationCounts = (db: EngineDb, agentIds: readonly string[]): Promise<Map<string, number>> =>
  store.conversationCounts(db, agentIds);
