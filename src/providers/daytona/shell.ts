/**
 * The shell text the adapter sends into a Daytona sandbox: the exec wrapper, and Daytona's use of the
 * shared journaling shim, which gives a command a stdin it can hold open (fed by `tail`) and an exit file.
 */
import type { EnvPairs } from '../../sandbox/index.ts';
import { isShellName, quote, quoteArgv, recordExit } from '../shared/journal-shim.ts';

export { quote, quoteArgv } from '../shared/journal-shim.ts';

/** `env K=V ... cmd args` so the environment reaches exactly this command. */
export function commandArgv(cmd: string, args: readonly string[], env: EnvPairs | undefined): string[] {
  const pairs = (env ?? []).map(([k, v]) => `${k}=${v}`);
  return pairs.length > 0 ? ['env', ...pairs, cmd, ...args] : [cmd, ...args];
}

/**
 * `/process/execute` splits its command into words and runs them without a shell, so anything
 * needing a shell is shipped as base64 and evaluated by `sh`; base64 needs no quoting at all.
 */
export function wrapForExecute(script: string): string {
  const b64 = Buffer.from(script, 'utf8').toString('base64');
  return `sh -c 'eval "$(printf %s ${b64} | base64 -d)"'`;
}

/** The exec script: stderr is merged or dropped, because Daytona merges it into `result` anyway. */
export function execScript(argv: readonly string[], dir: string | undefined, stderrToStdout: boolean): string {
  const cd = dir ? `cd ${quote(dir)} && ` : '';
  return `{ ${cd}exec ${quoteArgv(argv)}; } ${stderrToStdout ? '2>&1' : '2>/dev/null'}`;
}

/**
 * The spawn shim (bash, for process substitution and its `$!`). Arguments: state dir, working
 * dir (empty = none), stdin mode (`pipe` | `null`), then the command's argv.
 *
 * Daytona's input endpoint appends a newline and, on many daemons, ends the pipe after each
 * write; so stdin is a file in the sandbox that `tail -f` feeds in, and close_stdin kills that
 * `tail` for a real EOF. Daytona's exit codes are unreliable, so the shim writes the real one
 * to `<dir>/exit` (atomically, via rename). `<dir>/started` is the start acknowledgement spawn waits for.
 *
 * Output goes to `<dir>/log` in Daytona's own journal format (each line prefixed `\x01\x01\x01`
 * for stdout, `\x02\x02\x02` for stderr), so the poller can read only what is new with a ranged
 * download; Daytona's log endpoint returns the whole journal on every call. The labelers read
 * FIFOs (so the command stays the shim's own child) and are waited for before the exit file appears.
 */
export const SHIM = [
  'd=$1; w=$2; m=$3; shift 3',
  'mkdir -p "$d" && : >> "$d/log" || exit 125',
  'if [ "$m" = pipe ]; then : >> "$d/in"; exec 3< <(exec tail -s 0.2 -c +1 -f "$d/in" 2>/dev/null); echo $! > "$d/feeder"; else exec 3</dev/null; fi',
  'echo $$ > "$d/started"',
  'O=$(printf "\\001\\001\\001"); E=$(printf "\\002\\002\\002")',
  'rm -f "$d/o" "$d/e"; mkfifo "$d/o" "$d/e" || exit 125',
  // grep ends a last line that has no newline (so the two labelers' lines never run together)
  // without reading ahead; sed labels each line as it comes.
  `grep --line-buffered -a '' < "$d/o" | sed -u "s/^/$O/" >> "$d/log" & po=$!`,
  `grep --line-buffered -a '' < "$d/e" | sed -u "s/^/$E/" >> "$d/log" & pe=$!`,
  'if [ -n "$w" ] && ! cd -- "$w" 2>/dev/null; then c=1; : > "$d/o"; : > "$d/e"; else "$@" <&3 3<&- > "$d/o" 2> "$d/e"; c=$?; fi',
  'wait "$po" "$pe"',
  'exec 3<&-',
  'if [ -f "$d/feeder" ]; then kill "$(cat "$d/feeder")" 2>/dev/null; fi',
  ...recordExit('c'),
].join('\n');

