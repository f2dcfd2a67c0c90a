/**
 * Which runner this is: the package version from a checkout, or, in the artifact the server hands
 * out, the package version plus the first 12 hex digits of the artifact's own sha256.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// Replaced by the package version when the artifact is bundled; undeclared (typeof → 'undefined') in a checkout.
declare const FOUNTAIN_BUNDLED_VERSION: string | undefined;

/** True when this code runs as the one-file runner artifact (`fountain-runner`), not from a checkout. */
export const IS_RUNNER_ARTIFACT = typeof FOUNTAIN_BUNDLED_VERSION === 'string';

/** The version the server computes for an artifact of these bytes: `<package version>+<12 hex of sha256>`. */
export function artifactVersion(packageVersion: string, sha256: string): string {
  return `${packageVersion}+${sha256.slice(0, 12)}`;
}

let cached: string | null = null;

export function runnerVersion(): string {
  if (cached !== null) return cached;
  if (IS_RUNNER_ARTIFACT) {
    // Hashing its own file ties the version to the exact bytes the server served (no version can be baked
    // into the file whose hash it is).
    const sha = createHash('sha256')
      .update(readFileSync(fileURLToPath(import.meta.url)))
      .digest('hex');
    cached = artifactVersion(FOUNTAIN_BUNDLED_VERSION as string, sha);
  } else {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    cached = pkg.version;
  }
  return cached;
}

/** The package version of `<package>+<hash>` (or of a bare package version). */
const base = (v: string): number[] =>
  (v.split('+')[0] ?? '')
    .split('-')[0]!
    .split('.')
    .map((p) => Number.parseInt(p, 10) || 0);

/**
 * Orders two runner versions by their package version only: -1 when `a` is older, 1 when newer, 0 when
 * the package versions match (two builds of one package version differ only in their hash, and the
 * server's is the one to run).
 */
export function compareRunnerVersions(a: string, b: string): -1 | 0 | 1 {
  const x = base(a);
  const y = base(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}
