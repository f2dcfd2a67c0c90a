/**
 * The conversation engine's facade, a table of contents: each call names the part that does the work
 * (provisioner, turn machine, permissions, recovery, sweeper, endings); the parts share one EngineCore.
 *
 * Over 400 lines because it is the engine's whole public surface (labels, settings, fork and move, the
 * capacity queue joined it at once); each verb is a short delegation, and grouping them by feature is due.
 */
import type { SessionSettings, TurnImage } from '../store/conversation-schema.ts';
import { storeImages, turnImage } from './image-blobs.ts';
import { noImagesWords, type DecodedImage } from './prompt-images.ts';
import { changeSettings, type SettingsChange } from './settings-command.ts';
import { EventBus } from '../cluster/bus.ts';
import { Capacity, type Taken } from './capacity.ts';
import {
  ACTIVE_SANDBOX,
  getOwnLimits,
  loadOf,
  setOwnLimits,
  type Limits,
  type Load,
  type OwnLimits,
} from './queue-store.ts';
import { insertAdmittedTurn, insertQueuedTurn, releaseAdmittedTurn } from './turn/queued.ts';
import { startAdmitted } from './admitted.ts';
import { mintNodeId } from '../cluster/node.ts';
import { EventFeeds } from './feed.ts';
import { conversationsSignal, publishConversationsChanged } from './changes.ts';
import { NodeOwnership } from '../cluster/ownership.ts';
import { Endings } from './endings.ts';
import { accept, refuse, type EngineResult } from '../core/engine-errors.ts';
import { EventLog } from './event-log.ts';
import { Launcher } from './launcher.ts';
import type { EngineCore, EngineDeps, EngineParts } from './live.ts';
import { KeyedLock } from './lock.ts';
import { Permissions } from './permissions.ts';
import { Provisioner, type CreateConversationInput } from './provisioner.ts';
import { RoutedEngine, serveCommand, type PromptAccepted, type TurnCommands } from './routed.ts';
import { TurnRecovery } from './reattach.ts';
import { Relocation, type ForkAt, type MoveTo } from './relocate.ts';
import { SandboxTokens } from './sandbox-token.ts';
import {
  getConversation,
  getConversationForPrompt,
  listConversations,
  markConversationRead,
  type ConversationWithSandbox,
} from './store.ts';
import { Sweeper } from './sweeper.ts';
import { TurnDriver } from './turn/driver.ts';
import { conversationView, sandboxView, type ConversationView, type QueuePlace } from './views.ts';
import { changeLabels, type Label, type LabelChange } from './labels.ts';
import { pushToBranch, type PushDone, type PushInput } from './push.ts';
import { WarmPool } from './pool.ts';
import { getAgent } from '../agents/store.ts';

export type { EngineDeps } from './live.ts';

export type { CreateConversationInput } from './provisioner.ts';

export type { PromptAccepted } from './routed.ts';

export class ConversationEngine {
  readonly events: EventLog;
  /** One live feed per conversation and per account, fed by this log and by other nodes (feed.ts). */
  readonly feeds: EventFeeds;
  /** The per-conversation sandbox tokens and the base URL sandboxes reach the server at. */
  readonly sandboxTokens: SandboxTokens;
  readonly #c: EngineCore;
  readonly #p: EngineParts;
  readonly #owner: NodeOwnership;
  readonly #sweeper: Sweeper;
  readonly #endings: Endings;
  readonly #relocation: Relocation;
  readonly #bus: EventBus;
  readonly #pool: WarmPool;
  /** The turn commands: this node's own, wrapped in their routing when other nodes share the database. */
  readonly #commands: TurnCommands;

  /** BROKER_ALLOW_UNENFORCED: the agent form's warnings apply the launch gate's rule with it. */
  get brokerAllowUnenforced(): boolean {
    return this.#c.d.config.brokerAllowUnenforced;
  }

