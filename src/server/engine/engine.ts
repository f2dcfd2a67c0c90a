/**
 * The conversation engine: provisions a sandbox per conversation, drives its ACP agent turn by turn,
 * holds permission requests, parks idle sandboxes and wakes them on the next prompt.
 */
import { randomBytes } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import type { PermissionOption, RequestPermissionRequest } from '@agentclientprotocol/sdk';
import type { Logger } from 'pino';
import type { HeldPermission, JsonRpcId, LineContext } from '../../acp/index.ts';
import { RUNNER_DISCONNECTED, RUNNER_OFFLINE, pickRunner } from '../../providers/runner/index.ts';
import type { RunnerHost } from '../../providers/runner/index.ts';
import type { Handle, KnownProvider, ProviderRegistry, SandboxAdapter, SandboxError } from '../../sandbox/index.ts';
import { checkLifecycle, describeError, idleAction, isTransient, mintHostedName, mintRunnerName, parseRunnerName } from '../../sandbox/index.ts';
import { getAgent } from '../store/agents.ts';
import { events } from '../store/conversation-schema.ts';
import type { Agent, Conversation, PendingPermission, PermissionPolicy, SandboxRow, Turn, Verdict } from '../store/conversation-schema.ts';
import {
  agedCandidates,
  deleteConversationRows,
  getConversation,
  getConversationById,
  getTurn,
  getConversationForPrompt,
  idleCandidates,
  insertConversation,
  insertConversationOn,
  insertSandbox,
  insertTurn,
  listConversations,
  openTurns,
  settleRunningConversation,
  updateConversation,
  updateSandbox,
  updateTurn,
  type ConversationWithSandbox,
} from '../store/conversations.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { storedOutputSeqs } from '../store/events.ts';
import { AgentProcess, type AgentProcessEvents } from './agent-process.ts';
import type { EngineConfig } from './config.ts';
import { checkBrokerage, type BrokerageRefusal } from './brokerage.ts';
import { accept, refuse, type EngineResult } from './errors.ts';
import { deliveryFor, type Delivery } from '../credentials/delivery.ts';
import type { LaunchCredentials } from '../credentials/service.ts';
import { EventLog } from './event-log.ts';
import { KeyedLock } from './lock.ts';
import { allowOutcome, denyOutcome, verdictFor } from './policy.ts';
import { mintEngineNodeId, NodeOwnership, type Adopter, type Loss } from './ownership.ts';
import { prepareSandbox } from './provision.ts';
import { RefusalWatch } from './model-refusal.ts';
import { modelOptionToSet } from './model-option.ts';
import { platformMcpServers, SandboxTokens } from './sandbox-token.ts';
import { ACP_AUTH_REQUIRED, RUNTIME_SPECS, SANDBOX_HOME, promptFailureReason, type RuntimeSpec } from './runtimes.ts';
import { permissionRemainingMs, pickSession, runningSessionsOf, storedOptions, type RecoveryFailure } from './recovery.ts';
import { conversationView, sandboxView, type ConversationView, type RunnerSummary } from './views.ts';

/** How the engine reads runner rows (name, hostname, root); the server's store implements it. */
export interface RunnerDirectory {
  find(accountId: string, runnerId: string): Promise<{ id: string; name: string; hostname: string | null; root: string | null } | undefined>;
}

export interface EngineDeps {
  readonly db: EngineDb;
  readonly registry: ProviderRegistry;
  /** Live runner sockets; null when runners are not served by this node. */
  readonly runnerHost: RunnerHost | null;
  readonly runners: RunnerDirectory;
  readonly logger: Logger;
  readonly config: EngineConfig;
  /** The instance default provider (SANDBOX_PROVIDER), used when an agent pins none. */
  readonly defaultProvider: KnownProvider;
  /**
   * This node's id (the cluster host's, so logs agree) and whether other nodes share the database.
   * Default: a fresh id, alone on the database (a restart adopts everything its predecessor left open).
   */
  readonly node?: { readonly id: string; readonly shared: boolean };
  /** The account's model credentials; without it runtimes get none (demo needs none). */
  readonly credentials?: LaunchCredentials;
}

export interface CreateConversationInput {
  readonly agentId: string;
  readonly title?: string | undefined;
  readonly prompt?: string | undefined;
  readonly permissionPolicy?: PermissionPolicy | undefined;
  /** A client channel; `fountain:team` makes the conversation its agent's teammate. */
  readonly channelId?: string | undefined;
}

interface HeldAsk {
  readonly requestId: string;
  readonly acpId: JsonRpcId;
  readonly options: readonly PermissionOption[];
  readonly timer: NodeJS.Timeout;
}

/** A turn waiting for its runner to come back (runner-protocol.md §11.2). */
interface Recovery {
  /** Ticks carry it; a tick whose token is no longer current does nothing. */
  readonly token: number;
  readonly deadline: number;
  timer: NodeJS.Timeout | null;
}

interface ActiveTurn {
  readonly id: string;
  readonly number: number;
  readonly startedAt: number;
  interrupted: boolean;
  ask: HeldAsk | null;
  interruptTimer: NodeJS.Timeout | null;
  /** The JSON-RPC id of the sent session/prompt; set once the prompt reached the agent's stdin. */
  acpPromptId: number | null;
  /** The process whose prompt reply ends this turn; a reply from any other (released) one is ignored. */
  driver: AgentProcess | null;
  recovery: Recovery | null;
  /** Disarms the replay-boundary timeout of a reattach. */
  boundaryTimer: NodeJS.Timeout | null;
  /** When the agent last sent anything in this turn; the silence watch measures from here. */
  lastHeardAt: number;
  silenceTimer: NodeJS.Timeout | null;
  /** Whether the model API refused the credential in this turn (agents that end such a turn as a success). */
  readonly refusal: RefusalWatch;
}

/** A conversation whose agent process this node runs. */
interface Live {
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
}

const STRICTNESS: Readonly<Record<Verdict, number>> = { auto_allow: 0, ask: 1, auto_deny: 2 };
/** Interrupt: how long the agent gets to answer the cancelled prompt before its process is stopped. */
const INTERRUPT_GRACE_MS = 10_000;

const isRunnerOffline = (e: SandboxError): boolean =>
  e.code === 'unavailable' && (e.detail === RUNNER_OFFLINE || e.detail === RUNNER_DISCONNECTED);

function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout()), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Stops what a turn has running on timers and disowns its driver; the held permission is the caller's. */
function stopTurnTimers(turn: ActiveTurn): void {
  if (turn.interruptTimer) clearTimeout(turn.interruptTimer);
  if (turn.silenceTimer) clearTimeout(turn.silenceTimer);
  if (turn.boundaryTimer) clearTimeout(turn.boundaryTimer);
  if (turn.recovery?.timer) clearTimeout(turn.recovery.timer);
  turn.recovery = null;
  turn.driver = null;
}

export class ConversationEngine {
  readonly events: EventLog;
  readonly #d: EngineDeps;
  readonly #log: Logger;
  readonly #lock = new KeyedLock();
  readonly #live = new Map<string, Live>();
  /** When this node last opened a new ACP session per conversation (gemini's same-minute load bug). */
  readonly #sessionOpenedAt = new Map<string, number>();
  /** Conversations whose first provisioning is running, with a flag terminate raises. */
  readonly #provisioning = new Map<string, { cancelled: boolean; done: Promise<void> }>();
  #sweepTimer: NodeJS.Timeout | null = null;
  #stopped = false;
  #recoveryTokens = 0;
  /** Recovery ticks in flight; stop() waits for them before the database closes. */
  readonly #ticks = new Set<Promise<void>>();
  readonly #owner: NodeOwnership;
  /** The per-conversation sandbox tokens (§3.3) and the base URL sandboxes reach the server at. */
  readonly sandboxTokens: SandboxTokens;

