/**
 * The confinement seam of the directory-based backends: how a command is launched, where a file may
 * be written, and what suspend, destroy and a network policy do. The process backend confines nothing.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Result } from '../../../sandbox/result.ts';
import { ok } from '../../../sandbox/result.ts';
import type { WireError } from '../../backend.ts';
import { childEnv, resolveCommand } from './env.ts';
import { mapArg, mapCwd, writablePath } from './paths.ts';
import type { BeneathTarget } from './write-beneath.ts';

/** What a request asks to run, before any mapping. */
export interface CommandRequest {
  readonly cmd: string;
  readonly args: readonly string[];
  readonly env: readonly (readonly string[])[];
  readonly dir?: string | undefined;
}

/** What is actually started on the host: its own process group, as the process backend does. */
export interface LaunchSpec {
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Record<string, string>;
}

export interface Confinement {
  /** Contract capabilities beyond the `suspend` and `attach` every directory backend has. */
  readonly extraCapabilities: readonly string[];
  /** Idempotent; runs before every exec and spawn, so a sandbox left parked or set up by an earlier daemon answers. */
  prepare(name: string, dir: string): Promise<Result<void, WireError>>;
  launch(name: string, dir: string, req: CommandRequest): LaunchSpec;
  /**
   * The sandbox directory as its own commands see it: `get` answers it as `path`, and the server
   * maps an agent's ACP cwd through it. Absent: the host directory itself (trusted mode).
   */
  readonly insidePath?: string;
  /** Where write_file may write (a base the daemon owns, components it opens without following links), or null when the path leaves what the sandbox may touch. */
  writablePath(name: string, dir: string, path: string): BeneathTarget | null;
  /** When present, suspend freezes the sandbox's processes instead of ending them. */
  freeze?(name: string): Promise<Result<void, WireError>>;
  thaw?(name: string): Promise<Result<void, WireError>>;
  /** After every session ended: give back whatever prepare made. */
  release(name: string): Promise<void>;
  applyNetworkPolicy?(name: string, allow: readonly string[]): Promise<Result<void, WireError>>;
  /** Daemon shutdown, after every session ended. */
  close(): Promise<void>;
}

export interface DirectoryConfinementOptions {
  readonly root: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly realHome: string;
  readonly npmCache?: string | undefined;
  readonly runtimeStore?: string | undefined;
}

/** Trusted mode: the host's own view, HOME in the sandbox directory. */
/** Where TMPDIR points inside a process-backend sandbox directory. */
export const SANDBOX_TMP = '.tmp';

/**
 * The sandbox's own temporary directory (TMPDIR): what its programs put in "the" temp directory (gemini's
 * error reports, say) stays in the sandbox, apart from other sandboxes, and goes with it at destroy.
 */
export function sandboxTmp(dir: string): string {
  const tmp = join(dir, SANDBOX_TMP);
  try {
    mkdirSync(tmp, { recursive: true, mode: 0o700 });
  } catch {
    // The command still starts; a program that needs TMPDIR reports its own error.
  }
  return tmp;
}

export class DirectoryConfinement implements Confinement {
  readonly extraCapabilities: readonly string[] = [];
  readonly #opts: DirectoryConfinementOptions;

  constructor(opts: DirectoryConfinementOptions) {
    this.#opts = opts;
  }

  async prepare(): Promise<Result<void, WireError>> {
    return ok(undefined);
  }

  launch(_name: string, dir: string, req: CommandRequest): LaunchSpec {
    const env = childEnv(dir, req.env, {
      base: this.#opts.env,
      realHome: this.#opts.realHome,
      tmpdir: sandboxTmp(dir),
      ...(this.#opts.npmCache ? { npmCache: this.#opts.npmCache } : {}),
      ...(this.#opts.runtimeStore ? { runtimeStore: this.#opts.runtimeStore } : {}),
    });
    return {
      file: resolveCommand(mapArg(dir, req.cmd), env.PATH),
      args: req.args.map((a) => mapArg(dir, a)),
      cwd: mapCwd(dir, req.dir),
      env,
    };
  }

  writablePath(_name: string, dir: string, path: string): BeneathTarget | null {
    return writablePath(dir, path);
  }

  async release(): Promise<void> {}

  async close(): Promise<void> {}
}
