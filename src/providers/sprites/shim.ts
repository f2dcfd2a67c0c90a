/**
 * Sprites' use of the shared journaling shim, run around every spawned command, and its tail replayer:
 * Sprites only replays a partial scrollback tail on attach, so the sprite itself keeps each stream from byte zero.
 */
import { randomBytes } from 'node:crypto';
import { err, ok, sandboxError, type EnvPairs, type SandboxResult } from '../../sandbox/index.ts';
import { followFromByteZero, isShellName, quote, recordExit } from '../shared/journal-shim.ts';

/** `$0` of the shim; list_sessions shows it in the command line, followed by the journal key. */
export const SHIM_TAG = 'fountain-shim';
export const REPLAY_TAG = 'fountain-replay';
/** The replayer's exit code when there is no journal for the key (a TTY or foreign session). */
export const NO_JOURNAL_EXIT = 86;

// $1 is the journal key, $2 how the env arrives (`-` none; `env`: a first stdin line, then stdin is
// the command's; `env-only`: that line, then no stdin); the rest is the command. The env line is
// base64 of `export K='v'` lines, decoded by builtins and a pipe, so no value is ever in an argv.
// The exit file is written last and renamed into place, so a reader that finds it also finds
// complete output files.
const SHIM_SCRIPT = [
  'd="$HOME/.fountain/sessions/$1"; m=$2; shift 2',
  'case "$m" in env|env-only) IFS= read -r h || exit 125; eval "$(printf %s "$h" | base64 -d)" || exit 125; h=;; esac',
  'if [ "$m" = env-only ]; then exec </dev/null; fi',
  'mkdir -p "$d" || exit 125',
  'echo $$ > "$d/pid"',
  'ln -sfn "$d" "$HOME/.fountain/sessions/pid-$$" 2>/dev/null',
  'rm -f "$d/o" "$d/e"',
  'mkfifo "$d/o" "$d/e" || exit 125',
  'tee "$d/out" < "$d/o" &',
  'tee "$d/err" < "$d/e" >&2 &',
  '"$@" > "$d/o" 2> "$d/e"',
  'c=$?',
  'wait',
  ...recordExit('c'),
].join('\n');

// `tail --pid` stops following once the shim is gone, after reading what was left.
const REPLAY_SCRIPT = [
  'd="$HOME/.fountain/sessions/$1"',
  `[ -f "$d/pid" ] || exit ${NO_JOURNAL_EXIT}`,
  'p=$(cat "$d/pid")',
  `${followFromByteZero('out', 'p', 'stdout')} &`,
  `${followFromByteZero('err', 'p', 'stderr')} &`,
  'wait',
].join('\n');

const EXIT_READ_SCRIPT = 'cat "$HOME/.fountain/sessions/$1/exit"';

export const newJournalKey = (): string => randomBytes(16).toString('hex');

/**
 * Sprites' `env=` query parameter replaces the whole default environment (HOME, PATH, USER go),
 * so variables are applied with `env NAME=value cmd`, which adds to the sprite's environment.
 */
export function withEnv(cmd: string, args: readonly string[], env: EnvPairs | undefined): SandboxResult<string[]> {
  if (!cmd || cmd.includes('\0') || args.some((a) => a.includes('\0'))) return err(sandboxError('invalid', 'command'));
  if (!env || env.length === 0) return ok([cmd, ...args]);
  const assignments: string[] = [];
  for (const [k, v] of env) {
    if (!isShellName(k) || v.includes('\0')) return err(sandboxError('invalid', 'env'));
    assignments.push(`${k}=${v}`);
  }
  return ok(['env', ...assignments, cmd, ...args]);
}

/** How a shimmed command gets its env: none, or a first stdin line (`envLine`) with or without stdin after it. */
export type EnvMode = '-' | 'env' | 'env-only';

export const shimArgv = (key: string, argv: readonly string[], mode: EnvMode = '-'): string[] => [
  'sh',
  '-c',
  SHIM_SCRIPT,
  SHIM_TAG,
  key,
  mode,
  ...argv,
];

/**
 * The first stdin line of a shim whose env arrives on stdin (newline included), or null with no env.
 * A spawned agent lives for the whole conversation: `env K=v cmd` would keep every secret in the
 * shim's argv, where any process listing in the sprite (and Sprites' session listing) shows it.
 */
export function envLine(env: EnvPairs | undefined): SandboxResult<string | null> {
  if (!env || env.length === 0) return ok(null);
  const lines: string[] = [];
  for (const [k, v] of env) {
    if (!isShellName(k) || v.includes('\0')) return err(sandboxError('invalid', 'env'));
    lines.push(`export ${k}=${quote(v)}`);
  }
  return ok(`${Buffer.from(lines.join('\n'), 'utf8').toString('base64')}\n`);
}

/** The journal a session writes, from its command line (key) or else its id (the shim's PID). */
export function journalRef(sessionId: string, command: string | null | undefined): string | null {
  const m = command ? new RegExp(`${SHIM_TAG} ([0-9a-f]{32})`).exec(command) : null;
  if (m?.[1]) return m[1];
  return /^[0-9]+$/.test(sessionId) ? `pid-${sessionId}` : null;
}

export const replayArgv = (ref: string): string[] => ['sh', '-c', REPLAY_SCRIPT, REPLAY_TAG, ref];
export const exitReadArgv = (ref: string): string[] => ['sh', '-c', EXIT_READ_SCRIPT, 'fountain-exit', ref];

/** Whether a session is one of the adapter's own replayers, which callers never need to see. */
export const isReplayer = (command: string | null | undefined): boolean => !!command && command.includes(REPLAY_TAG);

/** A shimmed session's command line without the shim: what the caller spawned. */
export function displayCommand(command: string): string {
  const m = new RegExp(`${SHIM_TAG} [0-9a-f]{32} (?:(?:-|env|env-only) )?`).exec(command);
  return m ? command.slice(m.index + m[0].length) : command;
}
