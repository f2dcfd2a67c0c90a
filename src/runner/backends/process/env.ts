/**
 * The child environment of the process backend (runner-protocol.md §9.3) and bare-command
 * resolution against the child's PATH, so a missing command surfaces as exit 127.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export interface EnvInputs {
  /** The daemon's own environment. */
  readonly base: Readonly<Record<string, string | undefined>>;
  /** The daemon user's real home (not the sandbox's). */
  readonly realHome: string;
  /** Which extra directories exist; injectable so tests need not touch /opt. */
  readonly exists?: (path: string) => boolean;
}

export function childEnv(dir: string, pairs: readonly (readonly string[])[], inputs: EnvInputs): Record<string, string> {
  const exists = inputs.exists ?? existsSync;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(inputs.base)) if (v !== undefined) env[k] = v;

  const path = [join(dir, '.local/bin'), join(dir, '.npm-global/bin'), join(dir, '.bun/bin')];
  for (const p of (inputs.base.PATH ?? '').split(delimiter)) if (p !== '') path.push(p);
  const extras = ['/opt/homebrew/bin', '/usr/local/bin', join(inputs.realHome, '.local/bin'), join(inputs.realHome, '.bun/bin')];
  for (const p of extras) if (!path.includes(p) && exists(p)) path.push(p);
  env.PATH = path.join(delimiter);

  env.HOME = dir;
  env.npm_config_prefix = join(dir, '.npm-global');
  if (!env.npm_config_cache) env.npm_config_cache = join(inputs.realHome, '.npm');
  env.FOUNTAIN_SANDBOX_DIR = dir;
  for (const pair of pairs) {
    if (pair.length === 2) env[pair[0]!] = pair[1]!;
  }
  return env;
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
