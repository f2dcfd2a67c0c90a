/**
 * A checkpoint's archive taken from a sandbox and put back into one, through the contract's exec and
 * writeFile only (so it works on every provider): the agent's HOME — its session files and the
 * workspace, a repository's .git with it — as a tar.gz, without dependency folders, caches and secrets.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Handle, SandboxAdapter } from '../../sandbox/index.ts';
import { describeError } from '../../sandbox/index.ts';
import { err, ok, type Result } from '../../sandbox/result.ts';
import { checkArchive, type ArchiveRefusal, type ArchiveSummary } from './archive.ts';

/** Left out of every checkpoint: what a reinstall or a provisioning makes again, and the secrets file. */
export const DEFAULT_EXCLUDES: readonly string[] = [
  'node_modules',
  '.cache',
  '.npm',
  '.npm-global',
  '.bun',
  '__pycache__',
  '.venv',
  // Anchored: HOME's own secrets file, which provisioning writes again; a project's .env is the user's work.
  './.env',
  // The sandbox's own temporary directory.
  './.tmp',
  // The providers' per-command state (exit files, fifos): of the sandbox that ran them, never of the next.
  './.fountain/sessions',
];

export interface CheckpointSpec {
  /** The sandbox path archived: the runtime's HOME. */
  readonly home: string;
  /** Names left out at any depth (`./name`: only at the top of HOME), on top of the archive's own working files. */
  readonly exclude: readonly string[];
  /** The largest archive taken, compressed. */
  readonly maxArchiveBytes: number;
  /** The most it may unpack to. */
  readonly maxUnpackedBytes: number;
  readonly timeoutMs: number;
}

export const DEFAULT_SPEC: Omit<CheckpointSpec, 'home'> = {
  exclude: DEFAULT_EXCLUDES,
  maxArchiveBytes: 32 * 1024 * 1024,
  maxUnpackedBytes: 512 * 1024 * 1024,
  timeoutMs: 120_000,
};

export type CheckpointFailure =
  | ArchiveRefusal
  | { readonly code: 'sandbox'; readonly message: string }
  | { readonly code: 'too_large'; readonly message: string };

/** The working file, inside HOME so nothing passes through a temporary directory other sandboxes share. */
const WORKING = '.fountain-checkpoint-';
const RESTORE = '.fountain-restore.tgz';
/** The special files (fifos, devices) found at capture, which tar would archive and a restore refuses. */
const SKIP = 'skip';

const shQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');

export async function captureArchive(
  adapter: SandboxAdapter,
  handle: Handle,
  spec: CheckpointSpec,
): Promise<Result<Buffer, CheckpointFailure>> {
  // Named per capture: two at once in one sandbox (a park's and a turn's on another node) never share one.
  const id = randomBytes(6).toString('hex');
  const WORK = `${WORKING}${id}.tgz`;
  const SKIP = `${WORKING}${id}.skip`;
  const excluded = [...spec.exclude, `./${WORKING}*`, `./${RESTORE}`];
  const excludes = excluded
    .map((x) => (x.startsWith('./') ? `--anchored --exclude=${shQuote(x)} --no-anchored` : `--exclude=${shQuote(x)}`))
    .join(' ');
  // A fifo, device or link the agent (or a provider's command shim, or an installer) left would make a
  // checkpoint every restore refuses: they are listed first (outside the excluded folders) and left out
  // by their exact names.
  const prune = excluded.map((x) => (x.startsWith('./') ? `-path ${shQuote(x)}` : `-name ${shQuote(x)}`)).join(' -o ');
  const walk = `find . \\( ${prune} \\) -prune -o`;
  // Links a restore refuses go too: an absolute target (an installer's link to the old sandbox's real
  // path, on a runner) or a relative one that climbs out of HOME.
  const climbs = `while IFS= read -r f; do r=$(realpath -m -s --relative-to=. "$(dirname "$f")/$(readlink "$f")"); case "$r" in ..|../*) printf '%s\\n' "$f";; esac; done`;
  const special = `{ ${walk} \\( -type p -o -type b -o -type c -o -type l -lname '/*' \\) -print && ${walk} -type l -lname '*..*' -print | ${climbs}; } > ${SKIP}`;
  // The archive is made and measured in one command, read in a second: a read cut short (a provider's
  // output limit) shows as a digest that differs, never as a checkpoint that silently lacks files.
  const made = await adapter.processes.exec(
    handle,
    'sh',
    [
      '-c',
      // The agent may still be writing (its session log, a temporary file): GNU tar's status 1 means only
      // that a file changed or vanished while it was read, and the archive holds the rest whole.
      `set -u; rm -f ${WORK}; ${special} || exit 2; tar --warning=no-file-changed --warning=no-file-removed --ignore-failed-read -czf ${WORK} ${excludes} --anchored --no-wildcards --exclude-from=${SKIP} --wildcards --no-anchored . ; st=$?; rm -f ${SKIP}; [ "$st" -le 1 ] || exit "$st"; echo "$(wc -c < ${WORK}) $(sha256sum ${WORK} | cut -d' ' -f1)"`,
    ],
    { dir: spec.home, timeoutMs: spec.timeoutMs, stderrToStdout: true },
  );
  if (!made.ok) return err({ code: 'sandbox', message: `could not archive the sandbox: ${describeError(made.error)}` });
  const report = /(\d+) ([0-9a-f]{64})\s*$/.exec(text(made.value.output));
  if (made.value.exitCode !== 0 || !report)
    return err({
      code: 'sandbox',
      message: `archiving the sandbox failed (exit ${made.value.exitCode}): ${text(made.value.output).slice(-300)}`,
    });
  const size = Number(report[1]);
  const read = size > spec.maxArchiveBytes ? null : await readBack(adapter, handle, spec, WORK, size, report[2]!);
  await adapter.processes.exec(handle, 'rm', ['-f', WORK], { dir: spec.home });
  if (!read)
    return err({
      code: 'too_large',
      message: `the checkpoint is ${size} bytes, over the ${spec.maxArchiveBytes}-byte limit`,
    });
  return read;
}