  constructor(deps: EngineDeps) {
    const log = deps.logger.child({ component: 'engine' });
    this.events = new EventLog(deps.db, log, {
      flushMs: deps.config.eventFlushMs,
      flushMax: deps.config.eventFlushMax,
    });
    this.sandboxTokens = new SandboxTokens(deps.db, deps.config.publicUrl);
    const nodeId = deps.node?.id ?? mintNodeId();
    const bus = deps.bus ?? new EventBus();
    this.#bus = bus;
    this.feeds = new EventFeeds({ db: deps.db, events: this.events, bus, nodeId, logger: log });
    const changed = (accountId: string) => publishConversationsChanged(bus, accountId);
    this.#c = {
      d: deps,
      log,
      lock: new KeyedLock(),
      live: new Map(),
      events: this.events,
      sandboxTokens: this.sandboxTokens,
      nodeId,
      changed,
      freed: () => this.#p?.capacity.freed(),
      stopped: false,
    };
    const parts = {} as { -readonly [K in keyof EngineParts]: EngineParts[K] };
    parts.capacity = new Capacity(this.#c);
    parts.turns = new TurnDriver(this.#c, parts);
    parts.asks = new Permissions(this.#c, parts);
    parts.recovery = new TurnRecovery(this.#c, parts);
    parts.launcher = new Launcher(this.#c, parts);
    parts.provisioner = new Provisioner(this.#c, parts);
    this.#p = parts;
    this.#sweeper = new Sweeper(this.#c, parts);
    this.#endings = new Endings(this.#c, parts);
    this.#relocation = new Relocation(this.#c, parts);
    this.#pool = new WarmPool(this.#c, {
      create: (accountId, input) => parts.provisioner.create(accountId, input),
      terminate: (accountId, id) => this.#endings.terminate(accountId, id),
    });
    this.#owner = new NodeOwnership({
      db: deps.db,
      nodeId,
      shared: deps.node?.shared ?? false,
      heartbeatMs: deps.config.nodeHeartbeatMs,
      expiryMs: deps.config.nodeExpiryMs,
      logger: log,
    });
    const here: TurnCommands = {
      prompt: (accountId, id, text, images) => this.#promptHere(accountId, id, text, images ?? []),
      interrupt: (accountId, id) => this.#interruptHere(accountId, id),
      startAdmitted: (accountId, id, turnId) => startAdmitted(this.#c, this.#p, accountId, id, turnId),
      answerPermission: (accountId, id, requestId, optionId) => this.#answerHere(accountId, id, requestId, optionId),
    };
    this.#commands = deps.link
      ? new RoutedEngine(here, {
          db: deps.db,
          link: deps.link,
          nodeId,
          nodeExpiryMs: deps.config.nodeExpiryMs,
          installTimeoutMs: deps.config.installTimeoutMs,
          drives: (id) => this.#c.live.has(id),
        })
      : here;
    deps.link?.serve((command) => serveCommand(here, command));
  }

  /** The id this node's open turns and provisionings carry in the store. */
  get nodeId(): string {
    return this.#c.nodeId;
  }

  // ---------------------------------------------------------------- lifecycle

  /** Adopts what lost nodes left open (recovery), then starts the idle sweep. */
  async start(): Promise<void> {
    await this.#owner.start(this.#p.recovery.adopter());
    this.#sweeper.start();
    this.#p.capacity.start({
      start: (t) => this.#startTaken(t),
      endConversation: (entry, how, reason) => this.#endings.endQueued(entry.conversationId, how, reason),
    });
    // After adoption: the members a previous run left are counted, not made again.
    this.#pool.start();
  }

  /** Adopts what lost nodes left open now rather than at the next beat; returns how many pieces this node claimed. */
  adoptLost(): Promise<number> {
    return this.#owner.sweep();
  }

