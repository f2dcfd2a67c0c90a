/**
 * Paths as the person reading a conversation knows them: under the sandbox's home as `~/…`, never the
 * runner's host directory the sandbox happens to live in (nor a hosted sandbox's /home/sprite).
 */
import { SANDBOX_HOME } from '../../sandbox/home.ts';

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The homes a conversation's paths may start with: its runner's host directory (if any), then the sandbox home. */
export const sandboxHomes = (conv: { sandbox?: { runner?: { path?: string | null } | null } | null }): string[] =>
  [conv.sandbox?.runner?.path ?? null, SANDBOX_HOME].filter((h): h is string => !!h && h.length > 1);

/** `text` with every `<home>/x` as `~/x` and a bare `<home>` as `~` (not a longer name that starts with it). */
export function homeRelative(text: string, homes: readonly string[]): string {
  let out = text;
  for (const h of homes) {
    if (!out.includes(h)) continue;
    out = out.split(`${h}/`).join('~/');
    out = out.replace(new RegExp(`${escape(h)}(?![\\w.-])`, 'g'), '~');
  }
  return out;
}
