// `npm run build` (also npm's `prepare`, so `npm install` and `npm ci` run it): compiles src/ into dist/,
// one JavaScript file per module with the same layout, so `fountain` starts without transpiling TypeScript.
// Files that are not TypeScript (migrations, static assets) are copied beside the compiled modules, so
// every path a module computes from import.meta.url means the same thing under dist/ as under src/.
import { copyFileSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { build } from 'esbuild';
import { BUNDLE_DIR, BUNDLE_EXTERNAL, ROOT, DIST, sourceStamp } from '../bin/dist-stamp.mjs';
import { REQUIRE_BANNER, buildRunnerBundle } from '../bin/runner-bundle.mjs';

const SRC = join(ROOT, 'src');
const TS = /\.tsx?$/;
const TEST = /\.test\.tsx?$/;
/** How src/acp/schemas.ts loads the ACP SDK's generated schemas (a file the SDK's export map hides). */
const ACP_GENERATED_IMPORT = "import(new URL('../schema/zod.gen.js', entry).href)";

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
  await buildCliBundle(out);
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

/**
 * What `fountain` runs (bin/fountain.js): src/cli/main.ts and what it imports, the packages included, in
 * one module per subcommand (each `import()` a chunk of its own). Node's loader costs about a third of a
 * start's CPU across ~500 files (docs/benchmarks.md, startup); here it reads a few.
 * Each source's `import.meta.url` is rewritten to its own compiled file's URL beside the bundle, so every
 * path a module computes (migrations, static files, the worker, the package root) means what it means in
 * the per-module build, which stays for workers, child processes and imports by path.
 */
async function buildCliBundle(outRoot) {
  const bundleDir = join(outRoot, BUNDLE_DIR);
  await build({
    entryPoints: [join(SRC, 'cli', 'main.ts')],
    outdir: bundleDir,
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    logLevel: 'warning',
    external: [...BUNDLE_EXTERNAL],
    banner: { js: REQUIRE_BANNER },
    plugins: [
      {
        name: 'module-url-of-the-compiled-file',
        setup(b) {
          b.onLoad({ filter: /\/src\/.*\.tsx?$/ }, async (args) => {
            let source = readFileSync(args.path, 'utf8');
            const generated = args.path === join(SRC, 'acp', 'schemas.ts');
            if (!source.includes('import.meta.url') && !generated) return undefined;
            const compiled = join(outRoot, relative(SRC, args.path)).replace(TS, '.js');
            const rel = relative(bundleDir, compiled);
            source = source.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`);
            // The ACP SDK's generated schemas, imported by URL past its export map: bundled by their path,
            // so they use the bundle's zod like the code that extends them.
            if (generated) {
              if (!source.includes(ACP_GENERATED_IMPORT))
                throw new Error(`src/acp/schemas.ts no longer has \`${ACP_GENERATED_IMPORT}\` (scripts/build.mjs)`);
              const sdk = await b.resolve('@agentclientprotocol/sdk', {
                kind: 'import-statement',
                resolveDir: dirname(args.path),
              });
              const file = join(dirname(sdk.path), '../schema/zod.gen.js');
              source = source.replace(ACP_GENERATED_IMPORT, `import(${JSON.stringify(file)})`);
            }
            return { contents: source, loader: args.path.endsWith('x') ? 'tsx' : 'ts' };
          });
        },
      },
    ],
  });
}