/** Whether every variable name can be a shell assignment (spawn's env travels that way). */
export const shellNames = (env: EnvPairs | undefined): boolean => (env ?? []).every(([k]) => isShellName(k));

/**
 * The line handed to the session shell; the caller's argv stays readable at its end for list_sessions.
 * The env goes first as `K='v'` assignments: the session shell reads the line from its input and puts
 * them in the shim's environment, so the values (secrets among them) sit in no process's argv for the
 * agent's whole life, as `env K=v cmd` in the shim's arguments did. Names must pass `shellNames`.
 */
export function spawnCommand(
  stateDir: string,
  workDir: string | undefined,
  stdin: boolean,
  argv: readonly string[],
  env: EnvPairs = [],
): string {
  const assign = env.map(([k, v]) => `${k}=${quote(v)} `).join('');
  return `${assign}bash -c ${quote(SHIM)} fountain-shim ${quote(stateDir)} ${quote(workDir ?? '')} ${stdin ? 'pipe' : 'null'} ${quoteArgv(argv)}`;
}

/** The caller-visible command of a spawned session, recovered from the session command line. */
export function visibleCommand(line: string): string {
  const at = line.indexOf(`${quote(SHIM)} fountain-shim `);
  if (at < 0) return line;
  // state dir, work dir and mode are three quoted/simple words after the marker; the rest is argv.
  const rest = line.slice(at + quote(SHIM).length + ' fountain-shim '.length);
  const words = splitQuoted(rest);
  return words.slice(3).map(quote).join(' ');
}

/** Splits the output of `quoteArgv` (and bare words) back into words. */
export function splitQuoted(s: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (ch === "'") {
      inWord = true;
      const end = s.indexOf("'", i + 1);
      const stop = end < 0 ? s.length : end;
      cur += s.slice(i + 1, stop);
      i = stop;
    } else if (ch === '\\' && i + 1 < s.length) {
      inWord = true;
      cur += s[++i];
    } else if (ch === ' ') {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      inWord = true;
      cur += ch;
    }
  }
  if (inWord) out.push(cur);
  return out;
}

/** Appends one stdin chunk to the stdin file; exit 3 = the command already exited, 4 = stdin closed. */
export function appendStdinScript(stateDir: string, chunk: Uint8Array): string {
  const d = quote(stateDir);
  const b64 = Buffer.from(chunk).toString('base64');
  return `[ -e ${d}/exit ] && exit 3; [ -e ${d}/closed ] && exit 4; printf %s ${b64} | base64 -d >> ${d}/in`;
}

/** Ends the feeder for a real EOF; exit 3 = the command already exited. */
export function closeStdinScript(stateDir: string): string {
  const d = quote(stateDir);
  return `[ -e ${d}/exit ] && exit 3; : > ${d}/closed; if [ -f ${d}/feeder ]; then kill "$(cat ${d}/feeder)" 2>/dev/null; fi; exit 0`;
}

export const STDIN_EXITED = 3;
export const STDIN_CLOSED = 4;

/** Exit 0 while the shim runs or has finished properly; 9 when it is gone without a sentinel. */
export function shimAliveScript(stateDir: string): string {
  const d = quote(stateDir);
  return `[ -e ${d}/exit ] && exit 0; p=$(cat ${d}/started 2>/dev/null) || exit 0; kill -0 "$p" 2>/dev/null && exit 0; exit ${SHIM_GONE}`;
}

export const SHIM_GONE = 9;

/** NUL cannot travel through a shell word or a JSON command line into a process argv. */
export const hasNul = (parts: readonly string[]): boolean => parts.some((p) => p.includes('\0'));
