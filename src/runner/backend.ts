/**
 * The Backend seam: the wire ops plus stopAll, independent of any transport.
 * The process backend implements it today; namespace and firecracker backends plug in the same way.
 */
import type { Result } from '../sandbox/result.ts';
import type { RequestOf, StreamFrame, WireErrorCode } from '../wire/index.ts';

/** A typed refusal; it goes on the wire as `{ok:false, error: code, detail}`. */
export interface WireError {
  readonly code: WireErrorCode;
  readonly detail: string;
}

/**
 * Where a session's stream frames go: one connection's ordered writer. Sessions outlive
 * connections, so a closed sink simply drops frames (the journal keeps them).
 */
export interface StreamOut {
  readonly open: boolean;
  /**
   * True when send() is done with the frame's bytes by the time it returns (it encodes them for
   * the wire at once): a replay may then read the journal into one reused buffer.
   */
  readonly copiesOnSend?: boolean;
  send(frame: StreamFrame): void;
  /** Resolves once what was sent so far has left the process; long replays wait on it. */
  drained(): Promise<void>;
}

/**
 * An op's success. `followUp` runs right after the reply is on the wire, synchronously,
 * so a replay can never overtake its reply (wire order: reply, replay, live).
 */
export interface OpReply<T extends object = Record<string, unknown>> {
  readonly result: T;
  readonly followUp?: () => void;
}

export type OpResult<T extends object = Record<string, unknown>> = Result<OpReply<T>, WireError>;

/** What spawn and attach need to know about the request that asked. */
export interface OpContext {
  readonly requestId: number;
  readonly out: StreamOut;
}

export interface SessionInfo {
  readonly id: string;
  readonly command: string;
  readonly created_at: string;
  readonly last_activity_at: string | null;
  readonly tty: false;
  readonly exit_code?: number;
}

/**
 * Every method is total: failures come back as WireError values, never as rejections.
 * (The protocol server still guards against a throw and answers it as `provider`.)
 */
export interface Backend {
  create(req: RequestOf<'create'>): Promise<OpResult<Record<string, never>>>;
  get(req: RequestOf<'get'>): Promise<OpResult<{ status: 'running' | 'suspended'; path: string }>>;
  destroy(req: RequestOf<'destroy'>): Promise<OpResult<Record<string, never>>>;
  list(req: RequestOf<'list'>): Promise<OpResult<{ names: string[] }>>;
  suspend(req: RequestOf<'suspend'>): Promise<OpResult<Record<string, never>>>;
  resume(req: RequestOf<'resume'>): Promise<OpResult<Record<string, never>>>;
  writeFile(req: RequestOf<'write_file'>): Promise<OpResult<Record<string, never>>>;
  exec(req: RequestOf<'exec'>): Promise<OpResult<{ output: string; code: number }>>;
  spawn(req: RequestOf<'spawn'>, ctx: OpContext): Promise<OpResult<{ session_id: string; replay_from?: number }>>;
  stdin(req: RequestOf<'stdin'>): Promise<OpResult<Record<string, never>>>;
  stdinClose(req: RequestOf<'stdin_close'>): Promise<OpResult<Record<string, never>>>;
  detach(req: RequestOf<'detach'>): Promise<OpResult<Record<string, never>>>;
  listSessions(req: RequestOf<'list_sessions'>): Promise<OpResult<{ sessions: SessionInfo[] }>>;
  attach(req: RequestOf<'attach'>, ctx: OpContext): Promise<OpResult<{ session_id: string; replay_from?: number }>>;
  /** What the daemon advertises when it dials (`capabilities=`); absent means `suspend`, `attach`. */
  capabilities?(): readonly string[];
  /** Absent: the op is answered `not_supported`. */
  applyNetworkPolicy?(req: RequestOf<'apply_network_policy'>): Promise<OpResult<Record<string, never>>>;
  /**
   * Sessions whose process still runs. Absent: the backend cannot tell (a restart for an update then
   * waits for an explicit stop instead of for the sessions to end).
   */
  liveSessions?(): number;
  /** Ends every live process this backend started: SIGTERM to each group, SIGKILL after a grace. */
  stopAll(): Promise<void>;
}
