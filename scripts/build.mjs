// `npm run build` (also npm's `prepare`, so `npm install` and `npm ci` run it): compiles src/ into dist/,
// one JavaScript file per module with the same layout, so `fountain` starts without transpiling TypeScript.
// Files that are not TypeScript (migrations, static assets) are copied beside the compiled modules, so
// every path a module computes from import.meta.url means the same thing under dist/ as under src/.
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { build } from 'esbuild';
import { ROOT, DIST, sourceStamp } from '../bin/dist-stamp.mjs';
import { buildRunnerBundle } from '../bin/runner-bundle.mjs';

const SRC = join(ROOT, 'src');
const TS = /\.tsx?$/;
const TEST = /\.test\.tsx?$/;

// Taken before reading any source: an edit made while this runs leaves the stamp behind, so the build counts as stale.
const stamp = sourceStamp();

const entryPoints = [];
const assets = [];
const walk = (dir) => {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, e.name);
    if (e.isDirectory()) walk(full);
    else if (TEST.test(e.name)) continue;
    else if (TS.test(e.name) && !e.name.endsWith('.d.ts')) entryPoints.push(full);
    else assets.push(full);
  }
};
walk(SRC);

// Built beside dist/ and renamed into place, so a failed or interrupted build never leaves half a dist/.
const out = `${DIST}.tmp-${process.pid}`;
rmSync(out, { recursive: true, force: true });
try {
  await build({
    entryPoints,
    outdir: out,
    outbase: SRC,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // "Bundling" only to get import paths rewritten: every import stays external, each module its own file.
    bundle: true,
    sourcemap: 'linked',
    logLevel: 'warning',
    plugins: [
      {
        name: 'one-file-per-module',
        setup(b) {
          b.onResolve({ filter: /.*/ }, (args) => {
            if (args.kind === 'entry-point') return undefined;
            // Relative imports name the .ts source; the compiled sibling is .js.
            if (args.path.startsWith('.')) return { path: args.path.replace(TS, '.js'), external: true };
            return { path: args.path, external: true };
          });
        },
      },
    ],
  });
  for (const a of assets) {
    const to = join(out, relative(SRC, a));
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(a, to);
  }
  // The runner the server hands out (GET /runner/artifact), built once here rather than at a first request.
  mkdirSync(join(out, 'runner-artifact'), { recursive: true });
  writeFileSync(join(out, 'runner-artifact', 'fountain-runner.mjs'), await buildRunnerBundle(), { mode: 0o755 });
  writeFileSync(join(out, '.stamp.json'), `${JSON.stringify(stamp)}\n`);
  rmSync(DIST, { recursive: true, force: true });
  renameSync(out, DIST);
} catch (e) {
  rmSync(out, { recursive: true, force: true });
  throw e;
}
process.stderr.write(
  `fountain: compiled ${entryPoints.length} modules into ${relative(process.cwd(), DIST) || DIST}\n`,
);