/**
 * The archive's bytes, as made: read raw, and where a provider's exec output is text (Daytona answers
 * it as a JSON string, so bytes that are not UTF-8 come back changed) read again as base64.
 */
async function readBack(
  adapter: SandboxAdapter,
  handle: Handle,
  spec: CheckpointSpec,
  work: string,
  size: number,
  digest: string,
): Promise<Result<Buffer, CheckpointFailure>> {
  let last = '';
  for (const [cmd, decode] of [
    ['cat', (b: Uint8Array) => Buffer.from(b)],
    ['base64 -w0', (b: Uint8Array) => Buffer.from(text(b).trim(), 'base64')],
  ] as const) {
    const read = await adapter.processes.exec(handle, 'sh', ['-c', `${cmd} ${work}`], {
      dir: spec.home,
      timeoutMs: spec.timeoutMs,
    });
    if (!read.ok) return err({ code: 'sandbox', message: `could not read the archive: ${describeError(read.error)}` });
    const data = decode(read.value.output);
    if (read.value.exitCode === 0 && data.length === size && createHash('sha256').update(data).digest('hex') === digest)
      return ok(data);
    last = `${data.length} of ${size} bytes, exit ${read.value.exitCode}`;
  }
  return err({ code: 'sandbox', message: `the archive read back is not the one made (${last})` });
}

/**
 * Unpacks a checked archive into the sandbox's HOME. Nothing is written when the archive is refused;
 * files already there are replaced by the archive's.
 */
export async function restoreArchive(
  adapter: SandboxAdapter,
  handle: Handle,
  spec: CheckpointSpec,
  data: Buffer,
): Promise<Result<ArchiveSummary, CheckpointFailure>> {
  const checked = await checkArchive(data, { maxBytes: spec.maxUnpackedBytes });
  if (!checked.ok) return checked;
  const path = `${spec.home.replace(/\/$/, '')}/${RESTORE}`;
  const written = await adapter.files.writeFile(handle, path, data, { mode: 0o600 });
  if (!written.ok)
    return err({ code: 'sandbox', message: `could not copy the checkpoint in: ${describeError(written.error)}` });
  const unpacked = await adapter.processes.exec(
    handle,
    'sh',
    ['-c', `set -eu; tar -xzf ${RESTORE} --no-same-owner --no-same-permissions; rm -f ${RESTORE}`],
    { dir: spec.home, timeoutMs: spec.timeoutMs },
  );
  if (!unpacked.ok)
    return err({ code: 'sandbox', message: `could not unpack the checkpoint: ${describeError(unpacked.error)}` });
  if (unpacked.value.exitCode !== 0)
    return err({
      code: 'sandbox',
      message: `unpacking the checkpoint failed (exit ${unpacked.value.exitCode}): ${text(unpacked.value.output).slice(-300)}`,
    });
  return ok(checked.value);
}
