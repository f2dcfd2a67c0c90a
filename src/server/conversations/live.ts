/**
 * The engine's in-memory state shared by its parts: a conversation whose agent this node runs (Live),
 * its active turn, and the core every part reads (deps, lock, live map, event log, tokens).
 */
import type { ConversationCheckpoints } from '../checkpoints/service.ts';
import type { BlobStore } from '../checkpoints/blobs.ts';
import type { Logger } from 'pino';
import type { ContentBlock } from '@agentclientprotocol/sdk';
import { ToolFold } from '../../acp/tool-view.ts';
import type { Handle, KnownProvider, ProviderRegistry, SandboxAdapter } from '../../sandbox/index.ts';
import type { Conversation, PermissionPolicy, SessionOffered, Turn, TurnUsage } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import type { EventBus } from '../cluster/bus.ts';
import type { OwnerLink } from './commands.ts';
import type { AgentProcess } from './agent-process.ts';
import type { EngineConfig } from './config.ts';
import type { EventLog } from './event-log.ts';
import type { KeyedLock } from './lock.ts';
import type { Placement } from '../core/placement.ts';
import type { SandboxTokens } from './sandbox-token.ts';
import type { LaunchCredentials } from '../credentials/service.ts';
import { RefusalWatch } from './model-refusal.ts';
import type { TurnState } from './turn/machine.ts';
import { TurnTimers } from './turn/timers.ts';
import type { EnvironmentService } from '../environments/service.ts';

export interface EngineDeps {
  readonly db: EngineDb;
  readonly registry: ProviderRegistry;
  /** Where sandboxes go and how provider errors read; the only provider-specific knowledge the engine uses. */
  readonly placement: Placement;
  readonly logger: Logger;
  readonly config: EngineConfig;
  /** The instance default provider (SANDBOX_PROVIDER), used when an agent pins none. */
  readonly defaultProvider: KnownProvider;
  /**
   * This node's id (the cluster host's, so logs agree) and whether other nodes share the database.
   * Default: a fresh id, alone on the database (a restart adopts everything its predecessor left open).
   */
  readonly node?: { readonly id: string; readonly shared: boolean };
  /** The bus other nodes' "events stored" notices arrive on (feeds read them back); default: one of its own. */
  readonly bus?: EventBus;
  /** Other nodes sharing the database: commands for a conversation another node drives go to it. */
  readonly link?: OwnerLink;
  /** The account's model credentials; without it runtimes get none (demo needs none). */
  readonly credentials?: LaunchCredentials;
  /** Environments and their secrets; without it every launch has no environment. */
  readonly environments?: EnvironmentService;
  /** Checkpoints of the agent's HOME, restored when a sandbox is lost; without it a lost sandbox starts empty. */
  readonly checkpoints?: ConversationCheckpoints;
  /** Where prompt images are kept (the checkpoints' blob store); without it a prompt with images is refused. */
  readonly images?: BlobStore;
}

export interface ActiveTurn {
  readonly id: string;
  readonly number: number;
  readonly startedAt: number;
  /** Where the turn is; only the turn driver (turn/driver.ts) sets it, with what `transition` returns. */
  state: TurnState;
  /** The turn's timers; only the turn driver arms and disarms them. */
  readonly timers: TurnTimers;
  /** The process whose prompt reply ends this turn; a reply from any other (released) one is ignored. */
  driver: AgentProcess | null;
  /** When the agent last sent anything in this turn; the silence watch measures from here. */
  lastHeardAt: number;
  /** What the agent's `usage_update`s said during the turn (context window, cost); recorded with the turn. */
  reported: Pick<TurnUsage, 'context' | 'cost'>;
  /** The end of what the agent wrote to stderr during the turn (a silence failure quotes it when it names an auth failure). */
  stderrTail: string;
  /** Whether the model API refused the credential in this turn (agents that end such a turn as a success). */
  readonly refusal: RefusalWatch;
  /**
   * The prompt as built for the agent, once built, and its JSON-RPC id once its request was issued: a
   * runner dropped before the write was confirmed gets it again, under the same id (turn/driver.ts resend).
   */
  prompt: { readonly content: string | ContentBlock[]; readonly id: number | null } | null;
}

/** A conversation whose agent process this node runs. */
export interface Live {
  readonly conversationId: string;
  readonly accountId: string;
  readonly sandboxId: string;
  readonly handle: Handle;
  readonly adapter: SandboxAdapter;
  readonly policy: PermissionPolicy;
  readonly runtime: Conversation['runtime'];
  /** The model the agent process was told to use (`provider/model`), recorded on each turn. */
  readonly model: string;
  proc: AgentProcess | null;
  turn: ActiveTurn | null;
  /** Request ids answered, timed out or withdrawn: a late answer gets 409, not 404. */
  readonly resolved: Set<string>;
  /** The tool calls of the running process, merged from its updates: a permission request is judged by what the call is. */
  readonly tools: ToolFold;
  /** The session options and modes the runtime listed (kept current as settings are sent); null before a session. */
  offered: SessionOffered | null;
}

/** What every part of the engine shares; the facade owns it. */
export interface EngineCore {
  readonly d: EngineDeps;
  readonly log: Logger;
  readonly lock: KeyedLock;
  readonly live: Map<string, Live>;
  readonly events: EventLog;
  readonly sandboxTokens: SandboxTokens;
  readonly nodeId: string;
  /** Tells the account's streams, on every node, that its conversation list changed (changes.ts). */
  readonly changed: (accountId: string) => void;
  /** Capacity freed here (a turn ended, a sandbox parked or went away): the capacity queue looks again. */
  readonly freed: () => void;
  stopped: boolean;
}

export function newLive(
  c: Conversation,
  sandboxId: string,
  adapter: SandboxAdapter,
  handle: Handle,
  model: string,
): Live {
  return {
    conversationId: c.id,
    accountId: c.accountId,
    sandboxId,
    handle,
    adapter,
    policy: c.permissionPolicy,
    runtime: c.runtime,
    model,
    proc: null,
    turn: null,
    resolved: new Set(),
    tools: new ToolFold(),
    offered: null,
  };
}

/** A turn this node drives, in `state` (a new prompt's `sending`, an adopted one's `running`). */
export function newActiveTurn(
  t: Turn,
  startedAt: number,
  driver: AgentProcess | null,
  state: TurnState,
  lastHeardAt = startedAt,
): ActiveTurn {
  return {
    id: t.id,
    number: t.turnNumber,
    startedAt,
    state,
    timers: new TurnTimers(),
    driver,
    lastHeardAt,
    reported: {},
    stderrTail: '',
    refusal: new RefusalWatch(),
    prompt: null,
  };
}

export function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout()), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** The engine's parts, filled in by the facade once all exist (they call one another). */
export interface EngineParts {
  readonly turns: import('./turn/driver.ts').TurnDriver;
  readonly asks: import('./permissions.ts').Permissions;
  readonly recovery: import('./reattach.ts').TurnRecovery;
  readonly launcher: import('./launcher.ts').Launcher;
  readonly provisioner: import('./provisioner.ts').Provisioner;
  readonly capacity: import('./capacity.ts').Capacity;
}
