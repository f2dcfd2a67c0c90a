/**
 * The in-sandbox shell programs behind spawn and attach: a shim that journals a command's stdout,
 * stderr and exit code to files, and a replayer that streams that journal from byte zero, then tails it.
 */

/** Session ids are envd tags we mint; anything else is refused before it reaches a shell. */
export const SESSION_ID = /^fountain-s-[0-9a-f]{16}$/;

/** Journals live under the sandbox user's home, so they survive pause and go with the sandbox. */
export const JOURNAL_ROOT = '.fountain/e2b';

/** Env vars the shim carries so `List` can describe a session without a side table. */
export const ENV_COMMAND = 'FOUNTAIN_E2B_COMMAND';
export const ENV_STARTED = 'FOUNTAIN_E2B_STARTED';

/**
 * `bash -c SHIM fountain-shim <session> <cmd> <args...>`. Output is tee'd live to the stream and
 * into `out`/`err`; a pipeline (not process substitution) so both tees are flushed before `exit`
 * is written; the exit file is renamed into place so a reader never sees half a number.
 * With `pipefail` the pipeline's status is the command's unless a tee failed.
 */
export const SHIM = [
  'set -o pipefail',
  `d="$HOME/${JOURNAL_ROOT}/$1"; shift`,
  'mkdir -p "$d" && : >"$d/out" && : >"$d/err" && echo $$ >"$d/pid" || exit 125',
  '{ { "$@" 2>&1 1>&3 3>&- | tee -a "$d/err" >&2; } 3>&1 | tee -a "$d/out"; }',
  'code=$?',
  'printf %s "$code" >"$d/exit.tmp" && mv -f "$d/exit.tmp" "$d/exit"',
  'exit "$code"',
].join('\n');

/** Same, with the command's stdin closed: for a spawn that asked for no stdin. */
export const SHIM_NO_STDIN = SHIM.replace('{ { "$@" 2>&1', '{ { "$@" </dev/null 2>&1');

/**
 * `bash -c REPLAY fountain-replay <session>`. Streams `out` to stdout and `err` to stderr from
 * byte zero and follows them until the shim's pid is gone, then exits with the journaled code.
 * With no verdict on disk (the shim was killed) it kills itself, which the adapter reads as
 * `closed_before_exit` rather than inventing a code.
 */
export const REPLAY = [
  `d="$HOME/${JOURNAL_ROOT}/$1"`,
  'pid=$(cat "$d/pid" 2>/dev/null) || kill -9 $$',
  'tail -c +1 -s 0.2 -f --pid="$pid" "$d/out" & a=$!',
  'tail -c +1 -s 0.2 -f --pid="$pid" "$d/err" >&2 & b=$!',
  'wait "$a" "$b"',
  'if [ -f "$d/exit" ]; then exit "$(cat "$d/exit")"; fi',
  'kill -9 $$',
].join('\n');

/** Prints the journaled exit code, if any: how a dropped stream's real verdict is recovered. */
export const READ_EXIT = `cat "$HOME/${JOURNAL_ROOT}/$1/exit" 2>/dev/null`;

/** Exits 0 when the session's journal exists. */
export const HAS_JOURNAL = `test -f "$HOME/${JOURNAL_ROOT}/$1/pid"`;

/** A shell-quoted rendering of a command line, for `Session.command` only (never executed). */
export function describeCommand(cmd: string, args: readonly string[]): string {
  const q = (s: string) => (/^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  return [cmd, ...args].map(q).join(' ');
}
