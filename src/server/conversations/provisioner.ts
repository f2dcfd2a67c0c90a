/**
 * Bringing a conversation's sandbox up: create (name-keyed, adopted if it exists), prepare, launch;
 * waking a parked one (resume or probe) and re-provisioning a sandbox that is gone.
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import type { KnownProvider, SandboxError } from '../../sandbox/index.ts';
import { describeError } from '../../sandbox/index.ts';
import { getAgent } from '../agents/store.ts';
import { SANDBOX_HOME, modelProblem, specFor } from '../runtimes/table.ts';
import type {
  Agent,
  Conversation,
  PermissionPolicy,
  RepositoryBranch,
  SandboxRow,
  TurnImage,
} from '../store/conversation-schema.ts';
import { checkBranch } from '../environments/branches.ts';
import { modelRefusal } from '../gateway/limits.ts';
import { checkBrokerage, type BrokerageRefusal } from './brokerage.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import type { EngineCore, EngineParts, Live } from './live.ts';
import { STRICTNESS, loosening, verdictFor } from './policy.ts';
import { capReason } from './reason.ts';
import { prepareSandbox } from './provision.ts';
import {
  deleteConversationRows,
  getConversationById,
  insertConversation,
  insertSandbox,
  openTurns,
  updateConversation,
  updateSandbox,
  type ConversationWithSandbox,
} from './store.ts';
import { endUndrivenTurn } from './turn/rows.ts';
import { countMembers, PoolFull, type PoolSlot } from './pool.ts';
import { insertAdmittedTurn, insertQueuedTurn } from './turn/queued.ts';
import { planLaunch, type LaunchPlan, type StepName } from '../environments/plan.ts';
import { runSteps, STEP_TIMEOUTS } from '../environments/steps.ts';
import type { Handle, SandboxAdapter } from '../../sandbox/index.ts';

export interface CreateConversationInput {
  readonly agentId: string;
  readonly title?: string | undefined;
  readonly prompt?: string | undefined;
  /** The first prompt's images, already stored (image-blobs.ts). */
  readonly images?: readonly TurnImage[] | undefined;
  readonly permissionPolicy?: PermissionPolicy | undefined;
  /** A client channel; `fountain:team` makes the conversation its agent's teammate. */
  readonly channelId?: string | undefined;
  /** Created with this conversation's sandbox token: a child, never looser than its parent's policy. */
  readonly parentId?: string | undefined;
  /** Overrides the agent's environment for this conversation (must pass the agent's allowed_environment_ids). */
  readonly environmentId?: string | undefined;
  /** Secrets attached at launch: sealed on the conversation, winning over the environment's on collision. */
  readonly secrets?: Readonly<Record<string, string>> | undefined;
  /** A fork: the new conversation starts from a parent's history and checkpoint (relocate.ts). */
  readonly fork?: ForkSeed | undefined;
  /** A branch of the environment's repository (`repository` names one; its first when absent) to clone instead of its ref. */
  readonly branch?: string | undefined;
  readonly repository?: string | undefined;
  /** The model (`provider/id`) instead of the agent's; it must fit the agent's runtime as the agent's own does. */
  readonly model?: string | undefined;
  /** A warm-pool member (pool.ts): stored hidden, never queued; PoolFull is thrown when it does not fit. */
  readonly pool?: PoolSlot | undefined;
}

/** What a fork carries over from its parent; `copy` fills the new conversation's turns, events and checkpoint. */
export interface ForkSeed {
  readonly parent: Conversation;
  readonly turnCount: number;
  readonly runtimeSessionId: string | null;
  readonly usageTotal: Conversation['usageTotal'];
  copy(conversationId: string): Promise<void>;
}

