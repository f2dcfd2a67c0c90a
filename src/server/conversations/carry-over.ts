/**
 * The conversation so far, as Fountain stored it, for an agent that lost its own session (a load the
 * runtime refused, a sandbox that was gone): its first prompt in the new session carries it.
 */
import type { ContentBlock } from '@agentclientprotocol/sdk';
import { replyText } from './events-store.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { listTurns } from './store.ts';

/** The most recent turns carried over, and how much of each side of one; the whole text stays bounded. */
const MAX_TURNS = 20;
const MAX_PART = 2_000;
const MAX_TOTAL = 24_000;

export const HISTORY_OPEN = '<fountain-history>';
export const HISTORY_CLOSE = '</fountain-history>';

const cap = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** The earlier turns that ended, as a transcript; null when there is none. */
export async function historyTranscript(db: EngineDb, conversationId: string): Promise<string | null> {
  const ended = (await listTurns(db, conversationId)).filter(
    (t) => t.status === 'completed' || t.status === 'failed' || t.status === 'interrupted',
  );
  if (ended.length === 0) return null;
  const lines: string[] = [];
  for (const t of ended.slice(-MAX_TURNS)) {
    const reply = await replyText(db, conversationId, t.id);
    lines.push(`User: ${cap(t.prompt, MAX_PART)}`);
    lines.push(`Agent: ${reply.trim() === '' ? `(no answer; the turn ${t.status})` : cap(reply.trim(), MAX_PART)}`);
  }
  let body = lines.join('\n\n');
  if (body.length > MAX_TOTAL) body = `…${body.slice(-MAX_TOTAL)}`;
  return [
    HISTORY_OPEN,
    'Your earlier session could not be restored, so here is this conversation so far as it was recorded. ' +
      'Treat it as what was said before; the message after this block is the new one.',
    '',
    body,
    HISTORY_CLOSE,
  ].join('\n');
}

/** The prompt's content with the transcript before it. */
export function withHistory(transcript: string, prompt: string): ContentBlock[] {
  return [
    { type: 'text', text: transcript },
    { type: 'text', text: prompt },
  ];
}
