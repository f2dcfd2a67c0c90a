/**
 * What the team's routes and the web roster read (they never query the store themselves): which
 * agent each team conversation belongs to, the account's team events after a cursor, and a
 * teammate's last turn with its reply; and the team's channel name.
 */
import type { EventStream, Turn } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { replyText } from '../conversations/events-store.ts';
import { lastTurn, pageTeamEvents, teamConversationAgents, type TeamEventRow } from './store.ts';

export { TEAM_CHANNEL } from '../store/team-schema.ts';
export type { TeamEventRow } from './store.ts';

/** Team conversation id → its agent id, for the account. */
export const teamMembers = (db: EngineDb, accountId: string): Promise<Map<string, string>> =>
  teamConversationAgents(db, accountId);

/** Events of every team conversation of the account after a cursor, oldest first. */
export const teamEventPage = (
  db: EngineDb,
  accountId: string,
  q: { after: number; limit: number; streams?: ReadonlyArray<EventStream | 'stage'> | undefined },
): Promise<TeamEventRow[]> => pageTeamEvents(db, accountId, q);

/** The conversation's newest turn and the agent's reply text in it ('' when none). */
export async function lastTurnAndReply(
  db: EngineDb,
  conversationId: string,
): Promise<{ turn: Turn | null; reply: string }> {
  const turn = (await lastTurn(db, conversationId)) ?? null;
  return { turn, reply: turn ? await replyText(db, conversationId, turn.id) : '' };
}
