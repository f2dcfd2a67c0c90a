/**
 * The runner provider's public surface: the socket takeover the hub's upgrade route calls,
 * the adapter, placement, and the host seam. Test doubles live in fake-daemon.ts and test-hub.ts.
 */
export {
  acceptRunnerSocket,
  alreadyConnectedReason,
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_IDLE_TIMEOUT_MS,
} from './connection.ts';
export type { AcceptOptions } from './connection.ts';
export { RunnerAdapter, pickRunner, mapSandboxPath, EXEC_GRACE_MS } from './adapter.ts';
export type { RunnerAdapterOptions, RunnerCommandPrivate } from './adapter.ts';
export { RUNNER_OFFLINE, RUNNER_DISCONNECTED, RUNNER_TIMEOUT, wireError } from './errors.ts';
export { LocalRunnerHost } from './host.ts';
export type {
  LocalRunnerHostHooks,
  OutgoingRequest,
  RunnerConnection,
  RunnerHost,
  RunnerInfo,
  SessionListener,
} from './host.ts';
