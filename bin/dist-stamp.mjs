// What a compiled dist/ was built from, so bin/fountain.js runs it only while the sources are unchanged.
// Shared by scripts/build.mjs (writes the stamp) and bin/fountain.js (compares it at every start), so it
// lives beside the executable: an installation without scripts/ (the container image) still has it.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const DIST = join(ROOT, 'dist');
/** Where in dist/ the build puts the bundled command (scripts/build.mjs) that bin/fountain.js runs. */
export const BUNDLE_DIR = 'bundle';
/**
 * Packages the bundle loads from node_modules: those that find their own files beside them (PGlite's
 * WebAssembly, pino's transports), node-postgres (optional native parts), the TypeScript loader and the
 * builder, and ws's optional native helpers.
 */
export const BUNDLE_EXTERNAL = [
  '@electric-sql/pglite',
  '@electric-sql/pglite/*',
  'pino',
  'pino-pretty',
  'pg',
  'tsx',
  'tsx/*',
  'esbuild',
  'bufferutil',
  'utf-8-validate',
];

/** Files whose change makes dist/ stale besides src/: the compiler's settings and the build itself. */
const EXTRA_INPUTS = ['tsconfig.json', 'scripts/build.mjs', 'bin/dist-stamp.mjs', 'bin/runner-bundle.mjs'];
const TEST = /\.test\.tsx?$/;

/**
 * The newest modification time and the number of entries under src/ (directories included: adding,
 * removing or renaming a file changes its directory's time; tests are not compiled and not counted)
 * plus EXTRA_INPUTS, a missing one counting as absent. Stats only, no reads: it runs at every start,
 * a few milliseconds for a few hundred files on an idle machine.
 */
export function sourceStamp(root = ROOT) {
  let newest = 0;
  let entries = 0;
  const visit = (path, isDir) => {
    const st = statSync(path, { throwIfNoEntry: false });
    if (st === undefined) return;
    entries++;
    if (st.mtimeMs > newest) newest = st.mtimeMs;
    if (isDir)
      for (const e of readdirSync(path, { withFileTypes: true }))
        if (!TEST.test(e.name)) visit(join(path, e.name), e.isDirectory());
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
