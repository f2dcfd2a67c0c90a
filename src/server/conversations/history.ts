/**
 * A conversation's stored record as routes and pages read it (they never query the store themselves):
 * the row with its sandbox, its turns, one page of its events; and the vocabulary of statuses and streams.
 */
import type { EventRow, Turn } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { pageEvents, type EventPageQuery } from './events-store.ts';
import { getConversation, listTurns, type ConversationWithSandbox } from './store.ts';

export { CONVERSATION_STATUSES, EVENT_STREAMS } from '../store/conversation-schema.ts';

/** One of the account's conversations with its sandbox; another account's id reads as absent. */
export const findConversation = (
  db: EngineDb,
  accountId: string,
  id: string,
): Promise<ConversationWithSandbox | undefined> => getConversation(db, accountId, id);

/** The conversation's turns, first to last. */
export const turnsOf = (db: EngineDb, conversationId: string): Promise<Turn[]> => listTurns(db, conversationId);

/** Stored events after a cursor, in id order (optionally only some streams). */
export const eventPage = (db: EngineDb, conversationId: string, q: EventPageQuery): Promise<EventRow[]> =>
  pageEvents(db, conversationId, q);
