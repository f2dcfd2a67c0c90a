/**
 * A new namespace sandbox's npm cache, seeded from the runner's warm one (`--npm-cache`): hard links
 * to its immutable content, in directories of the sandbox's own, so installs work offline and stay local.
 */
import { copyFile, link, lstat, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Seeds `target` (the sandbox's `~/.npm`) from `cache/_cacache` when the sandbox has no cache yet;
 * true when it did. npm writes a cache atomically (a new file, then a rename), so a linked file is
 * never changed in place; one on another file system is copied instead.
 */
export async function seedNpmCache(cache: string, target: string): Promise<boolean> {
  const from = join(cache, '_cacache');
  try {
    await lstat(target);
    return false; // the sandbox has its own cache already (a wake, or its own npm runs)
  } catch {
    // absent: seed it
  }
  try {
    if (!(await lstat(from)).isDirectory()) return false;
  } catch {
    return false; // no warm cache (yet): npm fills the sandbox's own as usual
  }
  await mkdir(target, { recursive: true, mode: 0o755 });
  await linkTree(from, join(target, '_cacache'));
  return true;
}

async function linkTree(from: string, to: string): Promise<void> {
  await mkdir(to, { mode: 0o755 });
  for (const e of await readdir(from, { withFileTypes: true })) {
    const a = join(from, e.name);
    const b = join(to, e.name);
    if (e.isDirectory()) await linkTree(a, b);
    else if (e.isFile()) {
      try {
        await link(a, b);
      } catch {
        await copyFile(a, b);
      }
    }
  }
}
