/**
 * Bringing a conversation's sandbox up: create (name-keyed, adopted if it exists), prepare, launch;
 * waking a parked one (resume or probe) and re-provisioning a sandbox that is gone (§14.1).
 */
import type { KnownProvider, SandboxError } from '../../sandbox/index.ts';
import { describeError } from '../../sandbox/index.ts';
import { getAgent } from '../agents/store.ts';
import { RUNTIME_SPECS } from '../agents/runtimes.ts';
import type { Agent, Conversation, PermissionPolicy, SandboxRow } from '../store/conversation-schema.ts';
import { checkBrokerage, type BrokerageRefusal } from './brokerage.ts';
import { accept, refuse, type EngineResult } from './errors.ts';
import type { Launched } from './launcher.ts';
import type { EngineCore, EngineParts, Live } from './live.ts';
import { STRICTNESS, loosening, verdictFor } from './policy.ts';
import { capReason } from './reason.ts';
import { prepareSandbox } from './provision.ts';
import { getConversationById, insertConversation, insertSandbox, insertTurn, openTurns, updateConversation, updateSandbox, updateTurn, type ConversationWithSandbox } from './store.ts';

export interface CreateConversationInput {
  readonly agentId: string;
  readonly title?: string | undefined;
  readonly prompt?: string | undefined;
  readonly permissionPolicy?: PermissionPolicy | undefined;
  /** A client channel; `fountain:team` makes the conversation its agent's teammate. */
  readonly channelId?: string | undefined;
  /** Created with this conversation's sandbox token: a child, never looser than its parent's policy. */
  readonly parentId?: string | undefined;
}

export class Provisioner {
  /** Conversations whose first provisioning is running, with a flag terminate raises. */
  readonly #running = new Map<string, { cancelled: boolean; done: Promise<void> }>();

  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {}

