/**
 * Session settings: ACP config option values and a mode, chosen per agent and per conversation, checked
 * against what the runtime listed at session start and sent with session/set_config_option or set_mode.
 */
import type { SessionConfigOption, SessionModeState } from '@agentclientprotocol/sdk';
import type { AcpClient } from '../../acp/index.ts';
import { acpError } from '../../acp/errors.ts';
import { err } from '../../sandbox/index.ts';
import type { SessionOffered, SessionSettings } from '../store/conversation-schema.ts';
import { withTimeout } from './live.ts';

const late = (method: string, ms: number) => () =>
  err(acpError('acp_closed', `${method} got no reply within ${ms} ms`));

/** A setting the runtime does not list, in words, with its code. */
export interface SettingRefusal {
  readonly code: 'session_option_not_listed' | 'session_option_value_not_listed' | 'session_mode_not_listed';
  readonly message: string;
}

/** What a runtime listed in its session/new or session/load answer. */
export function offeredFrom(
  options: readonly SessionConfigOption[] | null | undefined,
  modes: SessionModeState | null | undefined,
): SessionOffered {
  return {
    options: (options ?? []).map((o) => ({
      id: o.id,
      name: o.name,
      type: o.type,
      values:
        o.type === 'select' ? o.options.flatMap((g) => ('options' in g ? g.options : [g])).map((v) => v.value) : [],
      current: o.type === 'select' ? o.currentValue : o.type === 'boolean' ? o.currentValue : null,
    })),
    modes: (modes?.availableModes ?? []).map((m) => ({ id: m.id, name: m.name })),
    currentMode: modes?.currentModeId ?? null,
  };
}

/** The conversation's settings over its agent's: option by option, and its mode if it names one. */
export function effectiveSettings(
  agent: SessionSettings | undefined,
  conv: SessionSettings | undefined,
): SessionSettings {
  const options = { ...(agent?.options ?? {}), ...(conv?.options ?? {}) };
  const mode = conv?.mode ?? agent?.mode;
  return { ...(Object.keys(options).length > 0 ? { options } : {}), ...(mode !== undefined ? { mode } : {}) };
}

const listed = (values: readonly string[]) => (values.length > 0 ? values.join(', ') : 'none');

/**
 * How each setting would be sent, or why it cannot be: an option the runtime does not list, a value
 * its select does not offer, a mode it has neither as a mode nor as a `mode` option.
 */
export function planSettings(
  offered: SessionOffered,
  settings: SessionSettings,
): {
  sends: Array<{ kind: 'option'; id: string; value: string } | { kind: 'mode'; id: string }>;
  refused: SettingRefusal[];
} {
  const sends: Array<{ kind: 'option'; id: string; value: string } | { kind: 'mode'; id: string }> = [];
  const refused: SettingRefusal[] = [];
  for (const [id, value] of Object.entries(settings.options ?? {})) {
    const opt = offered.options.find((o) => o.id === id);
    if (!opt) {
      refused.push({
        code: 'session_option_not_listed',
        message: `the runtime does not list a session option ${JSON.stringify(id)} (it lists: ${listed(offered.options.map((o) => o.id))})`,
      });
    } else if (opt.type === 'select' && !opt.values.includes(value)) {
      refused.push({
        code: 'session_option_value_not_listed',
        message: `the session option ${id} has no value ${JSON.stringify(value)} (it lists: ${listed(opt.values)})`,
      });
    } else if (opt.current !== value) sends.push({ kind: 'option', id, value });
  }
  if (settings.mode !== undefined) {
    const mode = settings.mode;
    const modeOption = offered.options.find((o) => o.id === 'mode');
    if (offered.modes.some((m) => m.id === mode)) {
      if (offered.currentMode !== mode) sends.push({ kind: 'mode', id: mode });
    } else if (modeOption?.values.includes(mode)) {
      if (modeOption.current !== mode) sends.push({ kind: 'option', id: 'mode', value: mode });
    } else {
      refused.push({
        code: 'session_mode_not_listed',
        message: `the runtime does not list a session mode ${JSON.stringify(mode)} (it lists: ${listed(offered.modes.map((m) => m.id))})`,
      });
    }
  }
  return { sends, refused };
}

/**
 * Sends what `planSettings` allows, one call at a time; returns what the runtime now lists, the refusals
 * and the calls the runtime itself failed (their ACP error in words).
 */
export async function applySettings(
  client: AcpClient,
  offered: SessionOffered,
  settings: SessionSettings,
  timeoutMs: number,
): Promise<{ offered: SessionOffered; refused: SettingRefusal[]; failed: string[]; applied: string[] }> {
  const { sends, refused } = planSettings(offered, settings);
  let now = offered;
  const failed: string[] = [];
  const applied: string[] = [];
  for (const s of sends) {
    if (s.kind === 'option') {
      const r = await withTimeout(
        client.setConfigOption(s.id, s.value),
        timeoutMs,
        late('session/set_config_option', timeoutMs),
      );
      if (!r.ok) failed.push(`session/set_config_option ${s.id}=${s.value}: ${r.error.message}`);
      else {
        applied.push(`${s.id}=${s.value}`);
        const answered = r.value.configOptions;
        now = answered
          ? {
              ...offeredFrom(answered, null),
              modes: now.modes,
              currentMode: s.id === 'mode' ? s.value : now.currentMode,
            }
          : { ...now, options: now.options.map((o) => (o.id === s.id ? { ...o, current: s.value } : o)) };
      }
    } else {
      const r = await withTimeout(client.setMode(s.id), timeoutMs, late('session/set_mode', timeoutMs));
      if (!r.ok) failed.push(`session/set_mode ${s.id}: ${r.error.message}`);
      else {
        applied.push(`mode=${s.id}`);
        now = { ...now, currentMode: s.id };
      }
    }
  }
  return { offered: now, refused, failed, applied };
}
