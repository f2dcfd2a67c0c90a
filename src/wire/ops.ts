/**
 * Runner wire protocol: op names and the daemon's error codes.
 * Shared by the server end and the daemon; never change without updating both and the conformance suite.
 */
export const OPS = [
  'create',
  'get',
  'destroy',
  'list',
  'suspend',
  'resume',
  'write_file',
  'exec',
  'spawn',
  'stdin',
  'stdin_close',
  'detach',
  'list_sessions',
  'attach',
  'apply_network_policy',
] as const;
export type Op = (typeof OPS)[number];

/**
 * What a daemon may advertise in the `capabilities` query parameter of its dial (comma-separated).
 * A daemon that sends none has the upstream set, `suspend` and `attach`. `stdin_write_id`: a `stdin`
 * frame repeating a `write_id` the session already took is acknowledged without being written again.
 */
export const RUNNER_CAPABILITIES = ['suspend', 'attach', 'network_policy', 'stdin_write_id'] as const;
export type RunnerCapability = (typeof RUNNER_CAPABILITIES)[number];
export const DEFAULT_RUNNER_CAPABILITIES: readonly RunnerCapability[] = ['suspend', 'attach'];

/** The advertised list, known names only (a newer daemon may know more); absent means the default set. */
export function parseRunnerCapabilities(param: string | null | undefined): RunnerCapability[] {
  if (param === null || param === undefined) return [...DEFAULT_RUNNER_CAPABILITIES];
  const known = new Set<string>(RUNNER_CAPABILITIES);
  return [
    ...new Set(
      param
        .split(',')
        .map((c) => c.trim())
        .filter((c): c is RunnerCapability => known.has(c)),
    ),
  ];
}

/**
 * What a sandbox is on the daemon's machine, sent as the `backend` query parameter of its dial (optional:
 * a daemon that sends none, an older one or an upstream one, is recorded as not saying). `microvm` covers
 * `--backend firecracker` with either monitor (Firecracker or QEMU).
 */
export const RUNNER_BACKENDS = ['process', 'namespace', 'microvm'] as const;
export type RunnerBackend = (typeof RUNNER_BACKENDS)[number];

/** The reported backend when it is one this end knows; anything else (absent, a newer daemon's) is null. */
export function parseRunnerBackend(param: string | null | undefined): RunnerBackend | null {
  return (RUNNER_BACKENDS as readonly string[]).includes(param ?? '') ? (param as RunnerBackend) : null;
}

/** `ping` exists only on the microVM guest link. */
export const GUEST_OPS = [...OPS, 'ping'] as const;
export type GuestOp = (typeof GUEST_OPS)[number];

/** The six typed error codes a daemon sends; anything untyped goes out as `provider`. */
export const WIRE_ERROR_CODES = [
  'not_found',
  'command_exited',
  'not_supported',
  'invalid',
  'unavailable',
  'write_failed',
] as const;
export type WireErrorCode = (typeof WIRE_ERROR_CODES)[number] | 'provider';

/** WebSocket close codes the server uses. */
export const CLOSE = {
  normal: 1000,
  goingAway: 1001,
  unsupportedData: 1003,
  runnerDeleted: 4404,
  alreadyConnected: 4409,
} as const;

/** Largest frame either end accepts (the daemon's read limit). */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;
