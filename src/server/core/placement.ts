/**
 * What the engine asks of the provider side without naming a provider: where a new sandbox goes
 * (its name), whether an error means its host is away for now, and whether its agents outlive a drop.
 */
import type { KnownProvider, SandboxError } from '../../sandbox/index.ts';
import type { SandboxRow } from '../store/conversation-schema.ts';
import type { EngineResult } from './engine-errors.ts';

/** What the engine needs to know about a runner to show it; `root` is the runner's sandbox root. */
export interface RunnerSummary {
  readonly id: string;
  readonly name: string;
  readonly hostname: string | null;
  readonly root: string | null;
  readonly online: boolean;
}

export interface Placement {
  /**
   * A fresh sandbox name for the account on the provider; `no_runner_online` when nothing can host it now.
   * `pin` is the agent's chosen host (a runner id) or null; a pinned host that is away answers `runner_offline` naming it.
   */
  mint(accountId: string, provider: KnownProvider, pin: string | null): Promise<EngineResult<string>>;
  /** The error says the sandbox's host is away for now: the work waits instead of giving the sandbox up. */
  hostAway(e: SandboxError): boolean;
  /** The error on a command says its connection dropped while the process runs on (a turn can be recovered). */
  connectionLost(provider: string, e: SandboxError): boolean;
  /** Agent processes on this provider outlive their connection and this node (recovery, reaping superseded agents). */
  detachable(provider: string): boolean;
  /** The sandbox's host was removed for good (a deleted runner): its disk will not come back. */
  hostGone(accountId: string, sandbox: SandboxRow): Promise<boolean>;
  /** A runner of the account by id or name, and whether it is connected now (a move's target). */
  runner(accountId: string, ref: string): Promise<RunnerSummary | undefined>;
  /** Who hosts the sandbox, for views; null when no one in particular does. */
  host(accountId: string, sandbox: SandboxRow): Promise<RunnerSummary | null>;
}
