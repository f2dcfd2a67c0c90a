/**
 * A teammate's presence: the first matching row of
 * the table wins; `machine_offline` is an idle runner sandbox whose runner is not connected.
 */
import type { ConversationStatus, SandboxStatus } from '../store/conversation-schema.ts';

export const PRESENCE_STATES = [
  'working',
  'starting',
  'online',
  'asleep',
  'away',
  'machine_offline',
  'failed',
  'offline',
] as const;
export type PresenceState = (typeof PRESENCE_STATES)[number];

export interface Presence {
  readonly state: PresenceState;
  readonly label: string;
}

export interface PresenceInput {
  readonly status: ConversationStatus;
  /** Null when the conversation has no sandbox row any more. */
  readonly sandbox: { readonly provider: string; readonly status: SandboxStatus } | null;
  /** For a runner sandbox: whether its runner is connected. Ignored for other providers (always online). */
  readonly runnerOnline: boolean;
}

export const PRESENCE_LABELS: Readonly<Record<PresenceState, string>> = {
  working: 'working',
  starting: 'starting computer',
  online: 'online',
  asleep: 'asleep · wakes on message',
  away: 'away · wakes on message',
  machine_offline: 'machine offline · wakes when the runner reconnects',
  failed: 'offline · failed',
  offline: 'offline · new computer on message',
};

const of = (state: PresenceState, label = PRESENCE_LABELS[state]): Presence => ({ state, label });

export function presenceOf(p: PresenceInput): Presence {
  const s = p.sandbox;
  switch (p.status) {
    case 'running':
      return of('working');
    case 'pending':
      return s?.status === 'ready' ? of('online', 'ready · waiting for a turn') : of('starting');
    case 'idle':
      if (s?.provider === 'runner' && !p.runnerOnline) return of('machine_offline');
      if (s?.status === 'ready' || s?.status === 'starting') return of('online');
      if (s?.status === 'suspended') return of('asleep');
      return of('away');
    case 'failed':
      return of('failed');
    default:
      return of('offline');
  }
}