  constructor(deps: EngineDeps) {
    this.#d = deps;
    this.sandboxTokens = new SandboxTokens(deps.db, deps.config.publicUrl);
    this.#log = deps.logger.child({ component: 'engine' });
    this.events = new EventLog(deps.db, this.#log, { flushMs: deps.config.eventFlushMs, flushMax: deps.config.eventFlushMax });
    this.#owner = new NodeOwnership({
      db: deps.db,
      nodeId: deps.node?.id ?? mintEngineNodeId(),
      shared: deps.node?.shared ?? false,
      heartbeatMs: deps.config.nodeHeartbeatMs,
      expiryMs: deps.config.nodeExpiryMs,
      logger: this.#log,
    });
  }

  /** The id this node's open turns and provisionings carry in the store. */
  get nodeId(): string {
    return this.#owner.nodeId;
  }

  /** Adopts what lost nodes left open now rather than at the next beat; returns how many pieces this node claimed. */
  adoptLost(): Promise<number> {
    return this.#owner.sweep();
  }

  /**
   * Starts the idle sweep and adopts what lost nodes left open (a previous process of this one included):
   * runner turns whose prompt was sent wait for their runner and reattach; other open work fails.
   */
  async start(): Promise<void> {
    await this.#owner.start(this.#adopter());
    if (this.#d.config.idleTimeoutMs > 0 || this.#d.config.maxLifetimeMs > 0) {
      this.#sweepTimer = setInterval(() => void this.sweep().catch((e) => this.#log.error({ err: e }, 'idle sweep failed')), this.#d.config.sweepIntervalMs);
      this.#sweepTimer.unref();
    }
  }

  /** Stops timers and detaches from agent processes (they keep running on detachable providers). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#sweepTimer) clearInterval(this.#sweepTimer);
    this.#sweepTimer = null;
    await this.#owner.stop();
    await Promise.allSettled([...this.#provisioning.values()].map((p) => p.done));
    await Promise.allSettled([...this.#ticks]);
    for (const live of [...this.#live.values()]) await this.#detach(live, 'the server is stopping');
    await this.events.close();
    // Only now, with every event stored: an adopter skips what is stored, so nothing is stored twice.
    await this.#owner.leave();
  }

  /**
   * Lets go of a conversation without touching its rows: its turn stays `running` in the store and its
   * agent keeps running on a detachable provider, for whichever node adopts the turn next (§11.1).
   */
  async #detach(live: Live, why: string): Promise<void> {
    const turn = live.turn;
    if (turn) {
      if (turn.ask) clearTimeout(turn.ask.timer);
      stopTurnTimers(turn);
    }
    if (this.#live.get(live.conversationId) === live) this.#live.delete(live.conversationId);
    await live.proc?.release(why);
  }

  // ---------------------------------------------------------------- reads

  async view(row: ConversationWithSandbox): Promise<ConversationView> {
    const s = row.sandbox;
    return conversationView(row.conversation, s ? sandboxView(s, await this.#runnerSummary(row.conversation.accountId, s)) : null);
  }

  async #runnerSummary(accountId: string, s: SandboxRow): Promise<RunnerSummary | null> {
    if (s.provider !== 'runner') return null;
    const id = parseRunnerName(s.name);
    if (!id.ok) return null;
    const row = await this.#d.runners.find(accountId, id.value);
    const online = this.#d.runnerHost?.whereis(id.value) !== undefined;
    return { id: id.value, name: row?.name ?? '', hostname: row?.hostname ?? null, root: row?.root ?? null, online };
  }

  async get(accountId: string, id: string): Promise<EngineResult<ConversationView>> {
    const row = await getConversation(this.#d.db, accountId, id);
    return row ? accept(await this.view(row)) : refuse('not_found', 'conversation not found');
  }

  async list(accountId: string, filter: Parameters<typeof listConversations>[2]): Promise<ConversationView[]> {
    const rows = await listConversations(this.#d.db, accountId, filter);
    return Promise.all(rows.map((r) => this.view(r)));
  }

  /** True while this node holds a running turn or an open permission request for the conversation. */
  busy(conversationId: string): boolean {
    const live = this.#live.get(conversationId);
    return !!live?.turn;
  }

  // ---------------------------------------------------------------- create

  async create(accountId: string, input: CreateConversationInput): Promise<EngineResult<ConversationView>> {
    const agent = await getAgent(this.#d.db, accountId, input.agentId);
    if (!agent) return refuse('not_found', 'agent not found');
    const provider = (agent.sandboxProvider as KnownProvider | null) ?? this.#d.defaultProvider;
    if (!this.#d.registry.isEnabled(provider)) {
      return refuse('sandbox_provider_disabled', `sandbox provider ${provider} is not configured on this instance`);
    }
    const policy = this.#effectivePolicy(agent.permissionPolicy, input.permissionPolicy);
    if (!policy.ok) return policy;
    // Before any sandbox work: a runtime without its model credential would only fail at its first prompt.
    const delivery = await this.#delivery(accountId, agent.runtime, agent.model);
    if (!delivery.ok) return delivery;
    const name = this.#mintName(accountId, provider);
    if (!name.ok) return name;
    const refused = await checkBrokerage(this.#d.db, accountId, this.#d.registry.adapterFor(provider), name.value, this.#d.config.brokerAllowUnenforced);
    if (refused) {
      // The refusal is recorded on a failed conversation so its stage event has a home; no sandbox is created.
      const row = await insertConversation(
        this.#d.db,
        { accountId, agentId: agent.id, title: input.title ?? null, firstPrompt: input.prompt ?? null, status: 'failed', failureReason: refused.reason, runtime: agent.runtime, permissionPolicy: policy.value, source: 'api' },
        { provider, name: name.value, status: 'failed' },
      );
      this.#publishRefusal(row.conversation.id, refused);
      return refuse(refused.reason, refused.message, { conversation_id: row.conversation.id, provider });
    }

    const row = await insertConversation(
      this.#d.db,
      {
        accountId,
        agentId: agent.id,
        title: input.title ?? null,
        firstPrompt: input.prompt ?? null,
        status: 'pending',
        runtime: agent.runtime,
        permissionPolicy: policy.value,
        source: 'api',
        channelId: input.channelId ?? null,
        turnCount: input.prompt ? 1 : 0,
        nodeId: this.nodeId,
      },
      { provider, name: name.value, status: 'starting' },
    );
    const conv = row.conversation;
    if (input.prompt) await insertTurn(this.#d.db, { conversationId: conv.id, turnNumber: 1, prompt: input.prompt, status: 'pending', nodeId: this.nodeId });
    this.#startProvisioning(conv, row.sandbox!, agent);
    return accept(await this.view(row));
  }

  #publishRefusal(conversationId: string, r: BrokerageRefusal): void {
    this.events.stage(conversationId, null, 'network', 'failed', { type: r.type, provider: r.provider, reason: r.reason, message: r.message });
    this.events.stage(conversationId, null, 'provision', 'failed', { reason: r.reason });
  }

  #effectivePolicy(agentPolicy: PermissionPolicy, launch: PermissionPolicy | undefined): EngineResult<PermissionPolicy> {
    if (!launch) return accept(agentPolicy);
    for (const [key, verdict] of Object.entries(launch)) {
      const base = key === 'default' ? (agentPolicy.default ?? 'auto_allow') : verdictFor(agentPolicy, key, key);
      if (STRICTNESS[verdict] < STRICTNESS[base]) {
        return refuse('permission_policy_widens', `permission_policy may only narrow the agent's: ${key} is ${base} on the agent`);
      }
    }
    return accept({ ...agentPolicy, ...launch });
  }

  #mintName(accountId: string, provider: KnownProvider): EngineResult<string> {
    // Placement is the one provider-specific decision: a runner sandbox's name routes to its runner.
    if (provider === 'runner') {
      if (!this.#d.runnerHost) return refuse('no_runner_online', 'No runner is connected. Start one with `fountain runner`.');
      const picked = pickRunner(this.#d.runnerHost, accountId);
      if (!picked.ok) return refuse('no_runner_online', 'No runner is connected. Start one with `fountain runner` on a machine you own.');
      const n = mintRunnerName(picked.value.runnerId);
      return n.ok ? accept(n.value) : refuse('no_runner_online', `runner id unusable: ${n.error}`);
    }
    const n = mintHostedName(accountId);
    return n.ok ? accept(n.value) : refuse('not_found', n.error);
  }

  #startProvisioning(conv: Conversation, sandbox: SandboxRow, agent: Agent): void {
    const state = { cancelled: false, done: Promise.resolve() };
    state.done = this.#lock
      .run(conv.id, () => this.#provision(conv, sandbox, agent, state))
      .catch((e) => this.#log.error({ err: e, conversation: conv.id }, 'provisioning crashed'))
      .finally(() => this.#provisioning.delete(conv.id));
    this.#provisioning.set(conv.id, state);
  }

  /** The fresh provision of §14.1; a failure destroys what it created and fails the conversation. */
  async #provision(conv: Conversation, sandbox: SandboxRow, agent: Agent, state: { cancelled: boolean }): Promise<void> {
    const t0 = Date.now();
    this.events.stage(conv.id, null, 'provision', 'started', { provider: sandbox.provider, name: sandbox.name });
    const r = await this.#bringUp(conv, sandbox, agent, () => state.cancelled);
    if (state.cancelled) {
      if (r.ok) await this.#teardown(r.value);
      return;
    }
    if (!r.ok) {
      await updateSandbox(this.#d.db, sandbox.id, { status: 'failed' });
      await updateConversation(this.#d.db, conv.id, { status: 'failed', failureReason: r.error });
      this.events.stage(conv.id, null, 'provision', 'failed', { reason: r.error }, Date.now() - t0);
      for (const t of await openTurns(this.#d.db, conv.id)) {
        await updateTurn(this.#d.db, t.id, { status: 'failed', reason: `provisioning failed: ${r.error}`, endedAt: new Date() });
      }
      return;
    }
    this.events.stage(conv.id, null, 'provision', 'done', {}, Date.now() - t0);
    await updateConversation(this.#d.db, conv.id, { status: 'idle', lastActiveAt: new Date() });
    const [queued] = await openTurns(this.#d.db, conv.id);
    if (queued) await this.#runTurn(r.value, queued);
  }

  /**
   * Create (adopt), prepare, launch the agent and open its ACP session. On failure the sandbox this
   * call created is destroyed again.
   */
  async #bringUp(conv: Conversation, sandbox: SandboxRow, agent: Agent, cancelled: () => boolean): Promise<{ ok: true; value: Live } | { ok: false; error: string }> {
    const adapter = this.#d.registry.adapterFor(sandbox.provider as KnownProvider);
    const created = await adapter.create(sandbox.name);
    if (!created.ok) return { ok: false, error: `creating the sandbox failed: ${describeError(created.error)}` };
    const handle = created.value;
    const destroy = async (error: string): Promise<{ ok: false; error: string }> => {
      const d = await adapter.destroy(handle);
      if (!d.ok) this.#log.warn({ err: describeError(d.error), sandbox: sandbox.name }, 'could not destroy a failed sandbox');
      return { ok: false, error };
    };
    if (cancelled()) return destroy('terminated while provisioning');
    const spec = RUNTIME_SPECS[conv.runtime];
    const prep = await prepareSandbox(adapter, handle, spec, {
      system: agent.system,
      env: this.#sandboxEnv(conv.id),
      installTimeoutMs: this.#d.config.installTimeoutMs,
    });
    if (!prep.ok) return destroy(prep.reason);
    if (cancelled()) return destroy('terminated while provisioning');
    const live = await this.#launch(conv, sandbox, adapter, handle, null, agent.model);
    if (!live.ok) return destroy(live.error);
    await updateSandbox(this.#d.db, sandbox.id, { status: 'ready' });
    return live;
  }

  /** What `.env` holds; the sandbox token is not in it (each launch rotates it): only the agent's process env has it. */
  #sandboxEnv(conversationId: string): Array<[string, string]> {
    const env: Array<[string, string]> = [['FOUNTAIN_CONVERSATION_ID', conversationId]];
    if (this.sandboxTokens.baseUrl) env.push(['FOUNTAIN_BASE_URL', this.sandboxTokens.baseUrl]);
    return env;
  }

  /** The credential, endpoint and model settings a launch of `runtime` hands its agent process. */
  async #delivery(accountId: string, runtime: Conversation['runtime'], model: string): Promise<EngineResult<Delivery>> {
    if (!this.#d.credentials) return accept(deliveryFor(runtime, model, null));
    const r = await this.#d.credentials.forLaunch(accountId, runtime, model);
    return r.ok ? accept(r.delivery) : refuse(r.code, r.message);
  }

  /**
   * gemini-cli (0.61, upstream #28775) fails a session/load within the UTC minute of the session's
   * session/new and deletes the saved conversation: a quick park and wake waits for the minute to turn.
   */
  async #outwaitSameMinuteLoad(conv: Conversation): Promise<void> {
    const opened = this.#sessionOpenedAt.get(conv.id);
    if (conv.runtime !== 'gemini' || opened === undefined) return;
    const minute = (t: number) => Math.floor(t / 60_000);
    if (minute(Date.now()) !== minute(opened)) return;
    const wait = (minute(opened) + 1) * 60_000 - Date.now() + 1_000;
    this.events.stage(conv.id, null, 'session', 'started', { event: 'load_delayed', reason: 'gemini_same_minute_load', delay_ms: wait });
    await new Promise((r) => setTimeout(r, wait));
  }

  #argv(spec: RuntimeSpec): readonly string[] {
    return spec.id === 'demo' ? this.#d.config.demoAgentArgv : spec.launch;
  }

  /**
   * Spawns the agent, `initialize`, then `session/load` of the stored session when the agent can
   * (else `session/new`, announced as a session reset when a session existed). Registers the Live.
   */
  async #launch(
    conv: Conversation,
    sandbox: SandboxRow,
    adapter: SandboxAdapter,
    handle: Handle,
    resumeSessionId: string | null,
    model: string,
  ): Promise<{ ok: true; value: Live } | { ok: false; error: string }> {
    const spec = RUNTIME_SPECS[conv.runtime];
    const delivered = await this.#delivery(conv.accountId, conv.runtime, model);
    if (!delivered.ok) return { ok: false, error: delivered.error.message };
    const delivery = delivered.value;
    for (const f of delivery.files) {
      const w = await adapter.writeFile(handle, `${spec.home}/${f.path}`, new TextEncoder().encode(f.content), { mode: 0o600 });
      if (!w.ok) return { ok: false, error: `writing ${spec.home}/${f.path} failed: ${describeError(w.error)}` };
    }
    const live: Live = {
      conversationId: conv.id,
      accountId: conv.accountId,
      sandboxId: sandbox.id,
      handle,
      adapter,
      policy: conv.permissionPolicy,
      runtime: conv.runtime,
      model,
      proc: null,
      turn: null,
      resolved: new Set(),
    };
    // §3.3: every launch gets a fresh sandbox token; the previous one of this conversation stops working.
    const token = await this.sandboxTokens.rotate(conv.accountId, conv.id);
    const env: Array<[string, string]> = this.sandboxTokens.env(conv.id, token);
    if (spec.home !== SANDBOX_HOME) env.push(['HOME', spec.home]);
    env.push(...spec.env.map(([k, v]): [string, string] => [k, v]));
    env.push(...delivery.env.map(([k, v]): [string, string] => [k, v]));
    // The only place a credential leaves its box: into the agent process's env, never a file or an argv.
    env.push(...delivery.secretEnv.map(([k, v]): [string, string] => [k, v.reveal()]));
    await this.#reapAgents(adapter, handle, conv.id, null);
    const launched = await AgentProcess.launch(
      adapter,
      handle,
      { conversationId: conv.id, argv: this.#argv(spec), env, dir: spec.cwd },
      this.#procEvents(live),
      this.#log.child({ conversation: conv.id }),
    );
    if (!launched.ok) {
      await this.sandboxTokens.revoke(conv.id);
      return launched;
    }
    const proc = launched.value;
    live.proc = proc;
    const fail = async (what: string): Promise<{ ok: false; error: string }> => {
      await proc.stop();
      await this.sandboxTokens.revoke(conv.id);
      return { ok: false, error: what };
    };
    const timeout = this.#d.config.acpCallTimeoutMs;
    const timedOut = (method: string) => () => ({ ok: false as const, error: { code: 'acp_closed' as const, message: `${method} got no reply within ${timeout} ms` } });
    const init = await withTimeout(proc.client.initialize(), timeout, timedOut('initialize'));
    if (!init.ok) return fail(`ACP initialize failed: ${init.error.message}`);

    const cwd = adapter.hostPath ? await adapter.hostPath(handle, spec.cwd) : { ok: true as const, value: spec.cwd };
    if (!cwd.ok) return fail(`mapping the agent's cwd failed: ${describeError(cwd.error)}`);

    const mcpServers = platformMcpServers(conv, this.sandboxTokens.baseUrl, token, init.value.agentCapabilities);
    let sessionId: string | null = null;
    let configOptions: Parameters<typeof modelOptionToSet>[0] = null;
    if (resumeSessionId && init.value.agentCapabilities?.loadSession) {
      await this.#outwaitSameMinuteLoad(conv);
      const loaded = await withTimeout(proc.client.loadSession({ cwd: cwd.value, sessionId: resumeSessionId, mcpServers }), timeout, timedOut('session/load'));
      if (loaded.ok) {
        sessionId = resumeSessionId;
        configOptions = loaded.value.configOptions;
      }
      else this.#log.info({ conversation: conv.id, err: loaded.error.message }, 'session/load failed; starting a new session');
    }
    if (!sessionId) {
      const created = await withTimeout(proc.client.newSession({ cwd: cwd.value, mcpServers }), timeout, timedOut('session/new'));
      if (!created.ok) return fail(`ACP session/new failed: ${created.error.message}`);
      sessionId = created.value.sessionId;
      this.#sessionOpenedAt.set(conv.id, Date.now());
      configOptions = created.value.configOptions;
      if (resumeSessionId) {
        this.events.stage(conv.id, null, 'session', 'done', { event: 'reset', reason: 'fresh_session', detail: 'the agent could not load the previous session' });
      }
    }
    const pick = spec.modelOption ? modelOptionToSet(configOptions, model, delivery.modelId) : null;
    if (pick) {
      const set = await withTimeout(proc.client.setConfigOption('model', pick), timeout, timedOut('session/set_config_option'));
      // The runtime's env or config already names the model; the option only keeps the adapter's picker in step.
      if (!set.ok) this.#log.warn({ conversation: conv.id, err: set.error.message }, 'session/set_config_option model failed');
    }
    const cmd = proc.command;
    const priv = cmd?.private?.reveal();
    const agentSessionId = priv && typeof priv === 'object' && typeof (priv as { sessionId?: unknown }).sessionId === 'string' ? (priv as { sessionId: string }).sessionId : null;
    await updateConversation(this.#d.db, conv.id, { runtimeSessionId: sessionId, acpNextId: proc.client.nextRequestId });
    await updateSandbox(this.#d.db, sandbox.id, { agentSessionId });
    this.#live.set(conv.id, live);
    return { ok: true, value: live };
  }

  // ---------------------------------------------------------------- ACP traffic

  /**
   * The hooks of one agent process of `live`. Output events carry their ordinal in the process's output
   * (`seq`), which is what a reattach skips up to; `stderrThrough` is the last stderr chunk already stored.
   */
  #procEvents(live: Live, stderrThrough = -1): (proc: AgentProcess) => AgentProcessEvents {
    return (proc) => ({
      acp: {
        onMessage: (raw, m, ctx) => this.#onAcpLine(live, raw, m, ctx),
        onPermissionRequest: (held) => void this.#onPermission(live, proc, held).catch((e) => this.#log.error({ err: e }, 'permission handling failed')),
        onProblem: (p) => {
          if (p.code === 'acp_not_json' && p.raw !== undefined) this.events.output(live.conversationId, live.turn?.id ?? null, 'stdout', p.raw, p.seq);
        },
      },
      onStderr: (text, ordinal) => {
        // A replay repeats stderr: what precedes the active turn, or was stored before the drop, is not stored again.
        if (ordinal <= stderrThrough || !proc.client.boundarySeen) return;
        this.events.output(live.conversationId, live.turn?.id ?? null, 'stderr', text, ordinal);
      },
      onEnd: (reason, error) => this.#onProcessEnd(live, proc, reason, error),
    });
  }

  #onAcpLine(live: Live, raw: string, message: unknown, ctx: LineContext): void {
    // A session/load replays history the event log already holds; storing it again would duplicate it.
    if (ctx.during === 'session/load') return;
    if (live.turn) {
      live.turn.lastHeardAt = Date.now();
      live.turn.refusal.observe(message);
    }
    this.events.output(live.conversationId, live.turn?.id ?? null, 'acp', raw, ctx.seq);
  }

  async #onPermission(live: Live, proc: AgentProcess, held: HeldPermission): Promise<void> {
    const params = held.params as RequestPermissionRequest;
    const title = params.toolCall.title ?? null;
    const kind = params.toolCall.kind ?? null;
    const verdict = verdictFor(live.policy, title, kind);
    const requestId = `${String(held.id)}.${randomBytes(8).toString('hex')}`;
    const turn = live.turn;
    if (verdict !== 'ask' || !turn) {
      const outcome = verdict === 'auto_deny' || !turn ? denyOutcome(params.options) : allowOutcome(params.options);
      await proc.client.answerPermission(held.id, outcome);
      live.resolved.add(requestId);
      this.events.stage(live.conversationId, turn?.id ?? null, 'permission', 'done', {
        request_id: requestId,
        tool: title ?? kind,
        outcome: verdict === 'ask' ? 'turn_ended' : verdict,
        option_id: outcome.outcome === 'selected' ? outcome.optionId : null,
      });
      return;
    }
    const askedAt = new Date();
    const pending: PendingPermission = {
      request_id: requestId,
      acp_id: held.id,
      tool: title ?? kind ?? 'tool',
      kind,
      options: params.options.map((o) => ({ option_id: o.optionId, name: o.name, kind: o.kind })),
      asked_at: askedAt.toISOString(),
    };
    const timer = setTimeout(() => void this.#resolveAsk(live, requestId, 'timeout').catch((e) => this.#log.error({ err: e }, 'permission timeout failed')), this.#d.config.askTimeoutMs);
    turn.ask = { requestId, acpId: held.id, options: params.options, timer };
    await updateTurn(this.#d.db, turn.id, { pendingPermission: pending });
    this.events.stage(live.conversationId, turn.id, 'permission', 'started', {
      request_id: requestId,
      tool: pending.tool,
      kind,
      options: pending.options,
      timeout_ms: this.#d.config.askTimeoutMs,
    });
  }

  /** Resolves the held ask: answered with an option, timed out (denied), or cancelled by an interrupt. */
  async #resolveAsk(live: Live, requestId: string, how: 'timeout' | 'cancelled' | { optionId: string }): Promise<boolean> {
    const turn = live.turn;
    const ask = turn?.ask;
    if (!turn || !ask || ask.requestId !== requestId) return false;
    clearTimeout(ask.timer);
    turn.ask = null;
    live.resolved.add(requestId);
    const outcome = typeof how === 'object' ? { outcome: 'selected' as const, optionId: how.optionId } : how === 'timeout' ? denyOutcome(ask.options) : { outcome: 'cancelled' as const };
    // Recorded before the agent hears the answer: its reaction (even the end of the turn) must follow
    // the permission's end in the event log, however fast the agent replies.
    await updateTurn(this.#d.db, turn.id, { pendingPermission: null });
    this.events.stage(live.conversationId, turn.id, 'permission', 'done', {
      request_id: requestId,
      outcome: typeof how === 'object' ? 'answered' : how,
      option_id: outcome.outcome === 'selected' ? outcome.optionId : null,
    });
    if (how !== 'cancelled') {
      const sent = await live.proc?.client.answerPermission(ask.acpId, outcome);
      if (sent && !sent.ok) this.#log.warn({ conversation: live.conversationId, err: sent.error.message }, 'the permission answer did not reach the agent');
    }
    await updateConversation(this.#d.db, live.conversationId, { lastActiveAt: new Date() });
    return true;
  }

  #onProcessEnd(live: Live, proc: AgentProcess, reason: string, error?: SandboxError): void {
    if (live.proc !== proc) return;
    this.#log.info({ conversation: live.conversationId, reason }, 'agent process ended');
    live.proc = null;
    const turn = live.turn;
    if (turn && error && this.#recoverable(live, turn, proc, error)) {
      this.#enterRecovery(live, turn, RUNNER_DISCONNECTED);
      return;
    }
    // The running prompt (if any) resolves `acp_closed` through the client and ends its turn.
    if (!live.turn && this.#live.get(live.conversationId) === live) this.#live.delete(live.conversationId);
  }

  // ---------------------------------------------------------------- turns

  async prompt(accountId: string, id: string, text: string): Promise<EngineResult<{ turnId: string }>> {
    // Refused before queueing on the lock: a running turn holds no lock, so this is the fast answer.
    if (this.#live.get(id)?.turn) return refuse('conversation_busy', 'a turn is already running');
    return this.#lock.run(id, async () => {
      // One read for every check: each database round trip here delays the prompt itself.
      const row = await getConversationForPrompt(this.#d.db, accountId, id);
      if (!row) return refuse('not_found', 'conversation not found');
      const conv = row.conversation;
      if (conv.status === 'terminated' || conv.status === 'failed') {
        return refuse('conversation_terminated', `the conversation is ${conv.status}; start a new one`);
      }
      if (!conv.agentId) return refuse('no_agent', "the conversation's agent was deleted");
      if (this.#live.get(id)?.turn || conv.status === 'running') return refuse('conversation_busy', 'a turn is already running');
      if (row.turnOpen) return refuse('conversation_busy', 'a prompt is already queued');
      const awake = await this.#ensureAwake(row);
      if (!awake.ok) return awake;
      // Stored as running at once (one write instead of insert + update); its conversation's
      // counters go with the running mark in #runTurn.
      const turn = await insertTurn(this.#d.db, { conversationId: id, turnNumber: conv.turnCount + 1, prompt: text, status: 'running', startedAt: new Date(), nodeId: this.nodeId, model: awake.value.model });
      await this.#runTurn(awake.value, turn, { turnCount: conv.turnCount + 1, ...(conv.firstPrompt ? {} : { firstPrompt: text }) });
      return accept({ turnId: turn.id });
    });
  }

  /** Makes sure an agent process serves the conversation: resume, probe, re-provision, respawn. */
  async #ensureAwake(row: ConversationWithSandbox): Promise<EngineResult<Live>> {
    const conv = row.conversation;
    const existing = this.#live.get(conv.id);
    if (existing?.proc?.alive) return accept(existing);
    if (existing) this.#live.delete(conv.id);
    const sandbox = row.sandbox;
    const agent = conv.agentId ? await getAgent(this.#d.db, conv.accountId, conv.agentId) : undefined;
    if (!agent) return refuse('no_agent', "the conversation's agent was deleted");
    if (!sandbox || sandbox.status === 'terminated' || sandbox.status === 'failed') return this.#reprovision(conv, agent);

    const provider = sandbox.provider as KnownProvider;
    if (!this.#d.registry.isRegistered(provider)) return refuse('sandbox_probe_failed', `sandbox provider ${provider} is not available`);
    const adapter = this.#d.registry.adapterFor(provider);
    let handle = adapter.buildHandle(sandbox.name);
    const probeFailed = (e: SandboxError): EngineResult<Live> =>
      isRunnerOffline(e)
        ? refuse('runner_offline', "The sandbox's runner is not connected; the conversation wakes when the runner reconnects.")
        : refuse('sandbox_probe_failed', `could not reach the sandbox: ${describeError(e)}`);

    if (sandbox.status === 'suspended') {
      const resumed = await adapter.resume(handle);
      if (!resumed.ok) {
        if (resumed.error.code === 'not_found') return this.#reprovision(conv, agent);
        return probeFailed(resumed.error);
      }
      handle = resumed.value;
      await updateSandbox(this.#d.db, sandbox.id, { status: 'ready', lastResumedAt: new Date() });
      this.events.stage(conv.id, null, 'sandbox', 'done', { event: 'resumed' });
    } else {
      const probe = await adapter.get(handle);
      if (!probe.ok) {
        if (probe.error.code === 'not_found') return this.#reprovision(conv, agent);
        return probeFailed(probe.error);
      }
    }
    const launched = await this.#launch(conv, { ...sandbox, status: 'ready' }, adapter, handle, conv.runtimeSessionId, agent.model);
    if (!launched.ok) return refuse('sandbox_probe_failed', launched.error);
    return accept(launched.value);
  }

  /** The disk is gone (or was reclaimed): a new sandbox, and the runtime session starts over. */
  async #reprovision(conv: Conversation, agent: Agent): Promise<EngineResult<Live>> {
    const provider = (agent.sandboxProvider as KnownProvider | null) ?? this.#d.defaultProvider;
    if (!this.#d.registry.isEnabled(provider)) return refuse('sandbox_provider_disabled', `sandbox provider ${provider} is not configured on this instance`);
    const name = this.#mintName(conv.accountId, provider);
    if (!name.ok) {
      return name.error.code === 'no_runner_online'
        ? refuse('runner_offline', 'No runner is connected; the conversation wakes when a runner connects.')
        : name;
    }
    const refused = await checkBrokerage(this.#d.db, conv.accountId, this.#d.registry.adapterFor(provider), name.value, this.#d.config.brokerAllowUnenforced);
    if (refused) {
      this.#publishRefusal(conv.id, refused);
      return refuse(refused.reason, refused.message, { conversation_id: conv.id, provider });
    }
    const sandbox = await insertSandbox(this.#d.db, { accountId: conv.accountId, provider, name: name.value, status: 'starting' });
    await updateConversation(this.#d.db, conv.id, { sandboxId: sandbox.id });
    const t0 = Date.now();
    this.events.stage(conv.id, null, 'provision', 'started', { provider, name: name.value });
    const r = await this.#bringUp(conv, sandbox, agent, () => false);
    if (!r.ok) {
      await updateSandbox(this.#d.db, sandbox.id, { status: 'failed' });
      this.events.stage(conv.id, null, 'provision', 'failed', { reason: r.error }, Date.now() - t0);
      return refuse('sandbox_probe_failed', r.error);
    }
    this.events.stage(conv.id, null, 'provision', 'done', {}, Date.now() - t0);
    if (conv.runtimeSessionId) {
      this.events.stage(conv.id, null, 'session', 'done', { event: 'reset', reason: 'fresh_sandbox', detail: 'the previous sandbox was gone' });
    }
    return accept(r.value);
  }

  /** Sends the prompt; its reply ends the turn asynchronously. */
  async #runTurn(live: Live, turn: Turn, conversationPatch: Partial<Conversation> = {}): Promise<void> {
    const proc = live.proc;
    const startedAt = turn.status === 'running' && turn.startedAt ? turn.startedAt : new Date();
    const active: ActiveTurn = {
      id: turn.id,
      number: turn.turnNumber,
      startedAt: startedAt.getTime(),
      interrupted: false,
      ask: null,
      interruptTimer: null,
      acpPromptId: null,
      driver: proc,
      recovery: null,
      boundaryTimer: null,
      lastHeardAt: startedAt.getTime(),
      silenceTimer: null,
      refusal: new RefusalWatch(),
    };
    live.turn = active;
    // Both marks are independent writes: issued together, they cost one wait before the prompt goes out.
    await Promise.all([
      turn.status === 'running' && turn.model === live.model ? null : updateTurn(this.#d.db, turn.id, { status: 'running', startedAt, model: live.model }),
      updateConversation(this.#d.db, live.conversationId, { ...conversationPatch, status: 'running', lastActiveAt: startedAt }),
    ]);
    this.events.stage(live.conversationId, turn.id, 'turn', 'started', { turn_id: turn.id, turn_number: turn.turnNumber, mode: 'prompt' });
    if (!proc) {
      await this.#finishTurn(live, active, { ok: false, error: 'the agent process is not running' });
      return;
    }
    const call = proc.client.prompt(turn.prompt);
    if (!call.ok) {
      await this.#finishTurn(live, active, { ok: false, error: call.error.message });
      return;
    }
    const sent = await call.value.sent;
    if (sent.ok) {
      // Set before any await: from here on a dropped runner socket means recovery, not failure.
      active.acpPromptId = call.value.id;
      await updateTurn(this.#d.db, turn.id, { acpPromptId: call.value.id });
    }
    this.#watchSilence(live, active, this.#d.config.turnSilenceTimeoutMs);
    this.#endTurnOnReply(live, active, proc, call.value.done);
  }

  /** Ends the turn with the prompt's reply, unless another process has taken the turn over meanwhile. */
  #endTurnOnReply(live: Live, turn: ActiveTurn, proc: AgentProcess, done: Promise<{ ok: true; value: { stopReason: string } } | { ok: false; error: { code: string; message: string } }>): void {
    void done
      .then((r) => {
        if (turn.driver !== proc) return undefined;
        if (!r.ok && r.error.code === 'runner_replay_line_too_large') return this.#failRecovery(live, turn, 'runner_replay_line_too_large', r.error.message);
        return this.#finishTurn(live, turn, r.ok ? { ok: true, stopReason: r.value.stopReason } : { ok: false, error: promptFailureReason(live.runtime, r.error) });
      })
      .catch((e) => this.#log.error({ err: e, conversation: live.conversationId }, 'finishing a turn failed'));
  }

  /**
   * An agent that sends nothing for the silence timeout (an adapter stuck retrying an unreachable
   * model API, say) would hold the turn forever: the turn fails with the reason and the process is
   * stopped, so the next prompt starts a fresh one. A held permission request has its own timeout.
   */
  #watchSilence(live: Live, turn: ActiveTurn, delayMs: number): void {
    const limit = this.#d.config.turnSilenceTimeoutMs;
    if (limit <= 0 || this.#stopped) return;
    turn.silenceTimer = setTimeout(() => {
      turn.silenceTimer = null;
      if (live.turn !== turn) return;
      const quiet = Date.now() - turn.lastHeardAt;
      if (turn.ask || turn.interrupted || turn.recovery || quiet < limit) {
        // A held permission and a runner recovery have their own deadlines; silence restarts after them.
        this.#watchSilence(live, turn, turn.ask || turn.interrupted || turn.recovery ? limit : limit - quiet);
        return;
      }
      const proc = live.proc;
      const reason = `the agent sent nothing for ${Math.round(quiet / 1000)} s; the turn was abandoned (is the runtime's model API reachable and its credential set?)`;
      void this.#finishTurn(live, turn, { ok: false, error: reason })
        .then(async () => {
          if (proc) {
            await proc.client.cancel();
            await proc.stop();
          }
        })
        .catch((e) => this.#log.error({ err: e, conversation: live.conversationId }, 'abandoning a silent turn failed'));
    }, delayMs);
  }

  async #finishTurn(live: Live, turn: ActiveTurn, r: { ok: true; stopReason: string } | { ok: false; error: string; code?: string }): Promise<void> {
    if (live.turn !== turn) return;
    const refused = r.ok ? turn.refusal.failure : null;
    if (refused) r = { ok: false, error: promptFailureReason(live.runtime, { message: refused, rpc: { code: ACP_AUTH_REQUIRED } }) };
    stopTurnTimers(turn);
    if (turn.ask) {
      clearTimeout(turn.ask.timer);
      live.resolved.add(turn.ask.requestId);
      this.events.stage(live.conversationId, turn.id, 'permission', 'done', { request_id: turn.ask.requestId, outcome: 'turn_ended', option_id: null });
      turn.ask = null;
    }
    live.turn = null;
    const endedAt = new Date();
    const base = { turn_id: turn.id, turn_number: turn.number };
    const duration = endedAt.getTime() - turn.startedAt;
    let state: 'interrupted' | 'done' | 'failed';
    let data: Record<string, unknown>;
    let patch: Partial<Turn>;
    if (turn.interrupted) {
      state = 'interrupted';
      data = { ...base, ...(r.ok ? { stop_reason: r.stopReason } : {}) };
      patch = { status: 'interrupted', stopReason: r.ok ? r.stopReason : null };
    } else if (r.ok && r.stopReason !== 'refusal' && r.stopReason !== 'cancelled') {
      state = 'done';
      data = { ...base, stop_reason: r.stopReason };
      patch = { status: 'completed', stopReason: r.stopReason };
    } else {
      const reason = r.ok ? `stop reason ${r.stopReason}` : r.error;
      state = 'failed';
      data = { ...base, reason, ...(!r.ok && r.code ? { error: r.code } : {}) };
      patch = { status: 'failed', stopReason: r.ok ? r.stopReason : null, reason };
    }
    // Both rows settle before the stage event is published, so a client acting on it reads them
    // settled; the event then skips the batching delay, since the turn's end is what clients wait for.
    await Promise.all([
      updateTurn(this.#d.db, turn.id, { ...patch, endedAt, pendingPermission: null }),
      settleRunningConversation(this.#d.db, live.conversationId, { lastActiveAt: endedAt, acpNextId: live.proc?.client.nextRequestId ?? null }),
    ]);
    this.events.stage(live.conversationId, turn.id, 'turn', state, data, duration);
    this.events.flushSoon();
    if (!live.proc?.alive && this.#live.get(live.conversationId) === live) this.#live.delete(live.conversationId);
  }

  async interrupt(accountId: string, id: string): Promise<EngineResult<void>> {
    const row = await getConversation(this.#d.db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    const live = this.#live.get(id);
    const turn = live?.turn;
    if (!live || !turn) return refuse('no_turn_running', 'no turn is running');
    if (turn.interrupted) return accept(undefined);
    turn.interrupted = true;
    if (turn.recovery) {
      // Interrupt cancels recovery: the turn ends now; the detached agent is reaped at the next launch.
      this.#cancelRecovery(live, turn, 'cancelled');
    }
    if (turn.ask) await this.#resolveAsk(live, turn.ask.requestId, 'cancelled');
    const proc = live.proc;
    if (!proc) {
      await this.#finishTurn(live, turn, { ok: false, error: 'interrupted' });
      return accept(undefined);
    }
    // session/cancel, and every held permission answered `cancelled` (acp.md §5).
    await proc.client.cancel();
    turn.interruptTimer = setTimeout(() => {
      // The agent ignored the cancel: stop its process, which ends the turn.
      if (live.turn === turn) void proc.stop().then(() => this.#finishTurn(live, turn, { ok: false, error: 'interrupted' }));
    }, INTERRUPT_GRACE_MS);
    return accept(undefined);
  }

  async answerPermission(accountId: string, id: string, requestId: string, optionId: string): Promise<EngineResult<void>> {
    const row = await getConversation(this.#d.db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    const live = this.#live.get(id);
    if (live?.turn?.recovery) {
      return refuse('runner_offline', "The sandbox's runner is reconnecting; answer again once it is back (the request keeps its deadline).");
    }
    const ask = live?.turn?.ask;
    if (!live || !ask || ask.requestId !== requestId) {
      if (live?.resolved.has(requestId) || (await this.#wasAsked(accountId, id, requestId))) {
        return refuse('permission_request_resolved', 'the permission request was already answered, timed out, or its turn ended');
      }
      return refuse('not_found', 'permission request not found');
    }
    if (!ask.options.some((o) => o.optionId === optionId)) {
      return refuse('unknown_option', `option_id must be one of: ${ask.options.map((o) => o.optionId).join(', ')}`);
    }
    const done = await this.#resolveAsk(live, requestId, { optionId });
    return done ? accept(undefined) : refuse('permission_request_resolved', 'the permission request was already resolved');
  }

  /** Whether a request id was ever published for this conversation (it may predate this process). */
  async #wasAsked(_accountId: string, id: string, requestId: string): Promise<boolean> {
    const rows = await this.#d.db
      .select({ id: events.id })
      .from(events)
      .where(and(eq(events.conversationId, id), eq(events.stage, 'permission'), sql`${events.data}::jsonb ->> 'request_id' = ${requestId}`))
      .limit(1);
    return rows.length > 0;
  }

  // ---------------------------------------------------------------- terminate, delete

  async terminate(accountId: string, id: string): Promise<EngineResult<void>> {
    const row = await getConversation(this.#d.db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    if (row.conversation.status === 'terminated') return accept(undefined);
    const prov = this.#provisioning.get(id);
    if (prov) prov.cancelled = true;
    // The lock waits for a running provisioning step; the cancelled flag makes it stop early.
    await this.#lock.run(id, () => this.#terminateLocked(id));
    return accept(undefined);
  }

  async #terminateLocked(id: string): Promise<void> {
    this.#sessionOpenedAt.delete(id);
    const row = await getConversationById(this.#d.db, id);
    if (!row || row.conversation.status === 'terminated') return;
    const live = this.#live.get(id);
    if (live?.turn) {
      live.turn.interrupted = true;
      await this.#finishTurn(live, live.turn, { ok: false, error: 'terminated' });
    }
    for (const t of await openTurns(this.#d.db, id)) {
      await updateTurn(this.#d.db, t.id, { status: 'interrupted', reason: 'terminated', endedAt: new Date() });
    }
    if (live) await live.proc?.stop();
    this.#live.delete(id);
    const s = row.sandbox;
    let destroyError: string | null = null;
    if (s && s.status !== 'terminated' && this.#d.registry.isRegistered(s.provider as KnownProvider)) {
      const adapter = this.#d.registry.adapterFor(s.provider as KnownProvider);
      const d = await adapter.destroy(live?.handle ?? adapter.buildHandle(s.name));
      if (!d.ok) destroyError = describeError(d.error);
    }
    const now = new Date();
    if (s) await updateSandbox(this.#d.db, s.id, { status: 'terminated', terminatedAt: now });
    await updateConversation(this.#d.db, id, { status: 'terminated', lastActiveAt: now });
    await this.sandboxTokens.revoke(id, now);
    this.events.stage(id, null, 'terminate', 'done', destroyError ? { destroy_error: destroyError } : {});
  }

  /**
   * Team rotation: a fresh conversation (new agent session) on the same sandbox, its files kept; the
   * old conversation is released — terminated, its sandbox left up for the successor. A sandbox that
   * is gone gives the successor a new one.
   */
  async rotate(accountId: string, id: string, input: { title?: string; channelId?: string }): Promise<EngineResult<ConversationView>> {
    if (this.#live.get(id)?.turn) return refuse('conversation_busy', 'a turn is running; wait for it or interrupt it first');
    return this.#lock.run(id, async (): Promise<EngineResult<ConversationView>> => {
      const row = await getConversation(this.#d.db, accountId, id);
      if (!row) return refuse('not_found', 'conversation not found');
      const conv = row.conversation;
      if (!conv.agentId) return refuse('no_agent', "the conversation's agent was deleted");
      if (conv.status === 'pending') return refuse('provisioning', "The conversation's sandbox is still starting; try again shortly.");
      if (this.#live.get(id)?.turn || conv.status === 'running') return refuse('conversation_busy', 'a turn is running; wait for it or interrupt it first');
      const fresh = { agentId: conv.agentId, title: input.title, channelId: input.channelId };
      const s = row.sandbox;
      if (!s || s.status === 'terminated' || s.status === 'failed' || conv.status === 'terminated' || conv.status === 'failed') {
        const created = await this.create(accountId, fresh);
        if (created.ok && conv.status !== 'terminated' && conv.status !== 'failed') await this.#terminateLocked(id);
        return created;
      }
      const live = this.#live.get(id);
      this.#live.delete(id);
      // The old agent exits on stdin EOF; a parked sandbox has none running.
      await live?.proc?.stop();
      const successor = await insertConversationOn(
        this.#d.db,
        {
          accountId,
          agentId: conv.agentId,
          title: input.title ?? null,
          status: 'idle',
          runtime: conv.runtime,
          permissionPolicy: conv.permissionPolicy,
          source: 'api',
          channelId: input.channelId ?? null,
        },
        s,
      );
      await updateConversation(this.#d.db, id, { status: 'terminated', lastActiveAt: new Date() });
      await this.sandboxTokens.revoke(id);
      this.events.stage(id, null, 'terminate', 'done', { event: 'released', successor_id: successor.conversation.id });
      return accept(await this.view(successor));
    });
  }

  /** Tears the sandbox down and deletes the rows (turns and events cascade). */
  async delete(accountId: string, id: string): Promise<EngineResult<void>> {
    const t = await this.terminate(accountId, id);
    if (!t.ok) return t;
    await this.events.flush();
    const row = await getConversationById(this.#d.db, id);
    if (row) await deleteConversationRows(this.#d.db, id, row.sandbox?.id ?? null);
    return accept(undefined);
  }

  // ---------------------------------------------------------------- idle sweep

  /**
   * Reclaims every sandbox past its max lifetime, then parks every idle sandbox past the idle
   * timeout: suspend where possible, else destroy. Returns how many sandboxes it reclaimed or parked.
   */
  async sweep(now = new Date()): Promise<number> {
    if (this.#stopped) return 0;
    let parked = await this.#reclaimAged(now);
    if (this.#d.config.idleTimeoutMs <= 0) return parked;
    const cutoff = new Date(now.getTime() - this.#d.config.idleTimeoutMs);
    for (const row of await idleCandidates(this.#d.db, cutoff)) {
      const id = row.conversation.id;
      if (this.#live.get(id)?.turn) continue;
      if (await this.#lock.run(id, () => this.#park(id, cutoff))) parked++;
    }
    return parked;
  }

  async #reclaimAged(now: Date): Promise<number> {
    const max = this.#d.config.maxLifetimeMs;
    if (max <= 0) return 0;
    let reclaimed = 0;
    for (const row of await agedCandidates(this.#d.db, new Date(now.getTime() - max))) {
      const id = row.conversation.id;
      if (await this.#lock.run(id, () => this.#reclaim(id, now))) reclaimed++;
    }
    return reclaimed;
  }

  /** Max lifetime (contract.md §8): destroys even a busy sandbox; the conversation stays idle. */
  async #reclaim(id: string, now: Date): Promise<boolean> {
    const row = await getConversationById(this.#d.db, id);
    const s = row?.sandbox;
    if (!row || !s || s.status !== 'ready') return false;
    const live = this.#live.get(id);
    // A running conversation whose turn this node does not hold is another node's to reclaim.
    if (row.conversation.status !== 'idle' && !(row.conversation.status === 'running' && live?.turn)) return false;
    const limits = { idleTimeoutMs: this.#d.config.idleTimeoutMs, maxLifetimeMs: this.#d.config.maxLifetimeMs };
    const verdict = checkLifecycle(limits, s.lastResumedAt ?? s.insertedAt, row.conversation.lastActiveAt, !!live?.turn, now);
    if (verdict.kind !== 'expired' || verdict.reason !== 'max_lifetime') return false;
    if (!this.#d.registry.isRegistered(s.provider as KnownProvider)) return false;
    const adapter = this.#d.registry.adapterFor(s.provider as KnownProvider);
    const handle = live?.handle ?? adapter.buildHandle(s.name);
    if (live?.turn) await this.#finishTurn(live, live.turn, { ok: false, error: 'the sandbox reached its maximum lifetime' });
    if (live) {
      await live.proc?.stop();
      this.#live.delete(id);
    }
    const d = await adapter.destroy(handle);
    if (!d.ok) {
      // An offline runner cannot destroy; the row stays ready and the next sweep tries again.
      this.#log.warn({ conversation: id, err: describeError(d.error) }, 'max-lifetime destroy failed');
      return false;
    }
    await updateSandbox(this.#d.db, s.id, { status: 'terminated', terminatedAt: new Date(), agentSessionId: null });
    this.events.stage(id, null, 'sandbox', 'done', {
      event: 'reclaimed',
      reason: 'max_lifetime',
      message: 'the sandbox reached its maximum lifetime and was destroyed; the next prompt starts a fresh one',
    });
    return true;
  }

  async #park(id: string, cutoff: Date): Promise<boolean> {
    const row = await getConversationById(this.#d.db, id);
    const s = row?.sandbox;
    if (!row || !s || row.conversation.status !== 'idle' || s.status !== 'ready' || row.conversation.lastActiveAt >= cutoff) return false;
    const live = this.#live.get(id);
    // Nothing is parked while a turn or a permission request is open.
    if (live?.turn) return false;
    if (!this.#d.registry.isRegistered(s.provider as KnownProvider)) return false;
    const adapter = this.#d.registry.adapterFor(s.provider as KnownProvider);
    const handle = live?.handle ?? adapter.buildHandle(s.name);
    if (live) {
      await live.proc?.stop();
      this.#live.delete(id);
    }
    if (idleAction(adapter.capabilities(handle)) === 'suspend') {
      const r = await adapter.suspend(handle);
      if (r.ok) {
        await updateSandbox(this.#d.db, s.id, { status: 'suspended', agentSessionId: null });
        this.events.stage(id, null, 'sandbox', 'done', { event: 'suspended', reason: 'idle', message: 'parked after the idle timeout; the next prompt wakes it' });
        return true;
      }
      if (isRunnerOffline(r.error)) {
        // An offline runner can neither suspend nor destroy; its disk stays, and so does the row.
        this.#log.info({ conversation: id }, 'idle park deferred: runner offline');
        return false;
      }
      this.#log.warn({ conversation: id, err: describeError(r.error) }, 'suspend failed; destroying instead');
    }
    const d = await adapter.destroy(handle);
    if (!d.ok) {
      this.#log.warn({ conversation: id, err: describeError(d.error) }, 'idle destroy failed');
      return false;
    }
    await updateSandbox(this.#d.db, s.id, { status: 'terminated', terminatedAt: new Date(), agentSessionId: null });
    this.events.stage(id, null, 'sandbox', 'done', { event: 'reclaimed', reason: 'idle', message: 'the sandbox was destroyed after the idle timeout; the next prompt starts a fresh one' });
    return true;
  }

  // ---------------------------------------------------------------- recovery (runner-protocol.md §11)

  /** §11.1: a runner socket drop on the turn's own process after its prompt was sent. */
  #recoverable(live: Live, turn: ActiveTurn, proc: AgentProcess, error: SandboxError): boolean {
    return (
      live.adapter.provider === 'runner' &&
      error.code === 'unavailable' &&
      error.detail === RUNNER_DISCONNECTED &&
      turn.acpPromptId !== null &&
      turn.driver === proc &&
      !turn.interrupted &&
      !this.#stopped
    );
  }

  /**
   * The turn stays busy while the runner is away: its prompt's process keeps running (and journaling) on
   * the daemon. Synchronous up to the first tick, so a reply the old client fails afterwards is ignored.
   */
  #enterRecovery(live: Live, turn: ActiveTurn, reason: string): void {
    if (turn.recovery || this.#stopped) return;
    turn.driver = null;
    if (turn.boundaryTimer) clearTimeout(turn.boundaryTimer);
    turn.boundaryTimer = null;
    // The held permission's timer is re-armed on restore for what is left of its original deadline.
    if (turn.ask) clearTimeout(turn.ask.timer);
    const windowMs = this.#d.config.recoveryWindowMs;
    turn.recovery = { token: ++this.#recoveryTokens, deadline: Date.now() + windowMs, timer: null };
    this.#log.info({ conversation: live.conversationId, turn: turn.id, reason }, 'turn waits for its runner');
    this.events.stage(live.conversationId, turn.id, 'connection', 'started', { reason, turn_id: turn.id, timeout_ms: windowMs });
    this.#scheduleRecovery(live, turn);
  }

  #scheduleRecovery(live: Live, turn: ActiveTurn): void {
    const rec = turn.recovery;
    if (!rec) return;
    const token = rec.token;
    rec.timer = setTimeout(() => {
      const tick = this.#recoveryTick(live, turn, token).catch((e) => this.#log.error({ err: e, conversation: live.conversationId }, 'recovery tick failed'));
      this.#ticks.add(tick);
      void tick.finally(() => this.#ticks.delete(tick));
    }, this.#d.config.recoveryRetryMs);
    rec.timer.unref();
  }

  async #recoveryTick(live: Live, turn: ActiveTurn, token: number): Promise<void> {
    const current = () => turn.recovery?.token === token && live.turn === turn && !this.#stopped;
    if (!current()) return;
    turn.recovery!.timer = null;
    if (Date.now() >= turn.recovery!.deadline) {
      await this.#failRecovery(live, turn, 'runner_reconnect_timeout', `the runner did not reconnect within ${Math.round(this.#d.config.recoveryWindowMs / 1000)} s`);
      return;
    }
    const r = await this.#lock.run(live.conversationId, () => this.#reattach(live, turn, current));
    if (r === 'attached' || !current()) return;
    if (r === 'wait') this.#scheduleRecovery(live, turn);
    else await this.#failRecovery(live, turn, r.failure, r.detail);
  }

  /** §11.3: find the conversation's agent session, attach with stdin, continue the sent prompt over the replay. */
  async #reattach(
    live: Live,
    turn: ActiveTurn,
    current: () => boolean,
  ): Promise<'attached' | 'wait' | { failure: RecoveryFailure; detail: string }> {
    const { adapter, handle } = live;
    const waitOr = (e: SandboxError, failure: RecoveryFailure) =>
      isRunnerOffline(e) || isTransient(e) ? ('wait' as const) : { failure, detail: describeError(e) };
    const list = await adapter.listSessions(handle);
    if (!current()) return 'wait';
    if (!list.ok) return waitOr(list.error, 'list_sessions_failed');
    const row = await getConversationById(this.#d.db, live.conversationId);
    const turnRow = await getTurn(this.#d.db, turn.id);
    if (!row || !turnRow || turn.acpPromptId === null) return { failure: 'no_active_session', detail: 'the turn is gone' };
    const sessionId = row.conversation.runtimeSessionId;
    if (!sessionId) return { failure: 'acp_session_unknown', detail: 'the ACP session id was never stored' };
    const picked = pickSession(list.value, live.conversationId, row.sandbox?.agentSessionId ?? null);
    if (!picked) return { failure: 'no_active_session', detail: 'the runner has no agent session for this conversation' };
    for (const s of picked.superseded) await this.#reapSession(adapter, handle, s.id);

    // Everything stored so far is skipped in the replay, so each line of output is stored exactly once.
    await this.events.flush();
    const through = await storedOutputSeqs(this.#d.db, turn.id);
    if (!current()) return 'wait';
    const pending = turnRow.pendingPermission;
    const re = await AgentProcess.reattach(
      adapter,
      handle,
      {
        sessionId: picked.session.id,
        acp: {
          sessionId,
          promptId: turn.acpPromptId,
          replayThrough: through.lines,
          ...(pending && pending.acp_id !== null ? { pendingPermissionId: pending.acp_id } : {}),
        },
      },
      this.#procEvents(live, through.stderr),
      this.#log.child({ conversation: live.conversationId }),
    );
    if (!re.ok) {
      const e = re.error;
      if (!('message' in e)) return waitOr(e, 'attach_failed');
      return { failure: 'attach_failed', detail: e.message };
    }
    const { proc, prompt } = re.value;
    if (!current()) {
      await proc.release('recovery was cancelled');
      return 'wait';
    }
    if (proc.command?.replayFrom) {
      await proc.release('the journal no longer starts at byte zero');
      return { failure: 'runner_replay_truncated', detail: `the runner's journal lost its first ${proc.command.replayFrom} bytes` };
    }
    turn.recovery = null;
    live.proc = proc;
    turn.driver = proc;
    this.events.stage(live.conversationId, turn.id, 'reattach', 'done', {
      outcome: 'session_attached',
      matched_by: picked.matchedBy,
      session_id: picked.session.id,
      turn_id: turn.id,
      turn_number: turn.number,
      acp_prompt_id: turn.acpPromptId,
    });
    this.#restoreAsk(live, turn, pending);
    this.events.stage(live.conversationId, turn.id, 'connection', 'done', { reason: 'runner_reconnect', outcome: 'session_attached' });
    this.#endTurnOnReply(live, turn, proc, prompt);
    turn.boundaryTimer = setTimeout(() => {
      turn.boundaryTimer = null;
      if (turn.driver !== proc || live.turn !== turn || proc.client.boundarySeen) return;
      void this.#failRecovery(
        live,
        turn,
        'runner_replay_boundary_missing',
        `the replay did not reach the reply to request ${turn.acpPromptId! - 1} within ${this.#d.config.replayBoundaryTimeoutMs} ms`,
      ).catch((e) => this.#log.error({ err: e }, 'failing a recovery failed'));
    }, this.#d.config.replayBoundaryTimeoutMs);
    turn.boundaryTimer.unref();
    return 'attached';
  }

  /** §11.5: the held request comes back with its ORIGINAL deadline; a reconnect never extends it. */
  #restoreAsk(live: Live, turn: ActiveTurn, pending: PendingPermission | null): void {
    if (turn.ask) clearTimeout(turn.ask.timer);
    turn.ask = null;
    if (!pending || pending.acp_id === null) return;
    const requestId = pending.request_id;
    const remaining = permissionRemainingMs(pending, this.#d.config.askTimeoutMs, Date.now());
    const timer = setTimeout(() => void this.#resolveAsk(live, requestId, 'timeout').catch((e) => this.#log.error({ err: e }, 'permission timeout failed')), remaining);
    turn.ask = { requestId, acpId: pending.acp_id, options: storedOptions(pending), timer };
  }

  /** §11.6: the reconnect ends `failed`, the local peer stops, the turn fails; the conversation takes new prompts. */
  async #failRecovery(live: Live, turn: ActiveTurn, failure: RecoveryFailure, detail: string): Promise<void> {
    if (live.turn !== turn) return;
    this.#log.warn({ conversation: live.conversationId, turn: turn.id, failure, detail }, 'turn recovery failed');
    this.#cancelRecovery(live, turn, 'failed', failure);
    const proc = live.proc;
    live.proc = null;
    await proc?.release('turn recovery failed');
    await this.#finishTurn(live, turn, { ok: false, error: `sprite connection lost: ${failure}: ${detail}`, code: failure });
  }

  /** Ends a recovery (interrupt, failure) and records how the reconnect ended. */
  #cancelRecovery(live: Live, turn: ActiveTurn, outcome: 'cancelled' | 'failed', error?: RecoveryFailure): void {
    const wasWaiting = turn.recovery !== null;
    if (turn.recovery?.timer) clearTimeout(turn.recovery.timer);
    turn.recovery = null;
    if (turn.boundaryTimer) clearTimeout(turn.boundaryTimer);
    turn.boundaryTimer = null;
    turn.driver = null;
    if (wasWaiting || outcome === 'failed') {
      this.events.stage(live.conversationId, turn.id, 'connection', 'done', { reason: 'runner_reconnect', outcome, ...(error ? { error } : {}) });
    }
    if (outcome === 'failed' && wasWaiting) {
      this.events.stage(live.conversationId, turn.id, 'reattach', 'failed', { turn_id: turn.id, error: error ?? null, retryable: false });
    }
  }

  /** Ends superseded agent processes of this conversation on the runner (agents exit when stdin closes). */
  async #reapAgents(adapter: SandboxAdapter, handle: Handle, conversationId: string, keep: string | null): Promise<void> {
    if (adapter.provider !== 'runner') return;
    const list = await adapter.listSessions(handle);
    if (!list.ok) return;
    for (const s of runningSessionsOf(list.value, conversationId)) if (s.id !== keep) await this.#reapSession(adapter, handle, s.id);
  }

  async #reapSession(adapter: SandboxAdapter, handle: Handle, sessionId: string): Promise<void> {
    const a = await adapter.attach(handle, sessionId, { owner: () => undefined, stdin: true });
    if (!a.ok) return;
    const c = await adapter.closeStdin(a.value);
    await adapter.stopCommand(a.value);
    this.#log.info({ session: sessionId, closed: c.ok }, 'reaped a superseded agent process');
  }

  /**
   * Boot trigger (§11.1): a turn a lost node (a previous process of this server, or another node of the
   * cluster) left running on a runner, its prompt sent, waits for the runner like a live drop. The
   * runner may be connected to any node: the reattach goes through the runner host.
   */
  async #recoverAtBoot(c: Conversation, t: Turn, reason: string): Promise<boolean> {
    if (t.status !== 'running' || t.acpPromptId === null || !this.#d.runnerHost || !this.#d.registry.isRegistered('runner')) return false;
    const row = await getConversationById(this.#d.db, c.id);
    const s = row?.sandbox;
    if (!s || s.provider !== 'runner' || s.status !== 'ready') return false;
    const adapter = this.#d.registry.adapterFor('runner');
    const live: Live = {
      conversationId: c.id,
      accountId: c.accountId,
      sandboxId: s.id,
      handle: adapter.buildHandle(s.name),
      adapter,
      policy: c.permissionPolicy,
      runtime: c.runtime,
      model: t.model ?? '',
      proc: null,
      turn: null,
      resolved: new Set(),
    };
    const turn: ActiveTurn = {
      id: t.id,
      number: t.turnNumber,
      startedAt: (t.startedAt ?? new Date()).getTime(),
      interrupted: false,
      ask: null,
      interruptTimer: null,
      acpPromptId: t.acpPromptId,
      driver: null,
      recovery: null,
      boundaryTimer: null,
      lastHeardAt: Date.now(),
      silenceTimer: null,
      refusal: new RefusalWatch(),
    };
    live.turn = turn;
    // A process this node still holds for the conversation belongs to an earlier turn; the adopted turn's replaces it.
    const stale = this.#live.get(c.id);
    if (stale) await this.#detach(stale, 'a lost node ran a later turn');
    this.#live.set(c.id, live);
    this.#enterRecovery(live, turn, reason);
    return true;
  }

  /** What this node does with the open work of lost nodes once it has claimed it (ownership.ts). */
  #adopter(): Adopter {
    return {
      provisioning: (c, loss) => this.#lock.run(c.id, () => this.#failOpen(c, loss)),
      turn: (c, t, loss) =>
        this.#lock.run(c.id, async () => {
          if (!(await this.#recoverAtBoot(c, t, loss.recoveryReason))) await this.#failOpen(c, loss, t);
        }),
      driving: () => [...this.#live.values()].flatMap((l) => (l.turn ? [l.turn.id] : [])),
      release: async (turnId) => {
        const live = [...this.#live.values()].find((l) => l.turn?.id === turnId);
        if (live) await this.#detach(live, 'another node adopted the turn');
      },
    };
  }

  /** Fails the open turns a lost node left (just `only`, when given), then the provisioning or the running mark. */
  async #failOpen(c: Conversation, loss: Loss, only?: Turn): Promise<void> {
    for (const t of only ? [only] : await openTurns(this.#d.db, c.id)) {
      await updateTurn(this.#d.db, t.id, { status: 'failed', reason: loss.turnReason, endedAt: new Date() });
      this.events.stage(c.id, t.id, 'turn', 'failed', { turn_id: t.id, turn_number: t.turnNumber, reason: loss.turnReason });
    }
    if (c.status === 'pending') {
      await updateConversation(this.#d.db, c.id, { status: 'failed', failureReason: loss.provisioningReason });
      this.events.stage(c.id, null, 'provision', 'failed', { reason: loss.provisioningReason });
    } else if (!this.#live.get(c.id)?.turn) {
      await settleRunningConversation(this.#d.db, c.id, {});
    }
  }

  async #teardown(live: Live): Promise<void> {
    await live.proc?.stop();
    this.#live.delete(live.conversationId);
    const d = await live.adapter.destroy(live.handle);
    if (!d.ok) this.#log.warn({ err: describeError(d.error) }, 'could not destroy a cancelled sandbox');
  }
}