  /** Stops timers and detaches from agent processes (they keep running on detachable providers). */
  async stop(): Promise<void> {
    this.#c.stopped = true;
    this.#sweeper.stop();
    await this.#pool.stop();
    await this.#p.capacity.stop();
    await this.#owner.stop();
    await this.#p.provisioner.settled();
    await this.#p.turns.settled();
    for (const live of [...this.#c.live.values()]) await this.#p.launcher.detach(live, 'the server is stopping');
    await this.events.close();
    this.feeds.stop();
    // Only now, with every event stored: an adopter skips what is stored, so nothing is stored twice.
    await this.#owner.leave();
  }

  // ---------------------------------------------------------------- reads

  /** A conversation as the API shows it; `places` (from queuePositions) saves a lookup per row of a list. */
  async view(row: ConversationWithSandbox, places?: Map<string, QueuePlace>): Promise<ConversationView> {
    const s = row.sandbox;
    const id = row.conversation.id;
    const place = places ? places.get(id) : (await this.#p.capacity.positions([id])).get(id);
    const c = row.conversation;
    // Rows fresh from a write carry no joined agent: its model is read only when the conversation has none.
    const agentModel =
      c.model !== null || row.agentModel !== undefined
        ? (row.agentModel ?? null)
        : c.agentId
          ? ((await getAgent(this.#c.d.db, c.accountId, c.agentId))?.model ?? null)
          : null;
    return conversationView(
      c,
      s ? sandboxView(s, await this.#c.d.placement.host(c.accountId, s)) : null,
      place,
      agentModel,
    );
  }

  async get(accountId: string, id: string): Promise<EngineResult<ConversationView>> {
    const row = await getConversation(this.#c.d.db, accountId, id);
    return row ? accept(await this.view(row)) : refuse('not_found', 'conversation not found');
  }

  async list(accountId: string, filter: Parameters<typeof listConversations>[2]): Promise<ConversationView[]> {
    const rows = await listConversations(this.#c.d.db, accountId, filter);
    const places = await this.queuePositions(rows.map((r) => r.conversation.id));
    return Promise.all(rows.map((r) => this.view(r, places)));
  }

  /** An account stream's "conversations changed" signal, heard from every node, one per `gapMs` at most. */
  conversationsSignal(accountId: string): ReturnType<typeof conversationsSignal> {
    return conversationsSignal(this.#bus, accountId, this.#c.d.config.conversationsSignalGapMs);
  }

  /** Marks the conversation read (`last_read_at` now); false when it is not the account's. */
  async markRead(accountId: string, id: string): Promise<EngineResult<void>> {
    if (!(await markConversationRead(this.#c.d.db, accountId, id)))
      return refuse('not_found', 'conversation not found');
    this.#c.changed(accountId);
    return accept(undefined);
  }

  /** Sets and removes labels in one change; the account's list streams hear of it. */
  async changeLabels(
    accountId: string,
    id: string,
    change: { readonly add?: readonly Label[]; readonly remove?: readonly string[] },
  ): Promise<LabelChange> {
    const r = await changeLabels(this.#c.d.db, accountId, id, change);
    if (r.ok) this.#c.changed(accountId);
    return r;
  }

  /** True while this node holds a running turn or an open permission request for the conversation. */
  busy(conversationId: string): boolean {
    return !!this.#c.live.get(conversationId)?.turn;
  }

  // ---------------------------------------------------------------- provisioner

  /** Pushes the sandbox's commits in an environment repository to a new branch on its remote (push.ts). */
  push(accountId: string, id: string, input: PushInput): Promise<EngineResult<PushDone>> {
    return pushToBranch(this.#c, accountId, id, input);
  }

  async create(
    accountId: string,
    input: Omit<CreateConversationInput, 'images'> & { readonly images?: readonly DecodedImage[] },
  ): Promise<EngineResult<ConversationView>> {
    // A warm-pool member takes a plain first prompt; one with images is provisioned.
    if (!input.images?.length) {
      const { images: _, ...plain } = input;
      const taken = await this.#fromPool(accountId, plain);
      if (taken) return taken;
    }
    // Stored before the turn names them; the agent's capability is learnt at its first initialize.
    const images = await storeImages(this.#c.d.images, input.images ?? []);
    if (!images.ok) return images;
    const r = await this.#p.provisioner.create(accountId, { ...input, images: images.value });
    return r.ok ? accept(await this.view(r.value)) : r;
  }

  /**
   * A new conversation from the agent's warm pool (pool.ts), or null when there is none ready: no
   * sandbox is provisioned, and the first prompt goes the way of any prompt (waking a parked member).
   */
  async #fromPool(accountId: string, input: CreateConversationInput): Promise<EngineResult<ConversationView> | null> {
    const agent = await getAgent(this.#c.d.db, accountId, input.agentId);
    if (!agent || agent.warmPool === 0) return null;
    const id = await this.#pool.take(accountId, agent, input);
    if (!id) return null;
    this.#c.changed(accountId);
    if (input.prompt) {
      const p = await this.prompt(accountId, id, input.prompt);
      if (!p.ok) return p;
    }
    return this.get(accountId, id);
  }

  /** An agent was created, changed or deleted: its warm pool is filled or drained in the background. */
  agentChanged(_accountId: string, _agentId: string): void {
    this.#pool.refill();
  }

  /** Resolves once no warm pool pass runs (tests). */
  poolSettled(): Promise<void> {
    return this.#pool.settled();
  }

  // ---------------------------------------------------------------- turns

  /** Every turn command goes through #commands: to the node driving the conversation, or here. */
  async prompt(
    accountId: string,
    id: string,
    text: string,
    images: readonly DecodedImage[] = [],
  ): Promise<EngineResult<PromptAccepted>> {
    if (images.length === 0) return this.#commands.prompt(accountId, id, text);
    // Refused before any byte is stored when the agent is known not to take images; the node that
    // drives the turn checks again (and the driver against the live agent's answer).
    const row = await getConversation(this.#c.d.db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    if (row.conversation.acceptsImages === false)
      return refuse('image_not_supported_by_runtime', noImagesWords(row.conversation.runtime), {
        runtime: row.conversation.runtime,
      });
    const refs = await storeImages(this.#c.d.images, images);
    if (!refs.ok) return refs;
    return this.#commands.prompt(accountId, id, text, refs.value);
  }

  /**
   * Answers "queued" as soon as the turn row is stored; the running marks and the prompt's way to the
   * agent follow the reply, still under the conversation's lock, so a terminate or a second prompt
   * waits for them as before. A failure after the reply ends the turn (TurnDriver.start), not the request.
   */
  async #promptHere(
    accountId: string,
    id: string,
    text: string,
    images: readonly TurnImage[],
  ): Promise<EngineResult<PromptAccepted>> {
    const { live, lock, d } = this.#c;
    // Refused before queueing on the lock: a running turn holds no lock, so this is the fast answer.
    if (live.get(id)?.turn) return refuse('conversation_busy', 'a turn is already running');
    let replied = false;
    let reply!: (r: EngineResult<PromptAccepted>) => void;
    let fail!: (e: unknown) => void;
    const answer = new Promise<EngineResult<PromptAccepted>>((res, rej) => {
      reply = (r) => {
        replied = true;
        res(r);
      };
      fail = rej;
    });
    lock
      .run(id, async () => {
        // One read for every check: each database round trip here delays the prompt itself.
        const row = await getConversationForPrompt(d.db, accountId, id);
        if (!row) return reply(refuse('not_found', 'conversation not found'));
        const conv = row.conversation;
        if (conv.status === 'terminated' || conv.status === 'failed') {
          return reply(refuse('conversation_terminated', `the conversation is ${conv.status}; start a new one`));
        }
        if (!conv.agentId) return reply(refuse('no_agent', "the conversation's agent was deleted"));
        if (live.get(id)?.turn || conv.status === 'running')
          return reply(refuse('conversation_busy', 'a turn is already running'));
        if (row.turnOpen) return reply(refuse('conversation_busy', 'a prompt is already queued'));
        if (images.length > 0 && conv.acceptsImages === false)
          return reply(
            refuse('image_not_supported_by_runtime', noImagesWords(conv.runtime), { runtime: conv.runtime }),
          );
        // A conversation still waiting in the queue for its sandbox has nothing to prompt yet.
        if (conv.status === 'pending' && row.sandbox?.status === 'pending')
          return reply(
            refuse('conversation_busy', 'the conversation waits in the queue for capacity; it starts on its own'),
          );
        const needsSandbox = !row.sandbox || !(ACTIVE_SANDBOX as readonly string[]).includes(row.sandbox.status);
        const fields = { conversationId: id, turnNumber: conv.turnCount + 1, prompt: text, images: [...images] };
        const admitted = await this.#p.capacity.admit(
          accountId,
          { turn: true, sandbox: needsSandbox, kind: 'prompt' },
          async (tx, queued) => {
            const t = queued
              ? await insertQueuedTurn(tx, fields)
              : await insertAdmittedTurn(tx, { ...fields, nodeId: this.nodeId });
            return { turn: t, conversationId: id, turnId: t.id };
          },
        );
        const turn = admitted.value.turn;
        if (admitted.queued)
          return reply(
            accept({
              turnId: turn.id,
              queue: { position: admitted.position, expiresAt: admitted.expiresAt.toISOString() },
            }),
          );
        const awake = await this.#p.provisioner.ensureAwake(row);
        if (!awake.ok) {
          // It never ran: its row and the capacity it held go.
          await releaseAdmittedTurn(d.db, turn.id);
          this.#c.freed();
          return reply(awake);
        }
        // start() marks the conversation's live turn before its first await, so the next prompt is refused as busy.
        const started = this.#p.turns.start(awake.value, turn, {
          turnCount: conv.turnCount + 1,
          ...(conv.firstPrompt ? {} : { firstPrompt: text }),
        });
        reply(accept({ turnId: turn.id }));
        await started;
      })
      .catch((e: unknown) => {
        if (!replied) return fail(e);
        this.#c.log.error({ err: e, conversation: id }, 'starting a turn failed after it was queued');
      });
    return answer;
  }

  /** One image of a turn's prompt: its type and bytes; anything that does not resolve is not_found. */
  async image(
    accountId: string,
    id: string,
    turnId: string,
    position: number,
  ): Promise<EngineResult<{ mediaType: string; bytes: Buffer }>> {
    const ref = await turnImage(this.#c.d.db, accountId, id, turnId, position);
    if (!ref) return refuse('not_found', 'image not found');
    const got = this.#c.d.images ? await this.#c.d.images.get(ref.digest) : null;
    if (!got?.ok) return refuse('not_found', 'image not found');
    return accept({ mediaType: ref.media_type, bytes: got.value });
  }

  interrupt(accountId: string, id: string): Promise<EngineResult<void>> {
    return this.#commands.interrupt(accountId, id);
  }

  async #interruptHere(accountId: string, id: string): Promise<EngineResult<void>> {
    const row = await getConversation(this.#c.d.db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    const live = this.#c.live.get(id);
    if (!live?.turn) {
      // A prompt (or a new conversation) waiting for capacity is cancelled: it never starts.
      if (await this.#p.capacity.cancel(id, 'interrupt')) return accept(undefined);
      return refuse('no_turn_running', 'no turn is running');
    }
    await this.#p.turns.interrupt(live, live.turn);
    return accept(undefined);
  }

  // ---------------------------------------------------------------- capacity queue

  /** What the queue took: a prompt starts on the node driving its conversation, a conversation provisions here. */
  async #startTaken(t: Taken): Promise<void> {
    if (t.kind === 'conversation') return this.#p.provisioner.startQueued(t.conversationId);
    if (!t.turnId) return;
    const r = await this.#commands.startAdmitted(t.accountId, t.conversationId, t.turnId);
    // The node driving it did not answer: this node starts it (waking the sandbox here).
    if (!r.ok && r.error.code === 'server_node_unreachable')
      await startAdmitted(this.#c, this.#p, t.accountId, t.conversationId, t.turnId);
  }

  /** The place in line of each waiting conversation among `ids` (for views). */
  queuePositions(ids: readonly string[]): Promise<Map<string, QueuePlace>> {
    return this.#p.capacity.positions(ids);
  }

  /** The account's limits (its own and the server's defaults) with what it holds and what waits now. */
  async limits(accountId: string): Promise<{ own: OwnLimits; defaults: Limits; load: Load }> {
    const defaults = this.#p.capacity.defaults;
    const [own, load] = await Promise.all([
      getOwnLimits(this.#c.d.db, accountId),
      loadOf(this.#c.d.db, accountId, defaults),
    ]);
    return { own, defaults, load };
  }

  /** Sets an account's own limits (null: the server's default); raised limits start what now fits. */
  async setLimits(accountId: string, own: OwnLimits): Promise<EngineResult<void>> {
    if (!(await setOwnLimits(this.#c.d.db, accountId, own))) return refuse('not_found', 'account not found');
    this.#c.freed();
    return accept(undefined);
  }

  /** Looks at the queue now (tests; a node also looks on its own as capacity frees). */
  drainQueue(): Promise<void> {
    return this.#p.capacity.drain();
  }

  // ---------------------------------------------------------------- permissions

  answerPermission(accountId: string, id: string, requestId: string, optionId: string): Promise<EngineResult<void>> {
    return this.#commands.answerPermission(accountId, id, requestId, optionId);
  }

  async #answerHere(accountId: string, id: string, requestId: string, optionId: string): Promise<EngineResult<void>> {
    const row = await getConversation(this.#c.d.db, accountId, id);
    if (!row) return refuse('not_found', 'conversation not found');
    return this.#p.asks.answer(this.#c.live.get(id), id, requestId, optionId);
  }

  // ---------------------------------------------------------------- session settings

  /** Stores the conversation's session settings and sends them to its running agent on this node. */
  settings(accountId: string, id: string, change: SessionSettings): Promise<EngineResult<SettingsChange>> {
    return changeSettings(this.#c, accountId, id, change);
  }

  // ---------------------------------------------------------------- endings

  terminate(accountId: string, id: string): Promise<EngineResult<void>> {
    return this.#endings.terminate(accountId, id);
  }

  async rotate(
    accountId: string,
    id: string,
    input: { title?: string; channelId?: string },
  ): Promise<EngineResult<ConversationView>> {
    const r = await this.#endings.rotate(accountId, id, input);
    return r.ok ? accept(await this.view(r.value)) : r;
  }

  delete(accountId: string, id: string): Promise<EngineResult<void>> {
    return this.#endings.delete(accountId, id);
  }

  // ---------------------------------------------------------------- fork and move

  /** A new conversation from the checkpoint after one of this one's turns (relocate.ts). */
  async fork(accountId: string, id: string, at: ForkAt): Promise<EngineResult<ConversationView>> {
    const r = await this.#relocation.fork(accountId, id, at);
    return r.ok ? accept(await this.view(r.value)) : r;
  }

  /** The turns of the conversation a fork can start after now (a checkpoint is kept for each). */
  async forkableTurns(conversationId: string): Promise<Set<string>> {
    return (await this.#c.d.checkpoints?.turnsKept(conversationId)) ?? new Set();
  }

  /** Checkpoints and removes the sandbox; the next message restores it where `to` says (relocate.ts). */
  async move(accountId: string, id: string, to: MoveTo): Promise<EngineResult<ConversationView>> {
    const r = await this.#relocation.move(accountId, id, to);
    return r.ok ? accept(await this.view(r.value)) : r;
  }

  // ---------------------------------------------------------------- sweeper

  /** Reclaims sandboxes past their max lifetime, then parks idle ones; returns how many. */
  sweep(now = new Date()): Promise<number> {
    return this.#sweeper.sweep(now);
  }
}
