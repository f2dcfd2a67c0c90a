/**
 * write_file without following links: the target is opened one component at a time beneath a base
 * directory the daemon owns, so a link the sandbox planted (file, directory, `.env`) is refused.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Result } from '../../../sandbox/result.ts';
import { err, ok } from '../../../sandbox/result.ts';
import type { WireError } from '../../backend.ts';

/** A write target: a trusted base directory and the components beneath it. */
export interface BeneathTarget {
  readonly base: string;
  readonly components: readonly string[];
  /** Owner of what is written (the sandbox's uid when the daemon writes as root for it). */
  readonly owner?: { readonly uid: number; readonly gid: number };
}

export interface WriteBeneathOptions {
  readonly mode: number;
  readonly dirMode: number;
}

const { O_RDONLY, O_WRONLY, O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
/** O_NONBLOCK: a FIFO planted at the path fails (ENXIO) instead of blocking the daemon. */
const FILE_FLAGS = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK;
/** On Linux an open directory's /proc/self/fd entry resolves like openat(2) would: no path re-walk. */
const viaFd = process.platform === 'linux';

const codeOf = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | undefined)?.code;
const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * Writes `data` at base/components…, creating missing directories, refusing with `invalid` (the
 * path in words) when any component is a symbolic link, a directory component is not a directory,
 * or the target is not a regular file with one link. Other failures are `write_failed`.
 */
export async function writeBeneath(
  target: BeneathTarget,
  shown: string,
  data: Uint8Array,
  opts: WriteBeneathOptions,
): Promise<Result<void, WireError>> {
  const parts = target.components;
  if (parts.length === 0 || parts.some((p) => p === '' || p === '.' || p === '..' || p.includes('/'))) {
    return err({ code: 'invalid', detail: `${shown}: not a file path beneath the sandbox` });
  }
  const refuse = (at: number, why: string) =>
    err({
      code: 'invalid' as const,
      detail: `${shown}: ${parts.slice(0, at + 1).join('/')} ${why}; write_file does not follow links`,
    });
  const handles: FileHandle[] = [];
  try {
    let dir: FileHandle;
    try {
      dir = await open(target.base, DIR_FLAGS);
    } catch (e) {
      return err({ code: 'write_failed', detail: `${shown}: ${message(e)}` });
    }
    handles.push(dir);
    let hostDir = target.base;
    for (let i = 0; i < parts.length - 1; i++) {
      const at = viaFd ? `/proc/self/fd/${dir.fd}/${parts[i]}` : join(hostDir, parts[i]!);
      try {
        await mkdir(at, { mode: opts.dirMode });
        if (target.owner) await chownAt(at, target.owner);
      } catch (e) {
        if (codeOf(e) !== 'EEXIST') return err({ code: 'write_failed', detail: `${shown}: ${message(e)}` });
      }
      if (!viaFd && (await lstat(at)).isSymbolicLink()) return refuse(i, 'is a symbolic link');
      try {
        dir = await open(at, DIR_FLAGS);
      } catch (e) {
        const c = codeOf(e);
        if (c === 'ELOOP') return refuse(i, 'is a symbolic link');
        // With O_DIRECTORY a link fails as ENOTDIR: lstat only chooses the words, the refusal stands.
        if (c === 'ENOTDIR') return refuse(i, (await isLink(at)) ? 'is a symbolic link' : 'is not a directory');
        return err({ code: 'write_failed', detail: `${shown}: ${message(e)}` });
      }
      handles.push(dir);
      hostDir = join(hostDir, parts[i]!);
    }
    const last = parts.length - 1;
    let file: FileHandle;
    try {
      file = await open(
        viaFd ? `/proc/self/fd/${dir.fd}/${parts[last]}` : join(hostDir, parts[last]!),
        FILE_FLAGS,
        opts.mode,
      );
    } catch (e) {
      const c = codeOf(e);
      if (c === 'ELOOP') return refuse(last, 'is a symbolic link');
      if (c === 'ENXIO' || c === 'EISDIR') return refuse(last, 'is not a regular file');
      return err({ code: 'write_failed', detail: `${shown}: ${message(e)}` });
    }
    handles.push(file);
    const st = await file.stat();
    if (!st.isFile()) return refuse(last, 'is not a regular file');
    // A hard link to a file elsewhere would be written through just like a symbolic one.
    if (st.nlink > 1) return refuse(last, 'is a hard link');
    await file.truncate(0);
    await file.writeFile(data);
    // The umask masks the mode at creation, and an existing file keeps its old one.
    await file.chmod(opts.mode);
    if (target.owner) await file.chown(target.owner.uid, target.owner.gid);
    return ok(undefined);
  } catch (e) {
    return err({ code: 'write_failed', detail: `${shown}: ${message(e)}` });
  } finally {
    for (const h of handles.reverse()) await h.close().catch(() => undefined);
  }
}

async function chownAt(path: string, owner: { uid: number; gid: number }): Promise<void> {
  const h = await open(path, DIR_FLAGS);
  try {
    await h.chown(owner.uid, owner.gid);
  } finally {
    await h.close();
  }
}

async function isLink(path: string): Promise<boolean> {
  try {
    return (await lstat(path)).isSymbolicLink();
  } catch {
    return false;
  }
}
