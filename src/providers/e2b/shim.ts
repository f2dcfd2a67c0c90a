/**
 * E2B's use of the shared journaling shim: a shim that journals a command's stdout, stderr and exit
 * code to files, and a replayer that streams that journal from byte zero, then tails it. Every
 * Command's output comes through a replayer, a freshly spawned one included.
 */
import { followFromByteZero, recordExit } from '../shared/journal-shim.ts';

export { describeCommand } from '../shared/journal-shim.ts';

/** Session ids are envd tags we mint; anything else is refused before it reaches a shell. */
export const SESSION_ID = /^fountain-s-[0-9a-f]{16}$/;

/** Journals live under the sandbox user's home, so they survive pause and go with the sandbox. */
export const JOURNAL_ROOT = '.fountain/e2b';

/** Env vars the shim carries so `List` can describe a session without a side table. */
export const ENV_COMMAND = 'FOUNTAIN_E2B_COMMAND';
export const ENV_STARTED = 'FOUNTAIN_E2B_STARTED';

/**
 * `bash -c SHIM fountain-shim <session> <cmd> <args...>`. The command's stdout and stderr go to
 * `out`/`err` only, never to the shim's own stdout: envd fans a process's output out to its
 * streams, and a stream left open across a pause can wedge that fan-out for ~15 minutes
 * (infra#3292), which would block the agent on its next write. The replayer reads the files.
 * The exit file is renamed into place so a reader never sees half a number.
 */
export const SHIM = [
  `d="$HOME/${JOURNAL_ROOT}/$1"; shift`,
  'mkdir -p "$d" && : >"$d/out" && : >"$d/err" && echo $$ >"$d/pid" || exit 125',
  '"$@" >>"$d/out" 2>>"$d/err"',
  'code=$?',
  ...recordExit('code'),
].join('\n');

/** Same, with the command's stdin closed: for a spawn that asked for no stdin. */
export const SHIM_NO_STDIN = SHIM.replace('"$@" >>', '"$@" </dev/null >>');

/**
 * `bash -c REPLAY fountain-replay <session>`. Streams `out` to stdout and `err` to stderr from
 * byte zero and follows them until the shim's pid is gone, then exits with the journaled code.
 * A replayer started with its shim waits briefly for the shim to write its pid. With no verdict
 * on disk (the shim was killed) it kills itself, which the adapter reads as `closed_before_exit`
 * rather than inventing a code.
 */
export const REPLAY = [
  `d="$HOME/${JOURNAL_ROOT}/$1"`,
  'i=0; while [ ! -s "$d/pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done',
  'pid=$(cat "$d/pid" 2>/dev/null) || kill -9 $$',
  `${followFromByteZero('out', 'pid', 'stdout')} & a=$!`,
  `${followFromByteZero('err', 'pid', 'stderr')} & b=$!`,
  // Ended by the adapter (SIGTERM) once nobody reads it: take the tails along.
  `trap 'kill "$a" "$b" 2>/dev/null; exit 143' TERM`,
  'wait "$a" "$b"',
  'if [ -f "$d/exit" ]; then exit "$(cat "$d/exit")"; fi',
  'kill -9 $$',
].join('\n');
