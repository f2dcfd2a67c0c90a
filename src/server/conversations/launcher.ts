/**
 * Starting and letting go of a conversation's agent process: a fresh sandbox token, spawn, ACP
 * `initialize` and `session/load` or `session/new`; the process's hooks; reaping superseded agents.
 *
 * Over 400 lines because a launch is one sequence (token, delivery, files, spawn, initialize, session,
 * settings) and its hooks; moving the credential delivery half to a module of its own is due.
 */
import { setAcceptsImages } from './image-blobs.ts';
import type { ContentBlock, SessionNotification } from '@agentclientprotocol/sdk';
import type { LineContext } from '../../acp/index.ts';
import { toolFieldsOf } from '../../acp/tool-view.ts';
import type { Handle, SandboxAdapter, SandboxError } from '../../sandbox/index.ts';
import { describeError } from '../../sandbox/index.ts';
import { specFor, type RuntimeSpec } from '../runtimes/table.ts';
import { getAgent } from '../agents/store.ts';
import type { Agent, Conversation, SandboxRow } from '../store/conversation-schema.ts';
import { AgentProcess, type AgentProcessEvents } from './agent-process.ts';
import { newLive, withTimeout, type EngineCore, type EngineParts, type Live } from './live.ts';
import { runningSessionsOf } from './recovery.ts';
import { platformMcpServers } from './sandbox-token.ts';
import { deliveryFor, type Delivery } from '../credentials/delivery.ts';
import type { GatewayVia, LaunchAgent } from '../credentials/service.ts';
import { agentCredentialDelivery, gatewayReach } from '../gateway/reach.ts';
import { gatewayBaseUrl, type GatewayApi } from '../gateway/vendors.ts';
import { credentialsFor } from '../credentials/providers.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import { modelOptionToSet } from './model-option.ts';
import { offeredFrom } from './session-settings.ts';
import { applyAtLaunch } from './settings-command.ts';
import { GIT_IDENTITY, type LaunchPlan } from '../environments/plan.ts';
import { mergeRuntimeFile } from '../environments/mcp.ts';
import { getConversationById, setAgentTitle, updateConversation, updateSandbox } from './store.ts';
import { Continuity } from './continuity.ts';
import { capReason } from './reason.ts';

export type Launched = { ok: true; value: Live } | { ok: false; error: string };

/** What the credentials need of an agent for a launch: its custom runtime and credential set. */
const launchAgent = (a: Agent | undefined): LaunchAgent | null =>
  a ? { custom: a.customRuntime, credentialSet: a.credentialSet } : null;

export class Launcher {
  /** When this node last opened a new ACP session per conversation (gemini's same-minute load bug). */
  readonly #sessionOpenedAt = new Map<string, number>();
  readonly #continuity: Continuity;

  constructor(
    private readonly c: EngineCore,
    private readonly p: EngineParts,
  ) {
    this.#continuity = new Continuity(c.d.db);
  }

  /**
   * What `.env` holds: the environment's variables, never a secret. The sandbox token and secrets are
   * not in it (a file outlives the process and lands in checkpoints): only the agent's process env has them.
   */
  sandboxEnv(conversationId: string, plan: LaunchPlan | null): Array<[string, string]> {
    const env: Array<[string, string]> = [['FOUNTAIN_CONVERSATION_ID', conversationId]];
    if (this.c.sandboxTokens.baseUrl) env.push(['FOUNTAIN_BASE_URL', this.c.sandboxTokens.baseUrl]);
    for (const [k, v] of plan?.env ?? []) env.push([k, v]);
    return env;
  }

  /** The credential, endpoint and model settings a launch of `runtime` hands its agent process. */
  async delivery(
    accountId: string,
    runtime: Conversation['runtime'],
    model: string,
    via?: GatewayVia | null,
    agent?: LaunchAgent | null,
  ): Promise<EngineResult<Delivery>> {
    if (!this.c.d.credentials) return accept(deliveryFor(runtime, model, null));
    const r = await this.c.d.credentials.forLaunch(accountId, runtime, model, via, agent);
    return r.ok ? accept(r.delivery) : refuse(r.code, r.message);
  }