  /** Stores the conversation (and its first turn) and starts provisioning in the background. */
  async create(accountId: string, input: CreateConversationInput): Promise<EngineResult<ConversationWithSandbox>> {
    const { db, registry, config } = this.c.d;
    const agent = await getAgent(db, accountId, input.agentId);
    if (!agent) return refuse('not_found', 'agent not found');
    const provider = (agent.sandboxProvider as KnownProvider | null) ?? this.c.d.defaultProvider;
    if (!registry.isEnabled(provider)) {
      return refuse('sandbox_provider_disabled', `sandbox provider ${provider} is not configured on this instance`);
    }
    const policy = this.#effectivePolicy(agent.permissionPolicy, input.permissionPolicy);
    if (!policy.ok) return policy;
    if (input.parentId !== undefined) {
      const parent = await getConversationById(db, input.parentId);
      if (!parent || parent.conversation.accountId !== accountId) return refuse('not_found', 'the parent conversation is gone');
      const looser = loosening(policy.value, parent.conversation.permissionPolicy);
      if (looser) return refuse('permission_policy_widens', `a sandbox's child conversation may not be looser than its own: ${looser}`);
    }
    // Before any sandbox work: a runtime without its model credential would only fail at its first prompt.
    const delivery = await this.p.launcher.delivery(accountId, agent.runtime, agent.model);
    if (!delivery.ok) return delivery;
    const name = this.c.d.placement.mint(accountId, provider);
    if (!name.ok) return name;
    const refused = await checkBrokerage(db, accountId, registry.adapterFor(provider), name.value, config.brokerAllowUnenforced);
    if (refused) {
      // The refusal is recorded on a failed conversation so its stage event has a home; no sandbox is created.
      const row = await insertConversation(
        db,
        { accountId, agentId: agent.id, title: input.title ?? null, firstPrompt: input.prompt ?? null, status: 'failed', failureReason: refused.reason, runtime: agent.runtime, permissionPolicy: policy.value, source: 'api' },
        { provider, name: name.value, status: 'failed' },
      );
      this.#publishRefusal(row.conversation.id, refused);
      return refuse(refused.reason, refused.message, { conversation_id: row.conversation.id, provider });
    }

    const row = await insertConversation(
      db,
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
        parentConversationId: input.parentId ?? null,
        ...(input.parentId === undefined ? {} : { source: 'agent' as const }),
        turnCount: input.prompt ? 1 : 0,
        nodeId: this.c.nodeId,
      },
      { provider, name: name.value, status: 'starting' },
    );
    const conv = row.conversation;
    if (input.prompt) await insertTurn(db, { conversationId: conv.id, turnNumber: 1, prompt: input.prompt, status: 'pending', nodeId: this.c.nodeId });
    this.#start(conv, row.sandbox!, agent);
    return accept(row);
  }

  /** Raises the cancel flag of a running first provisioning (terminate); true when there was one. */
  cancel(conversationId: string): void {
    const prov = this.#running.get(conversationId);
    if (prov) prov.cancelled = true;
  }

  /** Resolves once every provisioning in flight has finished (stop). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#running.values()].map((p) => p.done));
  }

  /** What is stored and shown of a failure: capped, with the whole text in the log. */
  #storedReason(conversationId: string, text: string): string {
    const reason = capReason(text);
    if (reason !== text) this.c.log.warn({ conversation: conversationId, reason: text }, 'provisioning failed (the stored reason is capped)');
    return reason;
  }

  #publishRefusal(conversationId: string, r: BrokerageRefusal): void {
    this.c.events.stage(conversationId, null, 'network', 'failed', { type: r.type, provider: r.provider, reason: r.reason, message: r.message });
    this.c.events.stage(conversationId, null, 'provision', 'failed', { reason: r.reason });
  }

  #effectivePolicy(agentPolicy: PermissionPolicy, launch: PermissionPolicy | undefined): EngineResult<PermissionPolicy> {
    if (!launch) return accept(agentPolicy);
    for (const [key, verdict] of Object.entries(launch)) {
      const base = key === 'default' ? verdictFor(agentPolicy, {}) : verdictFor(agentPolicy, { toolName: key, title: key, kind: key });
      if (STRICTNESS[verdict] < STRICTNESS[base]) {
        return refuse('permission_policy_widens', `permission_policy may only narrow the agent's: ${key} is ${base} on the agent`);
      }
    }
    return accept({ ...agentPolicy, ...launch });
  }

  #start(conv: Conversation, sandbox: SandboxRow, agent: Agent): void {
    const state = { cancelled: false, done: Promise.resolve() };
    state.done = this.c.lock
      .run(conv.id, () => this.#provision(conv, sandbox, agent, state))
      .catch((e) => this.c.log.error({ err: e, conversation: conv.id }, 'provisioning crashed'))
      .finally(() => this.#running.delete(conv.id));
    this.#running.set(conv.id, state);
  }

  /** The fresh provision of §14.1; a failure destroys what it created and fails the conversation. */
  async #provision(conv: Conversation, sandbox: SandboxRow, agent: Agent, state: { cancelled: boolean }): Promise<void> {
    const db = this.c.d.db;
    const t0 = Date.now();
    this.c.events.stage(conv.id, null, 'provision', 'started', { provider: sandbox.provider, name: sandbox.name });
    const r = await this.#bringUp(conv, sandbox, agent, () => state.cancelled);
    if (state.cancelled) {
      if (r.ok) await this.p.launcher.teardown(r.value);
      return;
    }
    if (!r.ok) {
      const reason = this.#storedReason(conv.id, r.error);
      await updateSandbox(db, sandbox.id, { status: 'failed' });
      await updateConversation(db, conv.id, { status: 'failed', failureReason: reason });
      this.c.events.stage(conv.id, null, 'provision', 'failed', { reason }, Date.now() - t0);
      for (const t of await openTurns(db, conv.id)) {
        await updateTurn(db, t.id, { status: 'failed', reason: `provisioning failed: ${reason}`, endedAt: new Date() });
      }
      return;
    }
    this.c.events.stage(conv.id, null, 'provision', 'done', {}, Date.now() - t0);
    await updateConversation(db, conv.id, { status: 'idle', lastActiveAt: new Date() });
    const [queued] = await openTurns(db, conv.id);
    if (queued) await this.p.turns.start(r.value, queued);
  }

  /**
   * Create (adopt), prepare, launch the agent and open its ACP session. On failure the sandbox this
   * call created is destroyed again.
   */
  async #bringUp(conv: Conversation, sandbox: SandboxRow, agent: Agent, cancelled: () => boolean): Promise<Launched> {
    const adapter = this.c.d.registry.adapterFor(sandbox.provider as KnownProvider);
    const created = await adapter.create(sandbox.name);
    if (!created.ok) return { ok: false, error: `creating the sandbox failed: ${describeError(created.error)}` };
    const handle = created.value;
    const destroy = async (error: string): Promise<Launched> => {
      const d = await adapter.destroy(handle);
      if (!d.ok) this.c.log.warn({ err: describeError(d.error), sandbox: sandbox.name }, 'could not destroy a failed sandbox');
      return { ok: false, error };
    };
    if (cancelled()) return destroy('terminated while provisioning');
    const spec = RUNTIME_SPECS[conv.runtime];
    const prep = await prepareSandbox(adapter, handle, spec, {
      system: agent.system,
      env: this.p.launcher.sandboxEnv(conv.id),
      installTimeoutMs: this.c.d.config.installTimeoutMs,
    });
    if (!prep.ok) return destroy(prep.reason);
    if (cancelled()) return destroy('terminated while provisioning');
    const live = await this.p.launcher.launch(conv, sandbox, adapter, handle, null, agent.model);
    if (!live.ok) return destroy(live.error);
    await updateSandbox(this.c.d.db, sandbox.id, { status: 'ready' });
    return live;
  }

  /** Makes sure an agent process serves the conversation: resume, probe, re-provision, respawn. */
  async ensureAwake(row: ConversationWithSandbox): Promise<EngineResult<Live>> {
    const conv = row.conversation;
    const existing = this.c.live.get(conv.id);
    if (existing?.proc?.alive) return accept(existing);
    if (existing) this.c.live.delete(conv.id);
    const sandbox = row.sandbox;
    const agent = conv.agentId ? await getAgent(this.c.d.db, conv.accountId, conv.agentId) : undefined;
    if (!agent) return refuse('no_agent', "the conversation's agent was deleted");
    if (!sandbox || sandbox.status === 'terminated' || sandbox.status === 'failed') return this.#reprovision(conv, agent);

    const provider = sandbox.provider as KnownProvider;
    if (!this.c.d.registry.isRegistered(provider)) return refuse('sandbox_probe_failed', `sandbox provider ${provider} is not available`);
    const adapter = this.c.d.registry.adapterFor(provider);
    let handle = adapter.buildHandle(sandbox.name);
    const probeFailed = (e: SandboxError): EngineResult<Live> =>
      this.c.d.placement.hostAway(e)
        ? refuse('runner_offline', "The sandbox's runner is not connected; the conversation wakes when the runner reconnects.")
        : refuse('sandbox_probe_failed', `could not reach the sandbox: ${describeError(e)}`);

    if (sandbox.status === 'suspended') {
      const resumed = await adapter.resume(handle);
      if (!resumed.ok) {
        if (resumed.error.code === 'not_found') return this.#reprovision(conv, agent);
        return probeFailed(resumed.error);
      }
      handle = resumed.value;
      await updateSandbox(this.c.d.db, sandbox.id, { status: 'ready', lastResumedAt: new Date() });
      this.c.events.stage(conv.id, null, 'sandbox', 'done', { event: 'resumed' });
    } else {
      const probe = await adapter.get(handle);
      if (!probe.ok) {
        if (probe.error.code === 'not_found') return this.#reprovision(conv, agent);
        return probeFailed(probe.error);
      }
    }
    const launched = await this.p.launcher.launch(conv, { ...sandbox, status: 'ready' }, adapter, handle, conv.runtimeSessionId, agent.model);
    if (!launched.ok) return refuse('sandbox_probe_failed', launched.error);
    return accept(launched.value);
  }

  /** The disk is gone (or was reclaimed): a new sandbox, and the runtime session starts over. */
  async #reprovision(conv: Conversation, agent: Agent): Promise<EngineResult<Live>> {
    const db = this.c.d.db;
    const provider = (agent.sandboxProvider as KnownProvider | null) ?? this.c.d.defaultProvider;
    if (!this.c.d.registry.isEnabled(provider)) return refuse('sandbox_provider_disabled', `sandbox provider ${provider} is not configured on this instance`);
    const name = this.c.d.placement.mint(conv.accountId, provider);
    if (!name.ok) {
      return name.error.code === 'no_runner_online'
        ? refuse('runner_offline', 'No runner is connected; the conversation wakes when a runner connects.')
        : name;
    }
    const refused = await checkBrokerage(db, conv.accountId, this.c.d.registry.adapterFor(provider), name.value, this.c.d.config.brokerAllowUnenforced);
    if (refused) {
      this.#publishRefusal(conv.id, refused);
      return refuse(refused.reason, refused.message, { conversation_id: conv.id, provider });
    }
    const sandbox = await insertSandbox(db, { accountId: conv.accountId, provider, name: name.value, status: 'starting' });
    await updateConversation(db, conv.id, { sandboxId: sandbox.id });
    const t0 = Date.now();
    this.c.events.stage(conv.id, null, 'provision', 'started', { provider, name: name.value });
    const r = await this.#bringUp(conv, sandbox, agent, () => false);
    if (!r.ok) {
      const reason = this.#storedReason(conv.id, r.error);
      await updateSandbox(db, sandbox.id, { status: 'failed' });
      this.c.events.stage(conv.id, null, 'provision', 'failed', { reason }, Date.now() - t0);
      return refuse('sandbox_probe_failed', reason);
    }
    this.c.events.stage(conv.id, null, 'provision', 'done', {}, Date.now() - t0);
    if (conv.runtimeSessionId) {
      this.c.events.stage(conv.id, null, 'session', 'done', { event: 'reset', reason: 'fresh_sandbox', detail: 'the previous sandbox was gone' });
    }
    return accept(r.value);
  }
}
