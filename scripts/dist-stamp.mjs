// What a compiled dist/ was built from, so bin/fountain.js runs it only while the sources are unchanged.
// Shared by scripts/build.mjs (writes the stamp) and bin/fountain.js (compares it at every start).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const DIST = join(ROOT, 'dist');
export const STAMP_FILE = join(DIST, '.stamp.json');

/** Files whose change makes dist/ stale besides src/: the compiler's settings and the build itself. */
const EXTRA_INPUTS = ['tsconfig.json', 'scripts/build.mjs', 'scripts/dist-stamp.mjs'];

/**
 * The newest modification time and the number of entries under src/ (directories included: adding,
 * removing or renaming a file changes its directory's time) plus EXTRA_INPUTS. Stats only, no reads:
 * it runs at every start and costs a few milliseconds for a few hundred files.
 */
export function sourceStamp(root = ROOT) {
  let newest = 0;
  let entries = 0;
  const visit = (path, isDir) => {
    const st = statSync(path);
    entries++;
    if (st.mtimeMs > newest) newest = st.mtimeMs;
    if (isDir) for (const e of readdirSync(path, { withFileTypes: true })) visit(join(path, e.name), e.isDirectory());
  };
  visit(join(root, 'src'), true);
  for (const f of EXTRA_INPUTS) visit(join(root, f), false);
  return { newestMtimeMs: newest, entries };
}

/** True when dist/ holds a build of exactly the sources present now. */
export function distIsFresh(root = ROOT) {
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(join(root, 'dist', '.stamp.json'), 'utf8'));
  } catch {
    return false;
  }
  const now = sourceStamp(root);
  return stamp.newestMtimeMs === now.newestMtimeMs && stamp.entries === now.entries;
}
