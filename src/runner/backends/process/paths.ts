/**
 * Sandbox names and the /home/sprite mapping of the process backend.
 * Pure functions; the only file-system touch is checking that a directory exists.
 */
import { statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { BeneathTarget } from './write-beneath.ts';
import { SANDBOX_HOME } from '../../../sandbox/home.ts';

export { SANDBOX_HOME };

/** Null when the name is usable as a directory under the root, else why not. */
export function badSandboxName(name: string): string | null {
  if (name === '' || name.includes('/') || name.includes('\\') || name.includes('\0') || name.startsWith('.')) {
    return 'bad sandbox name';
  }
  return null;
}

/** Maps a sandbox-side path to the host: /home/sprite, ~ and relative paths land in the sandbox dir. */
export function mapPath(dir: string, path: string | undefined): string {
  const p = path ?? '';
  if (p === '' || p === SANDBOX_HOME || p === '~') return dir;
  if (p.startsWith(`${SANDBOX_HOME}/`)) return join(dir, p.slice(SANDBOX_HOME.length + 1));
  if (p.startsWith('~/')) return join(dir, p.slice(2));
  if (!isAbsolute(p)) return join(dir, p);
  return p;
}

/** Every literal /home/sprite in a command or argument becomes the sandbox directory. */
export const mapArg = (dir: string, arg: string): string => arg.split(SANDBOX_HOME).join(dir);

/** The working directory: the mapped `dir` when it is an existing directory, else the sandbox. */
export function mapCwd(dir: string, requested: string | undefined): string {
  const mapped = mapPath(dir, requested);
  try {
    if (statSync(mapped).isDirectory()) return mapped;
  } catch {
    // missing or unreadable: fall back to the sandbox itself
  }
  return dir;
}

const inside = (parent: string, child: string): boolean => {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
};

/**
 * Where write_file may land: inside the sandbox only. Never the machine's shared temp directory (a
 * file there outlives the sandbox and every sandbox sees it) nor the runner root, where the other
 * sandboxes and the journals are. Anything else is an escape and is refused.
 */
export function writablePath(dir: string, path: string): BeneathTarget | null {
  const target = resolve(mapPath(dir, path));
  if (target === dir || !inside(dir, target)) return null;
  return beneath(dir, target);
}

/** The components of `target` below `base` (both resolved, target inside base). */
export const beneath = (base: string, target: string): BeneathTarget => ({
  base,
  components: relative(base, target).split(sep),
});
