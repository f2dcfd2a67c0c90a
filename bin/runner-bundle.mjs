// The runner artifact the server hands out: src/cli/runner-entry.ts and everything it imports (never the
// server) in one ESM file that needs only Node >= 20. Shared by scripts/build.mjs, which writes it into
// dist/runner/, and the server, which builds it in memory when no fresh dist/ holds one.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, distIsFresh } from './dist-stamp.mjs';

export const RUNNER_ENTRY = join(ROOT, 'src', 'cli', 'runner-entry.ts');
export const RUNNER_ARTIFACT = join(ROOT, 'dist', 'runner-artifact', 'fountain-runner.mjs');

/** The first line of an ESM bundle with CommonJS packages inside: they call require() for Node's modules. */
export const REQUIRE_BANNER =
  "import { createRequire as __fountainRequire } from 'node:module'; const require = __fountainRequire(import.meta.url);";

const readPackageVersion = () => JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

/**
 * The artifact's bytes, built from the sources (esbuild's output is the same for the same sources).
 * `packageVersion` stands in for package.json's (tests build an "older" runner with it).
 */
export async function buildRunnerBundle(packageVersion = readPackageVersion()) {
  const { build } = await import('esbuild');
  const out = await build({
    entryPoints: [RUNNER_ENTRY],
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    write: false,
    minify: true,
    legalComments: 'none',
    // ws's optional native helpers: absent, ws uses its JavaScript paths.
    external: ['bufferutil', 'utf-8-validate'],
    define: { FOUNTAIN_BUNDLED_VERSION: JSON.stringify(packageVersion) },
    banner: { js: `#!/usr/bin/env node\n${REQUIRE_BANNER}` },
    logLevel: 'warning',
  });
  return out.outputFiles[0].contents;
}

/** What the manifest says about these bytes; the version matches what the artifact computes for itself. */
export function describeRunnerArtifact(bytes, packageVersion = readPackageVersion()) {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  return { version: `${packageVersion}+${sha256.slice(0, 12)}`, sha256, size: bytes.length };
}

/** The built artifact when dist/ is a build of the sources present (or there are no sources, as in an image), else a fresh build. */
export async function loadRunnerArtifact() {
  const fromDist = existsSync(RUNNER_ARTIFACT) && (!existsSync(join(ROOT, 'src')) || distIsFresh());
  const bytes = fromDist ? new Uint8Array(readFileSync(RUNNER_ARTIFACT)) : await buildRunnerBundle();
  return { bytes, ...describeRunnerArtifact(bytes) };
}