/** A provisioning failure: the reason in words and, when a step failed, which one. */
type BringUpFailure = { ok: false; error: string; step?: StepName | undefined };
type BringUp = { ok: true; value: Live } | BringUpFailure;
/** Filled by a bring-up that restores: the checkpoint it restored, or null when there was none. */
type Restore = { from: { turnId: string | null; createdAt: Date } | null };

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
    const fork = input.fork;
    // A fork keeps its parent's policy, environment and launch secrets: it goes on from the same sandbox state.
    const policy = fork
      ? accept(fork.parent.permissionPolicy)
      : this.#effectivePolicy(agent.permissionPolicy, input.permissionPolicy);
    if (!policy.ok) return policy;
    if (input.parentId !== undefined) {
      const parent = await getConversationById(db, input.parentId);
      if (!parent || parent.conversation.accountId !== accountId)
        return refuse('not_found', 'the parent conversation is gone');
      const looser = loosening(policy.value, parent.conversation.permissionPolicy);
      if (looser)
        return refuse(
          'permission_policy_widens',
          `a sandbox's child conversation may not be looser than its own: ${looser}`,
        );
    }
    // A fork goes on with its parent's model; null stores "the agent's", whatever it is at each launch.
    const model = fork ? fork.parent.model : (input.model ?? null);
    const problem = model === null ? null : modelProblem(agent.runtime, model);
    if (problem)
      return refuse('model_not_for_runtime', `model ${model} does not fit the agent's runtime: ${problem}`, {
        errors: { model: [problem] },
      });
    // The gateway would refuse each of its calls: said now, before a sandbox is made for nothing.
    if (model !== null && modelRefusal(agent.modelLimits, model))
      return refuse(
        'model_not_allowed',
        `model ${model} is not on agent ${agent.name}'s model allow-list (model_limits.models: ${agent.modelLimits.models?.join(', ')})`,
      );
    // Before any sandbox work: a runtime without its model credential would only fail at its first prompt.
    const delivery = await this.p.launcher.delivery(accountId, agent.runtime, model ?? agent.model, null, {
      custom: agent.customRuntime,
      credentialSet: agent.credentialSet,
    });
    if (!delivery.ok) return delivery;
    const gateway = await this.p.launcher.gatewayServer(
      agent.id,
      agent.runtime,
      model ?? agent.model,
      provider,
      agent.customRuntime,
    );
    if (!gateway.ok) return gateway;
    const chosen = await this.#chooseEnvironment(accountId, agent, input.environmentId);
    if (!chosen.ok) return chosen;
    const picked = fork
      ? accept(fork.parent.repositoryBranch)
      : await this.#pickBranch(accountId, chosen.value.id, input);
    if (!picked.ok) return picked;
    const launchSecrets = fork
      ? fork.parent.launchSecrets
      : (this.c.d.environments?.sealLaunchSecrets(accountId, input.secrets) ?? null);
    const name = await this.c.d.placement.mint(accountId, provider, agent.runnerId);
    // A new conversation cannot wait for its pinned runner: 409 (a conflict with the agent's pin), not the 503 a parked one answers.
    if (!name.ok)
      return name.error.code === 'runner_offline' ? { ok: false, error: { ...name.error, status: 409 } } : name;
    const refused = await checkBrokerage(
      db,
      accountId,
      registry.adapterFor(provider),
      name.value,
      config.brokerAllowUnenforced,
      chosen.value.limited,
    );
    // A pool member refused by the gate is not made: the refusal is the agent's, said when a conversation starts.
    if (refused && input.pool) return refuse(refused.reason, refused.message, { provider });
    if (refused) {
      // The refusal is recorded on a failed conversation so its stage event has a home; no sandbox is created.
      const row = await insertConversation(
        db,
        {
          accountId,
          agentId: agent.id,
          title: input.title ?? null,
          firstPrompt: input.prompt ?? null,
          status: 'failed',
          failureReason: refused.reason,
          runtime: agent.runtime,
          permissionPolicy: policy.value,
          source: 'api',
          environmentId: input.environmentId ?? null,
          model,
        },
        { provider, name: name.value, status: 'failed' },
      );
      this.#publishRefusal(row.conversation.id, refused);
      this.c.changed(accountId);
      return refuse(refused.reason, refused.message, { conversation_id: row.conversation.id, provider });
    }

    // Beyond the account's limits it waits whole: no sandbox is created until it leaves the queue.
    const admitted = await this.p.capacity.admit(
      accountId,
      { turn: !!input.prompt, sandbox: true, kind: 'conversation' },
      async (tx, queued) => {
        // A member never waits in the queue, and the pool is counted under the account's lock (two nodes filling it).
        const pool = input.pool;
        if (pool && (queued || (await countMembers(tx, agent.id, pool.key)) >= pool.size)) throw new PoolFull();
        const row = await insertConversation(
          tx,
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
            nodeId: queued ? null : this.c.nodeId,
            environmentId: input.environmentId ?? null,
            launchSecrets,
            repositoryBranch: picked.value,
            model,
            ...(pool ? { poolAgentId: agent.id, poolKey: pool.key } : {}),
            ...(fork
              ? {
                  firstPrompt: fork.parent.firstPrompt,
                  turnCount: fork.turnCount,
                  runtimeSessionId: fork.runtimeSessionId,
                  usageTotal: fork.usageTotal,
                }
              : {}),
          },
          { provider, name: name.value, status: queued ? 'pending' : 'starting' },
        );
        const conversationId = row.conversation.id;
        const fields = { conversationId, turnNumber: 1, prompt: input.prompt ?? '', images: [...(input.images ?? [])] };
        const turn = !input.prompt
          ? null
          : queued
            ? await insertQueuedTurn(tx, fields)
            : await insertAdmittedTurn(tx, { ...fields, nodeId: this.c.nodeId });
        return { row, conversationId, turnId: turn?.id ?? null };
      },
    );
    const row = admitted.value.row;
    const conv = row.conversation;
    if (fork) {
      try {
        await fork.copy(conv.id);
      } catch (e) {
        // Nothing half-forked stays: the new conversation goes with what was copied so far.
        await deleteConversationRows(db, conv.id, row.sandbox?.id ?? null);
        throw e;
      }
    }
    if (admitted.queued) return accept(row);
    this.c.changed(accountId);
    this.#start(conv, row.sandbox!, agent, fork !== undefined);
    return accept(row);
  }

  /** Provisions a new conversation the capacity queue admitted (its sandbox row is `starting` now). */
  async startQueued(conversationId: string): Promise<void> {
    const row = await getConversationById(this.c.d.db, conversationId);
    if (!row?.sandbox || row.conversation.status !== 'pending') return;
    const conv = row.conversation;
    const agent = conv.agentId ? await getAgent(this.c.d.db, conv.accountId, conv.agentId) : undefined;
    if (!agent) {
      await updateSandbox(this.c.d.db, row.sandbox.id, { status: 'failed' });
      await updateConversation(this.c.d.db, conv.id, {
        status: 'failed',
        failureReason: "the conversation's agent was deleted while it waited in the queue",
      });
      for (const t of await openTurns(this.c.d.db, conv.id))
        await endUndrivenTurn(this.c.d.db, t.id, 'failed', "the conversation's agent was deleted");
      this.c.changed(conv.accountId);
      this.c.freed();
      return;
    }
    this.c.changed(conv.accountId);
    // A fork that waited is the one new conversation with an agent session already: it starts from its checkpoint.
    this.#start(conv, { ...row.sandbox, status: 'starting' }, agent, conv.runtimeSessionId !== null);
  }

  /** Raises the cancel flag of a running first provisioning (terminate); true when there was one. */
  cancel(conversationId: string): void {
    const prov = this.#running.get(conversationId);
    if (prov) prov.cancelled = true;
  }

  /**
   * The environment a launch uses (the override, else the agent's) and, when it limits the network,
   * its name for the gate. An override must be the account's and pass the agent's allowed_environment_ids.
   */
  async #chooseEnvironment(
    accountId: string,
    agent: Agent,
    override: string | undefined,
  ): Promise<EngineResult<{ id: string | null; limited: string | null }>> {
    const envs = this.c.d.environments;
    if (override !== undefined) {
      const allowed = agent.allowedEnvironmentIds;
      const env = envs ? await envs.get(accountId, override) : undefined;
      if (!env) return refuse('environment_not_found', `environment ${override} not found`);
      if (allowed !== null && !allowed.includes(override) && override !== agent.environmentId) {
        return refuse(
          'environment_not_allowed',
          `agent ${agent.name} does not allow environment ${env.name} (see its allowed_environment_ids)`,
        );
      }
      return accept({ id: env.id, limited: env.networkingType === 'limited' ? env.name : null });
    }
    return this.#limitedOf(accountId, agent.environmentId);
  }

  /** The branch asked for, checked against the remote (listed with the environment's token); null when none was. */
  async #pickBranch(
    accountId: string,
    environmentId: string | null,
    input: CreateConversationInput,
  ): Promise<EngineResult<RepositoryBranch | null>> {
    if (input.branch === undefined) {
      if (input.repository !== undefined) return refuse('branch_not_found', 'a repository was named without a branch');
      return accept(null);
    }
    const envs = this.c.d.environments;
    if (!environmentId || !envs)
      return refuse('no_repository', 'the conversation has no environment with a repository');
    const r = await checkBranch(envs, accountId, environmentId, input.repository, input.branch);
    return r.ok ? accept(r.value) : refuse(r.error.code, r.error.message);
  }

  async #limitedOf(
    accountId: string,
    environmentId: string | null,
  ): Promise<EngineResult<{ id: string | null; limited: string | null }>> {
    if (!environmentId || !this.c.d.environments) return accept({ id: null, limited: null });
    const env = await this.c.d.environments.get(accountId, environmentId);
    return accept({ id: env?.id ?? null, limited: env?.networkingType === 'limited' ? env.name : null });
  }

  /** The launch plan of a conversation: its environment (override or agent's) with secrets opened, skills, MCP. */
  async #plan(conv: Conversation, agent: Agent): Promise<{ ok: true; value: LaunchPlan | null } | BringUpFailure> {
    const envs = this.c.d.environments;
    if (!envs) return { ok: true, value: null };
    const launch = await envs.forLaunch(conv.accountId, conv.environmentId ?? agent.environmentId, conv.launchSecrets);
    if (!launch.ok) return { ok: false, error: launch.message };
    const plan = planLaunch(specFor(conv.runtime, agent.customRuntime), agent, launch.value, conv.repositoryBranch);
    if (!plan.ok) {
      this.c.events.stage(conv.id, null, plan.step, 'failed', { reason: plan.reason });
      return { ok: false, error: `${plan.step}: ${plan.reason}`, step: plan.step };
    }
    return { ok: true, value: plan.value };
  }

  /** Runs the environment's steps (all of them, or on a woken sandbox those whose input changed) and records what ran. */
  async #applySteps(
    conv: Conversation,
    sandbox: SandboxRow,
    adapter: SandboxAdapter,
    handle: Handle,
    plan: LaunchPlan,
    previous: Record<string, string> | null,
  ): Promise<{ ok: true; ran: StepName[] } | BringUpFailure> {
    const r = await runSteps({
      adapter,
      handle,
      plan,
      previous,
      timeouts: STEP_TIMEOUTS,
      skillsGitBaseUrl: this.c.d.config.skillsGitBaseUrl,
      stage: (stage, state, data, ms) => this.c.events.stage(conv.id, null, stage, state, data, ms),
    });
    await updateSandbox(this.c.d.db, sandbox.id, { provisioned: r.hashes });
    return r.ok ? { ok: true, ran: r.ran } : { ok: false, error: r.reason, step: r.step };
  }

  /** Resolves once every provisioning in flight has finished (stop). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#running.values()].map((p) => p.done));
  }

  /** What is stored and shown of a failure: capped, with the whole text in the log. */
  #storedReason(conversationId: string, text: string): string {
    const reason = capReason(text);
    if (reason !== text)
      this.c.log.warn(
        { conversation: conversationId, reason: text },
        'provisioning failed (the stored reason is capped)',
      );
    return reason;
  }

  #publishRefusal(conversationId: string, r: BrokerageRefusal): void {
    this.c.events.stage(conversationId, null, 'network', 'failed', {
      type: r.type,
      provider: r.provider,
      reason: r.reason,
      message: r.message,
    });
    this.c.events.stage(conversationId, null, 'provision', 'failed', { reason: r.reason });
  }

  #effectivePolicy(
    agentPolicy: PermissionPolicy,
    launch: PermissionPolicy | undefined,
  ): EngineResult<PermissionPolicy> {
    if (!launch) return accept(agentPolicy);
    for (const [key, verdict] of Object.entries(launch)) {
      const base =
        key === 'default'
          ? verdictFor(agentPolicy, {})
          : verdictFor(agentPolicy, { toolName: key, title: key, kind: key });
      if (STRICTNESS[verdict] < STRICTNESS[base]) {
        return refuse(
          'permission_policy_widens',
          `permission_policy may only narrow the agent's: ${key} is ${base} on the agent`,
        );
      }
    }
    return accept({ ...agentPolicy, ...launch });
  }

  #start(conv: Conversation, sandbox: SandboxRow, agent: Agent, restore: boolean): void {
    const state = { cancelled: false, done: Promise.resolve() };
    state.done = this.c.lock
      .run(conv.id, () => this.#provision(conv, sandbox, agent, state, restore))
      .catch((e) => this.c.log.error({ err: e, conversation: conv.id }, 'provisioning crashed'))
      .finally(() => this.#running.delete(conv.id));
    this.#running.set(conv.id, state);
  }

  /** The fresh provision (the steps in docs/environments.md); a failure destroys what it created and fails the conversation. */
  async #provision(
    conv: Conversation,
    sandbox: SandboxRow,
    agent: Agent,
    state: { cancelled: boolean },
    restoring: boolean,
  ): Promise<void> {
    const db = this.c.d.db;
    const t0 = Date.now();
    this.c.events.stage(conv.id, null, 'provision', 'started', { provider: sandbox.provider, name: sandbox.name });
    const restore: Restore | undefined = restoring ? { from: null } : undefined;
    const r = await this.#bringUp(conv, sandbox, agent, () => state.cancelled, restore);
    if (state.cancelled) {
      if (r.ok) await this.p.launcher.teardown(r.value);
      return;
    }
    if (!r.ok) {
      const reason = this.#storedReason(conv.id, r.error);
      await updateSandbox(db, sandbox.id, { status: 'failed' });
      await updateConversation(db, conv.id, { status: 'failed', failureReason: reason });
      this.c.changed(conv.accountId);
      this.c.events.stage(
        conv.id,
        null,
        'provision',
        'failed',
        { reason, ...(r.step ? { step: r.step } : {}) },
        Date.now() - t0,
      );
      for (const t of await openTurns(db, conv.id)) {
        await endUndrivenTurn(db, t.id, 'failed', `provisioning failed: ${reason}`);
      }
      this.c.freed();
      return;
    }
    this.c.events.stage(conv.id, null, 'provision', 'done', {}, Date.now() - t0);
    if (restore?.from) this.#restored(conv.id, restore.from, 'the fork starts from the checkpoint of its parent');
    await updateConversation(db, conv.id, { status: 'idle', lastActiveAt: new Date() });
    const [queued] = await openTurns(db, conv.id);
    if (queued) await this.p.turns.start(r.value, queued);
  }

  /**
   * Plan, create (adopt), run the environment's steps, prepare, launch the agent and open its ACP
   * session. On failure the sandbox this call created is destroyed again.
   */
  async #bringUp(
    conv: Conversation,
    sandbox: SandboxRow,
    agent: Agent,
    cancelled: () => boolean,
    restore?: Restore,
  ): Promise<BringUp> {
    // Before any sandbox: a missing ${VAR} or secret costs nothing to report.
    const plan = await this.#plan(conv, agent);
    if (!plan.ok) return plan;
    const adapter = this.c.d.registry.adapterFor(sandbox.provider as KnownProvider);
    const created = await adapter.lifecycle.create(sandbox.name);
    if (!created.ok) return { ok: false, error: `creating the sandbox failed: ${describeError(created.error)}` };
    const handle = created.value;
    const destroy = async (error: string, step?: StepName): Promise<BringUpFailure> => {
      const d = await adapter.lifecycle.destroy(handle);
      if (!d.ok)
        this.c.log.warn({ err: describeError(d.error), sandbox: sandbox.name }, 'could not destroy a failed sandbox');
      return { ok: false, error, step };
    };
    if (cancelled()) return destroy('terminated while provisioning');
    if (plan.value) {
      const steps = await this.#applySteps(conv, sandbox, adapter, handle, plan.value, null);
      if (!steps.ok) return destroy(steps.error, steps.step);
      if (cancelled()) return destroy('terminated while provisioning');
    }
    const spec = specFor(conv.runtime, agent.customRuntime);
    // A lost sandbox's replacement gets the newest checkpoint after the environment's steps (a fresh clone is
    // then overlaid with the work it held) and before the runtime's files are written again.
    if (restore && this.c.d.checkpoints && spec.home.startsWith(SANDBOX_HOME)) {
      const r = await this.c.d.checkpoints.restore({
        conversationId: conv.id,
        accountId: conv.accountId,
        adapter,
        handle,
        home: spec.home,
        cwd: spec.cwd,
        relocateSessions: spec.relocateSessions,
      });
      if (!r.ok) return destroy(`${r.message}; the checkpoint is kept and the next message tries again`);
      restore.from = r.restored;
      if (cancelled()) return destroy('terminated while provisioning');
    }
    const prep = await prepareSandbox(adapter, handle, spec, {
      system: agent.system,
      env: this.p.launcher.sandboxEnv(conv.id, plan.value),
      installTimeoutMs: this.c.d.config.installTimeoutMs,
    });
    if (!prep.ok) return destroy(prep.reason);
    if (cancelled()) return destroy('terminated while provisioning');
    const resume = restore?.from ? conv.runtimeSessionId : null;
    const model = conv.model ?? agent.model;
    const live = await this.p.launcher.launch(conv, sandbox, adapter, handle, resume, model, plan.value);
    if (!live.ok) return destroy(live.error);
    await updateSandbox(this.c.d.db, sandbox.id, { status: 'ready' });
    return live;
  }

  /** Makes sure an agent process serves the conversation: resume, probe, re-provision, respawn. */
  async ensureAwake(row: ConversationWithSandbox & { readonly agent?: Agent | null }): Promise<EngineResult<Live>> {
    const conv = row.conversation;
    const existing = this.c.live.get(conv.id);
    if (existing?.proc?.alive) {
      if (!(await this.p.launcher.deliveryChanged(existing, row.agent))) return accept(existing);
      // A replaced (or removed) credential: the agent holding the old one stops, a new one starts with the new.
      this.c.events.stage(conv.id, null, 'session', 'started', {
        event: 'relaunch',
        reason: 'credential_changed',
        detail: "the agent's model credential changed: restarting the agent with the new one",
      });
      await existing.proc.stop();
    }
    if (existing) this.c.live.delete(conv.id);
    const sandbox = row.sandbox;
    const agent =
      row.agent !== undefined
        ? (row.agent ?? undefined)
        : conv.agentId
          ? await getAgent(this.c.d.db, conv.accountId, conv.agentId)
          : undefined;
    if (!agent) return refuse('no_agent', "the conversation's agent was deleted");
    if (!sandbox || sandbox.status === 'terminated' || sandbox.status === 'failed')
      return this.#reprovision(conv, agent);
    // Placed by a move and not created yet: it is created where the move put it, from the newest checkpoint.
    if (sandbox.status === 'pending') return this.#placed(conv, agent, sandbox);

    const provider = sandbox.provider as KnownProvider;
    if (!this.c.d.registry.isRegistered(provider))
      return refuse('sandbox_probe_failed', `sandbox provider ${provider} is not available`);
    const adapter = this.c.d.registry.adapterFor(provider);
    let handle = adapter.buildHandle(sandbox.name);
    const probeFailed = async (e: SandboxError): Promise<EngineResult<Live>> => {
      // A deleted runner never brings its disk back: the conversation moves on (from its checkpoint).
      if (this.c.d.placement.hostAway(e) && (await this.c.d.placement.hostGone(conv.accountId, sandbox))) {
        await updateSandbox(this.c.d.db, sandbox.id, { status: 'terminated' });
        this.c.events.stage(conv.id, null, 'sandbox', 'failed', {
          event: 'host_gone',
          reason: "the sandbox's runner was deleted",
        });
        return this.#reprovision(conv, agent);
      }
      if (!this.c.d.placement.hostAway(e))
        return refuse('sandbox_probe_failed', `could not reach the sandbox: ${describeError(e)}`);
      const away = await this.c.d.placement.host(conv.accountId, sandbox);
      const which = away?.name ? `Runner ${JSON.stringify(away.name)}` : "The sandbox's runner";
      return refuse(
        'runner_offline',
        `${which} is not connected; the conversation wakes when the runner reconnects.`,
        away ? { runner_id: away.id, runner_name: away.name || null } : undefined,
      );
    };

    const resume = adapter.lifecycle.resume?.bind(adapter.lifecycle);
    if (sandbox.status === 'suspended' && resume) {
      const resumed = await resume(handle);
      if (!resumed.ok) {
        if (resumed.error.code === 'not_found') return this.#reprovision(conv, agent);
        return probeFailed(resumed.error);
      }
      handle = resumed.value;
      await updateSandbox(this.c.d.db, sandbox.id, { status: 'ready', lastResumedAt: new Date() });
      this.c.events.stage(conv.id, null, 'sandbox', 'done', { event: 'resumed' });
    } else {
      const probe = await adapter.lifecycle.get(handle);
      if (!probe.ok) {
        if (probe.error.code === 'not_found') return this.#reprovision(conv, agent);
        return probeFailed(probe.error);
      }
    }
    const plan = await this.#plan(conv, agent);
    if (!plan.ok) return refuse('sandbox_probe_failed', plan.error);
    if (plan.value) {
      const reapplied = await this.#reapply(conv, sandbox, adapter, handle, plan.value);
      if (!reapplied.ok) return reapplied;
    }
    const launched = await this.p.launcher.launch(
      conv,
      { ...sandbox, status: 'ready' },
      adapter,
      handle,
      conv.runtimeSessionId,
      conv.model ?? agent.model,
      plan.value,
    );
    if (!launched.ok) return refuse('sandbox_probe_failed', launched.error);
    return accept(launched.value);
  }

  /**
   * A woken sandbox keeps what its steps did; only steps whose input changed since run again, announced
   * as `provision` `{event: "reapply", steps}`. A failed step destroys the sandbox: the next prompt provisions afresh.
   */
  async #reapply(
    conv: Conversation,
    sandbox: SandboxRow,
    adapter: SandboxAdapter,
    handle: Handle,
    plan: LaunchPlan,
  ): Promise<EngineResult<void>> {
    const changed = plan.steps.filter((s) => sandbox.provisioned[s.name] !== s.hash).map((s) => s.name);
    if (changed.length === 0) return accept(undefined);
    const t0 = Date.now();
    this.c.events.stage(conv.id, null, 'provision', 'started', {
      event: 'reapply',
      steps: changed,
      reason: 'the environment changed since the sandbox was provisioned',
    });
    const r = await this.#applySteps(conv, sandbox, adapter, handle, plan, sandbox.provisioned);
    if (!r.ok) {
      const d = await adapter.lifecycle.destroy(handle);
      if (!d.ok)
        this.c.log.warn({ err: describeError(d.error), sandbox: sandbox.name }, 'could not destroy a failed sandbox');
      await updateSandbox(this.c.d.db, sandbox.id, { status: 'failed' });
      this.c.events.stage(
        conv.id,
        null,
        'provision',
        'failed',
        { event: 'reapply', reason: r.error, ...(r.step ? { step: r.step } : {}) },
        Date.now() - t0,
      );
      return refuse('sandbox_probe_failed', `applying the changed environment failed at ${r.error}`);
    }
    this.c.events.stage(conv.id, null, 'provision', 'done', { event: 'reapply', steps: r.ran }, Date.now() - t0);
    return accept(undefined);
  }

  /**
   * A sandbox a move placed (its name routes it to the target): created there when its host is connected;
   * while it is away the message is refused naming it; a host deleted since gives the move up.
   */
  async #placed(conv: Conversation, agent: Agent, sandbox: SandboxRow): Promise<EngineResult<Live>> {
    const host = await this.c.d.placement.host(conv.accountId, sandbox);
    if (host && !host.online) {
      if (await this.c.d.placement.hostGone(conv.accountId, sandbox)) {
        await updateSandbox(this.c.d.db, sandbox.id, { status: 'terminated' });
        this.c.events.stage(conv.id, null, 'sandbox', 'failed', {
          event: 'host_gone',
          reason: 'the runner the conversation was moved to was deleted',
        });
        return this.#reprovision(conv, agent);
      }
      return refuse(
        'runner_offline',
        `The conversation was moved to runner ${JSON.stringify(host.name)}, which is not connected; it starts there when the runner connects (or move it elsewhere).`,
        { runner_id: host.id, runner_name: host.name || null },
      );
    }
    return this.#reprovision(conv, agent, sandbox);
  }

  /** The disk is gone (or was reclaimed, or moved): a new sandbox, from the newest checkpoint when there is one. */
  async #reprovision(conv: Conversation, agent: Agent, placed?: SandboxRow): Promise<EngineResult<Live>> {
    const db = this.c.d.db;
    const provider =
      (placed?.provider as KnownProvider | undefined) ??
      (agent.sandboxProvider as KnownProvider | null) ??
      this.c.d.defaultProvider;
    if (!this.c.d.registry.isEnabled(provider))
      return refuse('sandbox_provider_disabled', `sandbox provider ${provider} is not configured on this instance`);
    const name = placed ? accept(placed.name) : await this.c.d.placement.mint(conv.accountId, provider, agent.runnerId);
    if (!name.ok) {
      return name.error.code === 'no_runner_online'
        ? refuse('runner_offline', 'No runner is connected; the conversation wakes when a runner connects.')
        : name;
    }
    const env = await this.#limitedOf(conv.accountId, conv.environmentId ?? agent.environmentId);
    const refused = await checkBrokerage(
      db,
      conv.accountId,
      this.c.d.registry.adapterFor(provider),
      name.value,
      this.c.d.config.brokerAllowUnenforced,
      env.ok ? env.value.limited : null,
    );
    if (refused) {
      this.#publishRefusal(conv.id, refused);
      return refuse(refused.reason, refused.message, { conversation_id: conv.id, provider });
    }
    let sandbox: SandboxRow;
    if (placed) {
      sandbox = { ...placed, status: 'starting' };
      await updateSandbox(db, placed.id, { status: 'starting' });
    } else {
      sandbox = await insertSandbox(db, { accountId: conv.accountId, provider, name: name.value, status: 'starting' });
      await updateConversation(db, conv.id, { sandboxId: sandbox.id });
    }
    const t0 = Date.now();
    this.c.events.stage(conv.id, null, 'provision', 'started', { provider, name: name.value });
    const restore: Restore = { from: null };
    const r = await this.#bringUp(conv, sandbox, agent, () => false, restore);
    if (!r.ok) {
      const reason = this.#storedReason(conv.id, r.error);
      await updateSandbox(db, sandbox.id, { status: 'failed' });
      this.c.events.stage(
        conv.id,
        null,
        'provision',
        'failed',
        { reason, ...(r.step ? { step: r.step } : {}) },
        Date.now() - t0,
      );
      return refuse('sandbox_probe_failed', reason);
    }
    this.c.events.stage(conv.id, null, 'provision', 'done', {}, Date.now() - t0);
    if (restore.from) {
      this.#restored(
        conv.id,
        restore.from,
        placed
          ? 'the conversation was moved; its newest checkpoint was restored into a new sandbox there'
          : 'the previous sandbox was gone; its newest checkpoint was restored into a new one',
      );
    } else if (conv.runtimeSessionId) {
      const carried = await this.p.launcher.carryHistory(r.value);
      this.c.events.stage(conv.id, null, 'session', 'done', {
        event: 'reset',
        reason: 'fresh_sandbox',
        history: carried ? 'carried_over' : 'none',
        detail: carried
          ? 'the previous sandbox was gone, so the agent started anew; the next message gives it the conversation so far'
          : 'the previous sandbox was gone',
      });
    }
    return accept(r.value);
  }

  #restored(conversationId: string, from: NonNullable<Restore['from']>, detail: string): void {
    this.c.events.stage(conversationId, null, 'sandbox', 'done', {
      event: 'restored',
      from_turn: from.turnId,
      checkpoint_at: from.createdAt.toISOString(),
      detail,
    });
  }
}
