/**
 * Turn recovery helpers: which runner session is the conversation's agent,
 * what is left of a held permission's deadline, and the failure reasons recovery reports.
 */
import type { PermissionOption } from '@agentclientprotocol/sdk';
import type { Session } from '../../sandbox/index.ts';
import type { PendingPermission } from '../store/conversation-schema.ts';
import { conversationTag } from './agent-process.ts';

/** Why a recovery gave up; each becomes the turn's `error` and the text after "sandbox connection lost: ". */
export type RecoveryFailure =
  | 'runner_reconnect_timeout'
  | 'runner_replay_boundary_missing'
  | 'runner_replay_line_too_large'
  | 'runner_replay_truncated'
  | 'no_active_session'
  | 'list_sessions_failed'
  | 'attach_failed'
  | 'acp_session_unknown';

export interface PickedSession {
  readonly session: Session;
  /** `session_id`: the id stored at launch; `tag`: the newest session carrying the conversation's tag. */
  readonly matchedBy: 'session_id' | 'tag';
  /** Other still-running sessions of this conversation: superseded agents to reap. */
  readonly superseded: readonly Session[];
}

const tagged = (s: Session, tag: string): boolean => (s.command ?? '').split(/\s+/).includes(tag);

/** Picks the conversation's agent session by its tag, never by list position. */
export function pickSession(
  sessions: readonly Session[],
  conversationId: string,
  storedSessionId: string | null,
): PickedSession | null {
  const tag = conversationTag(conversationId);
  const mine = sessions.filter((s) => tagged(s, tag));
  const byId = storedSessionId ? mine.find((s) => s.id === storedSessionId) : undefined;
  const newest = [...mine].sort((a, b) => b.createdAt.getTime() - a.createdAt.getTime())[0];
  const session = byId ?? newest;
  if (!session) return null;
  return {
    session,
    matchedBy: byId ? 'session_id' : 'tag',
    superseded: mine.filter((s) => s.id !== session.id && s.exitCode === undefined),
  };
}

/** Still-running sessions of this conversation (before a fresh launch every one of them is superseded). */
export function runningSessionsOf(sessions: readonly Session[], conversationId: string): Session[] {
  const tag = conversationTag(conversationId);
  return sessions.filter((s) => tagged(s, tag) && s.exitCode === undefined);
}

/**
 * What is left of a held permission's ORIGINAL deadline: a reconnect never extends it.
 * A missing or unreadable `asked_at` leaves nothing, so the request is denied at once.
 */
export function permissionRemainingMs(pending: PendingPermission, askTimeoutMs: number, now: number): number {
  const asked = Date.parse(pending.asked_at);
  if (!Number.isFinite(asked)) return 0;
  return Math.max(askTimeoutMs - (now - asked), 0);
}

/** The stored options of a pending permission, back in ACP's shape. */
export function storedOptions(pending: PendingPermission): PermissionOption[] {
  return pending.options.map((o) => ({
    optionId: o.option_id,
    name: o.name,
    kind: o.kind as PermissionOption['kind'],
  }));
}
