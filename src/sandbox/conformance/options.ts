/**
 * What an adapter supplies to plug into the conformance suite: itself, commands in its own
 * vocabulary (fixtures), a name minter, and optional probes for transport failure and secrets.
 */
import type { SandboxAdapter } from '../adapter.ts';
import type { Handle, SpawnOptions } from '../types.ts';

export interface CommandFixture {
  readonly cmd: string;
  readonly args: readonly string[];
}

export interface ConformanceFixtures {
  /** Exits 0 and prints `expectedStdout` (the output contains it). */
  readonly execOk: CommandFixture & { readonly expectedStdout: string };
  /** Exits with `nonzeroCode`. */
  readonly execFail: CommandFixture & { readonly nonzeroCode: number };
  /** Prints something to stdout and exits 0. */
  readonly spawnOk: CommandFixture;
  /** Its transport closes without an exit frame. Optional: not every adapter can provoke it. */
  readonly spawnDrop?: CommandFixture;
  /** Prints something first, echoes each stdin write to stdout, exits 0 on stdin EOF. */
  readonly spawnStay: CommandFixture;
}

/** Fixtures for any sandbox with a POSIX shell (runner backends, hosted Linux sandboxes). */
export const SHELL_FIXTURES: ConformanceFixtures = {
  execOk: { cmd: 'sh', args: ['-c', 'echo conformance-ok'], expectedStdout: 'conformance-ok' },
  execFail: { cmd: 'sh', args: ['-c', 'echo failing >&2; exit 3'], nonzeroCode: 3 },
  spawnOk: { cmd: 'sh', args: ['-c', 'echo spawned-ok'] },
  spawnStay: { cmd: 'sh', args: ['-c', 'echo ready; while IFS= read -r line; do echo "$line"; done'] },
};

export interface ConformanceOptions {
  /** A getter, because adapters are often built in `before`. */
  readonly adapter: () => SandboxAdapter;
  readonly fixtures: ConformanceFixtures;
  /** Mints a fresh routable sandbox name; default `conformance-<n>`. */
  readonly name?: () => string;
  /** How long to wait for one frame or result; a hang guard only. Default 5000 ms. */
  readonly timeoutMs?: number;
  /** Merged into every spawn (e.g. `detachable: true`). */
  readonly spawnOpts?: Partial<Omit<SpawnOptions, 'owner'>>;
  readonly before?: () => Promise<void>;
  readonly after?: () => Promise<void>;
  /**
   * An adapter whose transport is broken (endpoint down, socket gone): `get` on any name must
   * come back transient, never `not_found`. Optional only for adapters with no transport (fake).
   */
  readonly brokenTransport?: () => Promise<{ adapter: SandboxAdapter; handle: Handle; cleanup?: () => Promise<void> }>;
  /**
   * A handle carrying a real secret in its private part, and that secret's text: it must never
   * appear in util.inspect, JSON or any error an operation returns.
   */
  readonly secret?: () => Promise<{ handle: Handle; value: string }>;
  /**
   * Where the suite may write files inside a sandbox; default `/home/sprite` (the path every
   * provider maps to the sandbox user's home).
   */
  readonly scratchDir?: string;
  /**
   * Reads a file back out of a sandbox (from its disk, or by running `cat`), so the suite can
   * check that suspend/resume keeps it. `null` means the file does not exist. Optional: without
   * it the suite only checks that the writes succeed.
   */
  readonly readFile?: (handle: Handle, path: string) => Promise<Uint8Array | null>;
  /**
   * One sandbox for every check that needs only somewhere to run (exec, streaming, files, suspend);
   * checks about creating and destroying, or that count sessions, still make their own. For
   * adapters whose sandboxes are costly to make (a VM boot each). Default false: one per check.
   */
  readonly shareSandbox?: boolean;
}
