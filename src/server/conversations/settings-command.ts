/**
 * Changing a conversation's session settings: checked against what its runtime listed, stored, and sent
 * at once to its agent when this node runs it (otherwise at its next launch).
 */
import type { Agent, Conversation, SessionSettings } from '../store/conversation-schema.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import type { EngineCore, Live } from './live.ts';
import { capReason } from './reason.ts';
import { applySettings, effectiveSettings, planSettings } from './session-settings.ts';
import { getConversation, updateConversation } from './store.ts';

export interface SettingsChange {
  /** What is stored for the conversation now. */
  readonly settings: SessionSettings;
  /** Sent to the running agent now (`id=value`, `mode=id`); empty when none runs here or nothing changed. */
  readonly applied: string[];
  /** Whether an agent process took them now; false: they apply when its session next starts. */
  readonly live: boolean;
}

/** Option values merge over the stored ones; a mode replaces the stored mode. */
export function mergeSettings(stored: SessionSettings, change: SessionSettings): SessionSettings {
  const options: Record<string, string> = { ...(stored.options ?? {}) };
  for (const [k, v] of Object.entries(change.options ?? {})) options[k] = v;
  const mode = change.mode ?? stored.mode;
  return { ...(Object.keys(options).length > 0 ? { options } : {}), ...(mode !== undefined ? { mode } : {}) };
}

export async function changeSettings(
  c: EngineCore,
  accountId: string,
  id: string,
  change: SessionSettings,
): Promise<EngineResult<SettingsChange>> {
  const row = await getConversation(c.d.db, accountId, id);
  if (!row) return refuse('not_found', 'conversation not found');
  const conv = row.conversation;
  if (conv.status === 'terminated') return refuse('conversation_terminated', 'the conversation is terminated');
  const live = c.live.get(id);
  const offered = live?.offered ?? conv.sessionOffered;
  // Before the first session nothing is known of the runtime: stored, and checked when it starts.
  if (offered) {
    const first = planSettings(offered, change).refused[0];
    if (first) return refuse(first.code, first.message, { setting: change });
  }
  const settings = mergeSettings(conv.sessionSettings, change);
  await updateConversation(c.d.db, id, { sessionSettings: settings });
  if (!live?.proc?.alive || !live.offered) return accept({ settings, applied: [], live: false });
  const r = await applySettings(live.proc.client, live.offered, change, c.d.config.acpCallTimeoutMs);
  live.offered = r.offered;
  // Each call took a JSON-RPC id; a reattach replays with the next one.
  await updateConversation(c.d.db, id, { sessionOffered: r.offered, acpNextId: live.proc.client.nextRequestId });
  if (r.applied.length > 0)
    c.events.stage(id, live.turn?.id ?? null, 'session', 'done', { event: 'settings', applied: r.applied });
  if (r.failed.length > 0) return refuse('session_setting_failed', `the agent refused: ${r.failed.join('; ')}`);
  return accept({ settings, applied: r.applied, live: true });
}

/**
 * At launch: sends the settings (agent's, then the conversation's) the runtime lists; a setting it does
 * not list is said in the conversation as a `session` stage event with its code, and the launch goes on.
 */
export async function applyAtLaunch(
  c: EngineCore,
  live: Live,
  conv: Conversation,
  agent: Agent | undefined,
): Promise<void> {
  const proc = live.proc;
  if (!proc || !live.offered) return;
  const settings = effectiveSettings(agent?.sessionSettings, conv.sessionSettings);
  if (!settings.options && settings.mode === undefined) return;
  const r = await applySettings(proc.client, live.offered, settings, c.d.config.acpCallTimeoutMs);
  live.offered = r.offered;
  for (const refusal of r.refused)
    c.events.stage(conv.id, null, 'session', 'failed', { event: 'setting_refused', ...refusal });
  for (const f of r.failed)
    c.events.stage(conv.id, null, 'session', 'failed', { event: 'setting_failed', message: capReason(f) });
  if (r.applied.length > 0) c.events.stage(conv.id, null, 'session', 'done', { event: 'settings', applied: r.applied });
}