  /** Where a sandbox of `provider` reaches the model gateway when the agent's delivery is `gateway`; null for `direct`. */
  async gatewayServer(
    agentId: string | null,
    runtime: Conversation['runtime'],
    model: string,
    provider: string,
    custom?: Agent['customRuntime'],
  ): Promise<EngineResult<string | null>> {
    // A runtime without a model credential (demo) has nothing to deliver either way.
    if (credentialsFor(runtime, model, custom).length === 0) return accept(null);
    if ((await agentCredentialDelivery(this.c.d.db, agentId)) === 'direct') return accept(null);
    const reach = gatewayReach(provider, this.c.d.config.publicUrl, this.c.sandboxTokens.baseUrl);
    return reach.ok ? accept(reach.url) : refuse('gateway_unreachable', reach.message);
  }

  /**
   * Whether the running agent of `live` was launched with another credential (or endpoint, model file)
   * than the account holds now, or the credential is gone: a replaced key must stop being used at the
   * next turn, not when the agent next parks. Unknown (an adopted agent) counts as unchanged.
   */
  async deliveryChanged(live: Live, current?: Agent | null): Promise<boolean> {
    // The prompt's read carries the agent as it is now; other callers read it.
    const agent =
      current !== undefined ? (current ?? undefined) : await this.#agentOf(live.accountId, live.conversationId);
    return this.#continuity.changed(
      live,
      await this.delivery(live.accountId, live.runtime, live.model, null, launchAgent(agent)),
    );
  }

  /** The conversation's agent as it is now (its custom launch, credential set and session settings). */
  async #agentOf(accountId: string, conversationId: string): Promise<Agent | undefined> {
    const agentId = (await getConversationById(this.c.d.db, conversationId))?.conversation.agentId;
    return agentId ? getAgent(this.c.d.db, accountId, agentId) : undefined;
  }

  /** Makes the next prompt of `live` carry the conversation so far (continuity.ts); false when there is none. */
  carryHistory(live: Live): Promise<boolean> {
    return this.#continuity.carryHistory(live);
  }

  /** What a turn sends as its prompt: the text, after a carried-over history once. */
  promptFor(live: Live, prompt: string): string | ContentBlock[] {
    return this.#continuity.promptFor(live, prompt);
  }

  /** Forgets a terminated conversation. */
  forget(conversationId: string): void {
    this.#sessionOpenedAt.delete(conversationId);
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
    this.c.events.stage(conv.id, null, 'session', 'started', {
      event: 'load_delayed',
      reason: 'gemini_same_minute_load',
      delay_ms: wait,
    });
    await new Promise((r) => setTimeout(r, wait));
  }

  #argv(spec: RuntimeSpec): readonly string[] {
    return spec.id === 'demo' ? this.c.d.config.demoAgentArgv : spec.launch;
  }

  /**
   * Spawns the agent, `initialize`, then `session/load` of the stored session when the agent can
   * (else `session/new`, announced as a session reset when a session existed). Registers the Live.
   */
  async launch(
    conv: Conversation,
    sandbox: SandboxRow,
    adapter: SandboxAdapter,
    handle: Handle,
    resumeSessionId: string | null,
    model: string,
    plan: LaunchPlan | null,
  ): Promise<Launched> {
    const agent = conv.agentId ? await getAgent(this.c.d.db, conv.accountId, conv.agentId) : undefined;
    const spec = specFor(conv.runtime, agent?.customRuntime);
    if (this.#argv(spec).length === 0) return { ok: false, error: `the ${conv.runtime} agent has no launch command` };
    const server = await this.gatewayServer(conv.agentId, conv.runtime, model, sandbox.provider, agent?.customRuntime);
    if (!server.ok) return { ok: false, error: server.error.message };
    // every launch gets a fresh sandbox token; the previous one of this conversation stops working.
    // Minted before the delivery: under gateway delivery the token is the runtime's model key.
    const token = await this.c.sandboxTokens.rotate(conv.accountId, conv.id);
    const serverUrl = server.value;
    const via = serverUrl ? { baseUrl: (api: GatewayApi) => gatewayBaseUrl(serverUrl, api), token } : null;
    const delivered = await this.delivery(conv.accountId, conv.runtime, model, via, launchAgent(agent));
    if (!delivered.ok) {
      await this.c.sandboxTokens.revoke(conv.id);
      return { ok: false, error: delivered.error.message };
    }
    const delivery = delivered.value;
    const configured = new Map(
      plan?.steps.flatMap((st) =>
        st.name === 'configuration' ? st.files.map((f) => [f.path, f.content] as const) : [],
      ),
    );
    for (const f of delivery.files) {
      const content = mergeRuntimeFile(configured.get(`${spec.home}/${f.path}`), f.content);
      const w = await adapter.files.writeFile(handle, `${spec.home}/${f.path}`, new TextEncoder().encode(content), {
        mode: 0o600,
      });
      if (!w.ok) return { ok: false, error: `writing ${spec.home}/${f.path} failed: ${describeError(w.error)}` };
    }
    const live = newLive(conv, sandbox.id, adapter, handle, model);
    // Only a directly delivered key lives in the agent: through the gateway a replaced key is used at the
    // next model call without a restart, so nothing is remembered to compare.
    if (!via) this.#continuity.launched(live, delivery);
    const env: Array<[string, string]> = this.c.sandboxTokens.env(conv.id, token);
    env.push(...spec.env.map(([k, v]): [string, string] => [k, v]));
    env.push(...delivery.env.map(([k, v]): [string, string] => [k, v]));
    // The only place a credential leaves its box: into the agent process's env, never a file or an argv.
    env.push(...delivery.secretEnv.map(([k, v]): [string, string] => [k, v.reveal()]));
    // identity, the environment's variables, then its secrets (launch-attached ones already won).
    env.push(...GIT_IDENTITY.map(([k, v]): [string, string] => [k, v]));
    for (const [k, v] of plan?.env ?? []) env.push([k, v]);
    // The only place a secret leaves its box for the agent: its process env, never a file, an argv or a log.
    for (const [k, v] of plan?.secrets.reveal() ?? []) env.push([k, v]);
    await this.reapAgents(adapter, handle, conv.id, null);
    const launched = await AgentProcess.launch(
      adapter,
      handle,
      { conversationId: conv.id, argv: this.#argv(spec), env, dir: spec.cwd },
      this.hooks(live),
      this.c.log.child({ conversation: conv.id }),
    );
    if (!launched.ok) {
      await this.c.sandboxTokens.revoke(conv.id);
      return launched;
    }
    const proc = launched.value;
    live.proc = proc;
    const fail = async (what: string): Promise<Launched> => {
      await proc.stop();
      await this.c.sandboxTokens.revoke(conv.id);
      return { ok: false, error: what };
    };
    const timeout = this.c.d.config.acpCallTimeoutMs;
    const timedOut = (method: string) => () => ({
      ok: false as const,
      error: { code: 'acp_closed' as const, message: `${method} got no reply within ${timeout} ms` },
    });
    const init = await withTimeout(proc.client.initialize(), timeout, timedOut('initialize'));
    if (!init.ok) return fail(`ACP initialize failed: ${init.error.message}`);
    // Remembered so a later prompt with images is refused at once when the agent does not take them.
    const takesImages = init.value.agentCapabilities?.promptCapabilities?.image === true;
    if (conv.acceptsImages !== takesImages) await setAcceptsImages(this.c.d.db, conv.id, takesImages);

    const cwd = adapter.files.hostPath
      ? await adapter.files.hostPath(handle, spec.cwd)
      : { ok: true as const, value: spec.cwd };
    if (!cwd.ok) return fail(`mapping the agent's cwd failed: ${describeError(cwd.error)}`);

    const mcpServers = [
      ...platformMcpServers(conv, this.c.sandboxTokens.baseUrl, token, init.value.agentCapabilities),
      ...(plan?.mcpSession ?? []),
    ];
    let sessionId: string | null = null;
    let loadError: string | null = null;
    let configOptions: Parameters<typeof modelOptionToSet>[0] = null;
    let modes: Parameters<typeof offeredFrom>[1] = null;
    if (resumeSessionId && init.value.agentCapabilities?.loadSession) {
      await this.#outwaitSameMinuteLoad(conv);
      this.#continuity.replayStarts(live);
      const loaded = await withTimeout(
        proc.client.loadSession({ cwd: cwd.value, sessionId: resumeSessionId, mcpServers }),
        timeout,
        timedOut('session/load'),
      );
      const quietMs =
        spec.id === 'demo' ? (this.c.d.config.demoReplayQuietMs ?? spec.replayQuietMs) : spec.replayQuietMs;
      await this.#continuity.replayDone(live, loaded.ok, quietMs);
      if (loaded.ok) {
        sessionId = resumeSessionId;
        configOptions = loaded.value.configOptions;
        modes = loaded.value.modes;
      } else {
        loadError = loaded.error.message;
        this.c.log.info({ conversation: conv.id, err: loadError }, 'session/load failed; starting a new session');
      }
    }
    if (!sessionId) {
      const created = await withTimeout(
        proc.client.newSession({ cwd: cwd.value, mcpServers }),
        timeout,
        timedOut('session/new'),
      );
      if (!created.ok) return fail(`ACP session/new failed: ${created.error.message}`);
      sessionId = created.value.sessionId;
      this.#sessionOpenedAt.set(conv.id, Date.now());
      configOptions = created.value.configOptions;
      modes = created.value.modes;
      if (resumeSessionId) {
        // Said in the conversation, and recovered as far as Fountain can: the next prompt carries the history.
        const carried = await this.#continuity.carryHistory(live);
        this.c.events.stage(conv.id, null, 'session', 'done', {
          event: 'reset',
          reason: 'fresh_session',
          ...(loadError ? { error: capReason(loadError) } : {}),
          history: carried ? 'carried_over' : 'none',
          detail: carried
            ? 'the agent could not load its previous session, so it started a new one; the next message gives it the conversation so far'
            : 'the agent could not load its previous session and started a new one',
        });
      }
    }
    const pick = spec.modelOption ? modelOptionToSet(configOptions, model, delivery.modelId) : null;
    if (pick) {
      const set = await withTimeout(
        proc.client.setConfigOption('model', pick),
        timeout,
        timedOut('session/set_config_option'),
      );
      // The runtime's env or config already names the model; the option only keeps the adapter's picker in step.
      if (!set.ok)
        this.c.log.warn({ conversation: conv.id, err: set.error.message }, 'session/set_config_option model failed');
    }
    live.offered = offeredFrom(configOptions, modes);
    await applyAtLaunch(this.c, live, conv, agent);
    const cmd = proc.command;
    const priv = cmd?.private?.reveal();
    const agentSessionId =
      priv && typeof priv === 'object' && typeof (priv as { sessionId?: unknown }).sessionId === 'string'
        ? (priv as { sessionId: string }).sessionId
        : null;
    // The node running the agent is where commands for the conversation go (commands.ts).
    await updateConversation(this.c.d.db, conv.id, {
      runtimeSessionId: sessionId,
      acpNextId: proc.client.nextRequestId,
      nodeId: this.c.nodeId,
      sessionOffered: live.offered,
    });
    await updateSandbox(this.c.d.db, sandbox.id, { agentSessionId });
    this.c.live.set(conv.id, live);
    return { ok: true, value: live };
  }

  /**
   * The hooks of one agent process of `live`. Output events carry their ordinal in the process's output
   * (`seq`), which is what a reattach skips up to; `stderrThrough` is the last stderr chunk already stored.
   */
  hooks(live: Live, stderrThrough = -1): (proc: AgentProcess) => AgentProcessEvents {
    return (proc) => ({
      acp: {
        onMessage: (raw, m, ctx) => this.#onAcpLine(live, raw, m, ctx),
        onNotification: (n, ctx) => this.#onUpdate(live, n, ctx),
        onPermissionRequest: (held) =>
          void this.p.asks
            .request(live, proc, held)
            .catch((e) => this.c.log.error({ err: e }, 'permission handling failed')),
        onProblem: (pr) => {
          if (pr.code === 'acp_not_json' && pr.raw !== undefined)
            this.c.events.output(live.conversationId, live.turn?.id ?? null, 'stdout', pr.raw, pr.seq);
        },
      },
      onStderr: (text, ordinal) => {
        // A replay repeats stderr: what precedes the active turn, or was stored before the drop, is not stored again.
        if (ordinal <= stderrThrough || !proc.client.boundarySeen) return;
        this.p.turns.stderr(live, text);
        this.c.events.output(live.conversationId, live.turn?.id ?? null, 'stderr', text, ordinal);
      },
      onEnd: (reason, error) => this.#onProcessEnd(live, proc, reason, error),
    });
  }

  #onAcpLine(live: Live, raw: string, message: unknown, ctx: LineContext): void {
    // A session/load replays history the event log already holds; storing it again would duplicate it.
    if (this.#continuity.isReplay(live) || ctx.during === 'session/load') return;
    this.p.turns.heard(live, message);
    this.c.events.output(live.conversationId, live.turn?.id ?? null, 'acp', raw, ctx.seq);
  }

  /** Tool calls feed the policy's view of them; usage and the session title are recorded as reported. */
  #onUpdate(live: Live, n: SessionNotification, ctx: LineContext): void {
    if (ctx.during === 'session/load' || this.#continuity.isReplay(live)) return;
    const u = n.update;
    const tool = toolFieldsOf(u);
    if (tool) live.tools.apply(tool);
    else if (u.sessionUpdate === 'usage_update' && live.turn) {
      this.p.turns.usage(live, {
        context: { used: u.used, size: u.size },
        ...(u.cost ? { cost: { amount: u.cost.amount, currency: u.cost.currency } } : {}),
      });
    } else if (u.sessionUpdate === 'session_info_update' && u.title && u.title.trim() !== '') {
      const title = u.title.trim().slice(0, 120);
      void setAgentTitle(this.c.d.db, live.conversationId, title)
        .then((retitled) => {
          if (retitled) this.c.changed(live.accountId);
        })
        .catch((e) =>
          this.c.log.warn({ err: e, conversation: live.conversationId }, 'storing the session title failed'),
        );
    }
  }

  #onProcessEnd(live: Live, proc: AgentProcess, reason: string, error?: SandboxError): void {
    if (live.proc !== proc) return;
    this.c.log.info({ conversation: live.conversationId, reason }, 'agent process ended');
    live.proc = null;
    const turn = live.turn;
    if (turn && error && this.p.recovery.recoverable(live, turn, proc, error)) {
      this.p.recovery.enter(live, turn, error.detail ?? error.code, proc);
      return;
    }
    // The running prompt (if any) resolves `acp_closed` through the client and ends its turn.
    if (!live.turn && this.c.live.get(live.conversationId) === live) this.c.live.delete(live.conversationId);
  }

  /**
   * Lets go of a conversation without touching its rows: its turn stays `running` in the store and its
   * agent keeps running on a detachable provider, for whichever node adopts the turn next.
   */
  async detach(live: Live, why: string): Promise<void> {
    if (live.turn) await this.p.turns.dispatch(live, live.turn, { type: 'detach' });
    if (this.c.live.get(live.conversationId) === live) this.c.live.delete(live.conversationId);
    await live.proc?.release(why);
  }

  /** Stops the agent and destroys the sandbox (a provisioning cancelled by terminate). */
  async teardown(live: Live): Promise<void> {
    await live.proc?.stop();
    this.c.live.delete(live.conversationId);
    const d = await live.adapter.lifecycle.destroy(live.handle);
    if (!d.ok) this.c.log.warn({ err: describeError(d.error) }, 'could not destroy a cancelled sandbox');
  }

  /** Ends superseded agent processes of this conversation where they outlive their connection (agents exit when stdin closes). */
  async reapAgents(
    adapter: SandboxAdapter,
    handle: Handle,
    conversationId: string,
    keep: string | null,
  ): Promise<void> {
    if (!this.c.d.placement.detachable(adapter.provider)) return;
    const list = await adapter.processes.listSessions(handle);
    if (!list.ok) return;
    for (const s of runningSessionsOf(list.value, conversationId))
      if (s.id !== keep) await this.reapSession(adapter, handle, s.id);
  }

  async reapSession(adapter: SandboxAdapter, handle: Handle, sessionId: string): Promise<void> {
    const a = await adapter.processes.attach(handle, sessionId, { owner: () => undefined, stdin: true });
    if (!a.ok) return;
    const c = await adapter.processes.closeStdin(a.value);
    await adapter.processes.stopCommand(a.value);
    this.c.log.info({ session: sessionId, closed: c.ok }, 'reaped a superseded agent process');
  }
}
