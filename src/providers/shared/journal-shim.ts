/**
 * The journaling shim the hosted providers (E2B, Sprites, Daytona) share: a process inside a hosted
 * sandbox whose output and exit code are journaled to files, so any later reader replays from byte zero.
 *
 * Each provider builds its shim from these pieces and keeps only its quirks in its own folder: where
 * the journal lives, how output leaves the shim (files only on E2B, a tee on Sprites, a labelled log
 * on Daytona) and how stdin and the environment arrive. The file names (`out`, `err`, `exit`, the pid
 * file) are part of each provider's sandboxes on disk: a journal written by an older release must
 * still replay, so they are never renamed here.
 */

/** POSIX single-quote quoting: safe for any byte string without NUL. */
export const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

export const quoteArgv = (argv: readonly string[]): string => argv.map(quote).join(' ');

/** A readable shell rendering of a command line, for `Session.command` only (never executed). */
export function describeCommand(cmd: string, args: readonly string[]): string {
  return [cmd, ...args].map((s) => (/^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : quote(s))).join(' ');
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Whether a variable name can be a shell assignment (an env that travels as `K='v'` lines). */
export const isShellName = (name: string): boolean => SHELL_NAME.test(name);

/**
 * The shim's last lines: the command's code (in `$<codeVar>`) is written to `$d/exit` through a
 * rename, so a reader that finds the file finds the whole number (and complete output before it),
 * and the shim exits with the same code. No exit file means no verdict: readers then report
 * `closed_before_exit`, never an invented 0. (Daytona recognises its sessions by the shim's text,
 * so this line stays byte for byte what Daytona's shim always had.)
 */
export const recordExit = (codeVar: string): string[] => [
  `printf "%s\\n" "$${codeVar}" > "$d/exit.tmp" && mv -f "$d/exit.tmp" "$d/exit"`,
  `exit "$${codeVar}"`,
];

/**
 * Follows one journal file of `$d` from byte zero until the shim (pid in `$<pidVar>`) is gone,
 * reading what was left after it ended; stderr journals go to the follower's stderr.
 */
export const followFromByteZero = (file: string, pidVar: string, stream: 'stdout' | 'stderr'): string =>
  `tail -c +1 -s 0.2 -f --pid="$${pidVar}" "$d/${file}"${stream === 'stderr' ? ' >&2' : ''}`;
