/**
 * How the vendor stubs give each sandbox its own /home: a command runs in a private mount namespace
 * with the sandbox's home directory bound over /home, so `/home/sprite` is the sandbox's as on a vendor.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

let probe: boolean | undefined;

/** Whether `unshare --user --mount` with a bind mount works on this machine (probed once). */
export function isolationWorks(): boolean {
  if (probe === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'stub-isolation-probe-'));
    const r = spawnSync(
      'unshare',
      ['--user', '--map-current-user', '--mount', '--', '/bin/sh', '-c', 'mount --bind "$0" /home', dir],
      { stdio: 'ignore', timeout: 5000 },
    );
    rmSync(dir, { recursive: true, force: true });
    probe = r.status === 0;
  }
  return probe;
}

/**
 * Starts `cmd args` with `homeRoot` seen as /home and `cwd` (a path inside the sandbox) as its working
 * directory, through `/bin/sh -c '… exec "$@"'`: a missing binary is exit 127, a missing cwd exit 126.
 * `unshare` without `--fork` keeps the PID, so the caller's group kill still reaches the command.
 */
export function spawnIsolated(
  homeRoot: string,
  cwd: string,
  cmd: string,
  args: readonly string[],
  opts: Omit<SpawnOptions, 'cwd'>,
): ChildProcess {
  return spawn(
    'unshare',
    [
      '--user',
      '--map-current-user',
      '--mount',
      '--',
      '/bin/sh',
      '-c',
      'mount --bind "$0" /home || exit 126; cd "$1" || exit 126; shift; exec "$@"',
      homeRoot,
      cwd,
      cmd,
      ...args,
    ],
    opts,
  );
}
