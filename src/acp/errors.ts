/**
 * The ACP client's error values: failures of a call it made, and problems it noticed in the agent's output.
 * Nothing in src/acp throws across its API; callers branch on these codes.
 */
import type { SandboxError } from '../sandbox/index.ts';

/** Why a call on the client (initialize, prompt, answerPermission, ...) did not succeed. */
export type AcpErrorCode =
  /** The agent answered with a JSON-RPC error; `rpc` holds it. */
  | 'acp_rpc_error'
  /** The agent's result did not match the SDK schema for that method. */
  | 'acp_invalid_response'
  /** Writing to the agent's stdin failed; `cause` holds the sandbox error. */
  | 'acp_write_failed'
  /** The client was closed (or the agent's stdout ended) before the reply arrived. */
  | 'acp_closed'
  /** Another request is still waiting for its reply; requests are strictly sequential (journal boundary). */
  | 'acp_busy'
  /** The call needs a session id and the client has none yet. */
  | 'acp_no_session'
  /** The agent did not advertise the capability the call needs. */
  | 'acp_not_supported'
  /** The agent answered initialize with a protocol version this client does not speak. */
  | 'acp_unsupported_protocol'
  /** No held permission request has that id (never asked, already answered, or withdrawn). */
  | 'acp_unknown_request'
  /** attachPrompt was called after output had already been fed, or twice. */
  | 'acp_invalid_state'
  /** Attach replay: a journal line before the turn boundary exceeds 4 MiB. */
  | 'runner_replay_line_too_large';

export interface AcpError {
  readonly code: AcpErrorCode;
  readonly message: string;
  readonly rpc?: { readonly code: number; readonly message: string; readonly data?: unknown };
  readonly cause?: SandboxError;
}

/** Something wrong in the agent's output; reported through `onProblem`, never thrown. */
export type AcpProblemCode =
  /** A line longer than the limit (4 MiB); its bytes up to the next newline are dropped. */
  | 'acp_line_too_large'
  /** A line that is not UTF-8. */
  | 'acp_invalid_utf8'
  /** A line that is not JSON (agents sometimes print logs to stdout); store it as plain stdout. */
  | 'acp_not_json'
  /** JSON that is not a JSON-RPC 2.0 message, or a known method whose params fail the SDK schema. */
  | 'acp_invalid_message'
  /** A response whose id matches no request this client is waiting for. */
  | 'acp_unexpected_response'
  /** A request this client does not serve (fs/*, terminal/*, ...); it was refused with -32601. */
  | 'acp_request_refused'
  /** A held permission request dropped because its turn ended without an answer. */
  | 'acp_permission_withdrawn';

export interface AcpProblem {
  readonly code: AcpProblemCode;
  readonly message: string;
  /** The offending line as received (lossy UTF-8 for `acp_invalid_utf8`; a prefix for `acp_line_too_large`). */
  readonly raw?: string;
  /** Ordinal of the line in the agent's stdout (see LineContext.seq). */
  readonly seq?: number;
}

export const acpError = (
  code: AcpErrorCode,
  message: string,
  extra: Partial<Pick<AcpError, 'rpc' | 'cause'>> = {},
): AcpError => ({
  code,
  message,
  ...(extra.rpc !== undefined ? { rpc: extra.rpc } : {}),
  ...(extra.cause !== undefined ? { cause: extra.cause } : {}),
});
