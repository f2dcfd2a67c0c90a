/**
 * The child environment of the process backend and bare-command
 * resolution against the child's PATH, so a missing command surfaces as exit 127.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { delimiter, join } from 'node:path';
import { RUNTIME_STORE_ENV } from '../../../sandbox/home.ts';

export interface EnvInputs {
  /** The daemon's own environment: only PATH, LANG, TERM, SHELL and RUNNER_SELF_ENV are read from it. */
  readonly base: Readonly<Record<string, string | undefined>>;
  /** The daemon user's real home (not the sandbox's). */
  readonly realHome: string;
  /** USER inside the sandbox; default the daemon's. */
  readonly user?: string;
  /** TMPDIR inside the sandbox; default the daemon's, else /tmp. */
  readonly tmpdir?: string;
  /** The npm cache sandboxes install through; default `<realHome>/.npm` (`fountain runner --npm-cache`). */
  readonly npmCache?: string;
  /** Where sandboxes share one install of each agent adapter version (`fountain runner --runtime-store`); none when absent. */
  readonly runtimeStore?: string;
  /** Which extra directories exist; injectable so tests need not touch /opt. */
  readonly exists?: (path: string) => boolean;
}

/** What every sandboxed command gets beyond the request's own pairs; nothing else of the daemon's environment. */
/**
 * Set by `fountain runner` on itself: `[node, script]`, how the daemon runs. Sandboxes get it as
 * FOUNTAIN_RUNNER_NODE and FOUNTAIN_RUNNER_SCRIPT, which the demo agent's launch prefers to the server's paths.
 */
export const RUNNER_SELF_ENV = 'FOUNTAIN_RUNNER_SELF';

function runnerSelf(raw: string | undefined): [string, string] | null {
  if (!raw) return null;
  try {
    const v: unknown = JSON.parse(raw);
    return Array.isArray(v) && v.length === 2 && v.every((x) => typeof x === 'string' && x.startsWith('/'))
      ? [v[0] as string, v[1] as string]
      : null;
  } catch {
    return null;
  }
}

export const BASE_ENV_KEYS = ['PATH', 'HOME', 'LANG', 'TERM', 'USER', 'SHELL', 'TMPDIR'] as const;

/**
 * Where the machine's extra TLS trust anchors are: paths to public CA bundles, never a secret. Behind a
 * TLS-intercepting proxy (common on company networks) npm cannot reach the registry without them, so
 * provisioning could not install an agent.
 */
export const TRUST_ENV_KEYS = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR'] as const;

/**
 * The child environment: a fixed base, the sandbox layout (`npm_config_*`, FOUNTAIN_SANDBOX_DIR),
 * then the request's pairs. The daemon's own variables (its key, the shell's cloud credentials,
 * a server's settings under `fountain up`) never reach a sandbox: it holds only what it is given.
 */
export function childEnv(
  dir: string,
  pairs: readonly (readonly string[])[],
  inputs: EnvInputs,
): Record<string, string> {
  const exists = inputs.exists ?? existsSync;
  const b = inputs.base;
  const path = [join(dir, '.local/bin'), join(dir, '.npm-global/bin'), join(dir, '.bun/bin')];
  for (const p of (b.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(delimiter))
    if (p !== '' && !path.includes(p)) path.push(p);
  const extras = [
    '/opt/homebrew/bin',
    '/usr/local/bin',
    join(inputs.realHome, '.local/bin'),
    join(inputs.realHome, '.bun/bin'),
  ];
  for (const p of extras) if (!path.includes(p) && exists(p)) path.push(p);
  const env: Record<string, string> = {
    PATH: path.join(delimiter),
    HOME: dir,
    LANG: b.LANG || 'C.UTF-8',
    TERM: b.TERM || 'dumb',
    USER: inputs.user ?? (b.USER || daemonUser()),
    SHELL: b.SHELL || '/bin/sh',
    TMPDIR: inputs.tmpdir ?? (b.TMPDIR || '/tmp'),
    npm_config_prefix: join(dir, '.npm-global'),
    npm_config_cache: inputs.npmCache ?? join(inputs.realHome, '.npm'),
    FOUNTAIN_SANDBOX_DIR: dir,
  };
  if (inputs.runtimeStore) env[RUNTIME_STORE_ENV] = inputs.runtimeStore;
  for (const k of TRUST_ENV_KEYS) if (b[k]) env[k] = b[k];
  const self = runnerSelf(b[RUNNER_SELF_ENV]);
  if (self) [env.FOUNTAIN_RUNNER_NODE, env.FOUNTAIN_RUNNER_SCRIPT] = self;
  for (const pair of pairs) {
    if (pair.length === 2) env[pair[0]!] = pair[1]!;
  }
  return env;
}

function daemonUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'fountain';
  }
}

/** A bare name becomes the first executable match on the child's PATH; otherwise it is kept as given. */
export function resolveCommand(cmd: string, envPath: string | undefined): string {
  if (cmd.includes('/')) return cmd;
  return findExecutable(cmd, envPath ?? '') ?? cmd;
}

/** The first regular, executable file named `name` in the directories of `path`, or null. */
export function findExecutable(name: string, path: string): string | null {
  for (const d of path.split(delimiter)) {
    if (d === '') continue;
    const candidate = join(d, name);
    try {
      if (statSync(candidate).isFile()) {
        accessSync(candidate, constants.X_OK);
        return candidate;
      }
    } catch {
      // not here; keep looking
    }
  }
  return null;
}
