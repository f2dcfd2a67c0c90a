/**
 * How a runtime's sessions, filed under its cwd's real path, are found again from another path: the
 * shell scripts a checkpoint restored into a sandbox at a different path (another runner's directory) runs.
 */

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Claude Code files a cwd's sessions in `~/.claude/projects/<cwd, each non-alphanumeric a dash>`: moved. */
export const claudeSessionsOf = (cwd: string): string => `.claude/projects/${cwd.replace(/[^a-zA-Z0-9]/g, '-')}`;

export function claudeRelocate(fromCwd: string, toCwd: string): string {
  const from = q(claudeSessionsOf(fromCwd));
  const to = q(claudeSessionsOf(toCwd));
  return `set -eu; if [ -d ${from} ]; then mkdir -p ${to}; cp -a ${from}/. ${to}/; rm -rf ${from}; fi`;
}

/**
 * Gemini CLI (0.61) files a project's chats in `~/.gemini/tmp/<slug>/chats` (and its history in
 * `~/.gemini/history/<slug>`), each folder owned by the path in its `.project_root`; `~/.gemini/projects.json`
 * maps paths to slugs. A path it does not know takes the slug whose `.project_root` names it, so the
 * markers naming the old path are rewritten to the new one (a new slug would find no chats). The
 * registry's entry for the old path may stay: gemini adds the new path's beside it.
 */
export function geminiRelocate(fromCwd: string, toCwd: string): string {
  return [
    'set -eu',
    `from=${q(fromCwd)}; to=${q(toCwd)}`,
    'for f in .gemini/tmp/*/.project_root .gemini/history/*/.project_root; do',
    '  [ -f "$f" ] || continue',
    '  if [ "$(cat "$f")" = "$from" ]; then printf %s "$to" > "$f"; fi',
    'done',
  ].join('\n');
}

/**
 * Codex (0.147) finds a thread's rollout file through its state database (`~/.codex/state_<n>.sqlite`),
 * which records the file's absolute path: under the old HOME after a restore, so `thread/resume` fails.
 * The database is an index of the rollout files (`~/.codex/sessions`), rebuilt from them when absent:
 * it is removed, and the files it indexed stay.
 */
export function codexRelocate(): string {
  return 'set -eu; rm -f .codex/state_*.sqlite .codex/state_*.sqlite-wal .codex/state_*.sqlite-shm';
}
