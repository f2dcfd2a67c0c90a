/**
 * The runner this server hands out: one bundled file built from this code (at `npm run build`, or here on
 * first use when no fresh build exists), with its sha256, size and version, and the install script.
 */
import { readFileSync } from 'node:fs';

export interface RunnerArtifact {
  readonly bytes: Uint8Array;
  /** `<package version>+<first 12 hex digits of sha256>`: what an installed runner reports. */
  readonly version: string;
  readonly sha256: string;
  readonly size: number;
}

interface BundleModule {
  loadRunnerArtifact(): Promise<RunnerArtifact>;
}

// The builder lives beside bin/fountain.js so scripts/build.mjs and the server share one set of bundle options.
const BUNDLE_MODULE = new URL('../../../bin/runner-bundle.mjs', import.meta.url).href;

export interface RunnerArtifacts {
  /** The artifact, built or read once per process; a failure is retried at the next call. */
  get(): Promise<RunnerArtifact>;
  /** The install script with the server's address written in. */
  installScript(serverUrl: string): string;
}

export function runnerArtifacts(): RunnerArtifacts {
  let loading: Promise<RunnerArtifact> | null = null;
  let script: string | null = null;
  return {
    get: () => {
      loading ??= (import(BUNDLE_MODULE) as Promise<BundleModule>)
        .then((m) => m.loadRunnerArtifact())
        .catch((e: unknown) => {
          loading = null;
          throw e;
        });
      return loading;
    },
    installScript: (serverUrl) => {
      script ??= readFileSync(new URL('./install.sh', import.meta.url), 'utf8');
      // The URL is checked by the caller (http(s), no quote), so it sits safely in single quotes.
      return script.replace("'@FOUNTAIN_URL@'", `'${serverUrl}'`);
    },
  };
}

/** PUBLIC_URL, else the origin the request came to: the address a runner's machine should use. */
export function serverUrlFor(publicUrl: string | null | undefined, requestUrl: string): string {
  return (publicUrl ?? new URL(requestUrl).origin).replace(/\/+$/, '');
}

/** True when the address names this machine only, so another machine cannot use it. */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
  return host === 'localhost' || host === '::1' || /^127\./.test(host) || host === '0.0.0.0';
}

/** The one line that makes a machine a runner of this server. */
export function installCommand(serverUrl: string, token: string): string {
  return `curl -fsSL ${serverUrl}/runner/install.sh | sh -s -- --token ${token}`;
}
