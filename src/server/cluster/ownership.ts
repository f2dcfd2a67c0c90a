/**
 * Which server node drives which open work: every node stamps a heartbeat, and at boot and on every
 * beat adopts (by compare-and-set, so exactly one node does) the open turns and provisionings of lost nodes.
 */
import type { Logger } from 'pino';
import type { Conversation, Turn } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import {
  claimProvisioning,
  claimTurn,
  lostProvisionings,
  lostTurns,
  reapNodes,
  removeNode,
  settleAbandoned,
  stampNode,
  turnsTakenOver,
  type Liveness,
} from './store.ts';

/** A lost node's row outlives its expiry by this much (a day): long enough for every node to have noticed. */
const REAP_AFTER_MS = 86_400_000;

/** How the work of a lost node ends or continues, in the words its events and rows carry. */
export interface Loss {
  /** The lost node; null for rows written before nodes were recorded. */
  readonly nodeId: string | null;
  /** The `reason` of its open turns that fail. */
  readonly turnReason: string;
  /** The `failure_reason` of its conversations that were provisioning. */
  readonly provisioningReason: string;
  /** The `reason` of the `connection`/`started` event of a turn that waits for its runner. */
  readonly recoveryReason: string;
}

/**
 * Alone on its database, a node's predecessor is simply "the server" that restarted (the words
 * clients have always seen); in a cluster the reason names the node.
 */
export function lossOf(nodeId: string | null, shared: boolean): Loss {
  if (!shared) {
    return {
      nodeId,
      turnReason: 'the server restarted during the turn',
      provisioningReason: 'the server restarted while provisioning',
      recoveryReason: 'runner_offline',
    };
  }
  const who = nodeId ? `server node ${nodeId}` : 'a server node of an earlier version';
  return {
    nodeId,
    turnReason: `${who} stopped during the turn (its heartbeat expired)`,
    provisioningReason: `${who} stopped while provisioning (its heartbeat expired)`,
    recoveryReason: 'server_node_lost',
  };
}

/** What the engine does with work this node adopted, and with work another node took from it. */
export interface Adopter {
  /** A conversation a lost node was provisioning, now this node's: it fails. */
  provisioning(c: Conversation, loss: Loss): Promise<void>;
  /** An open turn of a running conversation, now this node's: it is recovered or fails. */
  turn(c: Conversation, t: Turn, loss: Loss): Promise<void>;
  /** The ids of the turns this node drives. */
  driving(): string[];
  /** Another node adopted this turn (this node was presumed lost): stop driving it, rows untouched. */
  release(turnId: string): Promise<void>;
}

export interface OwnershipOptions {
  readonly db: EngineDb;
  readonly nodeId: string;
  /** Other processes may share the database (PostgreSQL); false means this process is its only user (PGlite). */
  readonly shared: boolean;
  /** How often the heartbeat is stamped and lost nodes' work is looked for (shared only). */
  readonly heartbeatMs: number;
  /** A node whose heartbeat is older than this is lost. */
  readonly expiryMs: number;
  readonly logger: Logger;
}

export class NodeOwnership {
  readonly nodeId: string;
  readonly #o: OwnershipOptions;
  readonly #log: Logger;
  readonly #liveness: Liveness;
  #adopter: Adopter | null = null;
  #timer: NodeJS.Timeout | null = null;
  #beating: Promise<void> | null = null;
  #sweeping: Promise<number> | null = null;
  #stopped = false;

  constructor(o: OwnershipOptions) {
    this.#o = o;
    this.nodeId = o.nodeId;
    this.#log = o.logger.child({ component: 'ownership', node: o.nodeId });
    // Alone on the database, every other node id is a previous process: adopted at once, as after any restart.
    this.#liveness = { self: o.nodeId, expiryMs: o.shared ? o.expiryMs : null };
  }

  /** Joins (first heartbeat), adopts what lost nodes left open, and on a shared database keeps doing both. */
  async start(adopter: Adopter): Promise<void> {
    this.#adopter = adopter;
    await stampNode(this.#o.db, this.nodeId);
    await this.sweep();
    if (!this.#o.shared) return;
    this.#timer = setInterval(() => {
      if (!this.#beating) void this.beat();
      if (!this.#sweeping) void this.sweep();
    }, this.#o.heartbeatMs);
    this.#timer.unref();
  }

  /** Stops beating and sweeping; waits for a pass in flight (it may be adopting turns). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await Promise.allSettled([this.#beating, this.#sweeping]);
  }

  /** Removes the heartbeat row once this node has let go of its turns, so others adopt them now. */
  async leave(): Promise<void> {
    await removeNode(this.#o.db, this.nodeId).catch((e: unknown) =>
      this.#log.warn({ err: e }, 'could not remove the node row'),
    );
  }

  /**
   * One pass: claims each piece of lost work and hands it to the adopter; returns how many this node
   * claimed. Never overlaps itself; a failure is logged, and the next pass tries again.
   */
  sweep(): Promise<number> {
    if (this.#sweeping) return this.#sweeping;
    const pass = this.#sweep()
      .catch((e: unknown) => {
        this.#log.error({ err: e }, 'adopting the work of lost nodes failed');
        return 0;
      })
      .finally(() => (this.#sweeping = null));
    this.#sweeping = pass;
    return pass;
  }

  async #sweep(): Promise<number> {
    const adopter = this.#adopter;
    if (!adopter) return 0;
    const { db, shared } = this.#o;
    const l = this.#liveness;
    let claimed = 0;
    for (const c of await lostProvisionings(db, l)) {
      if (this.#stopped) return claimed;
      if (!(await claimProvisioning(db, c.id, c.nodeId, l))) continue;
      claimed++;
      await this.#adopt(c.id, c.nodeId, () => adopter.provisioning(c, lossOf(c.nodeId, shared)));
    }
    for (const { conversation, turn } of await lostTurns(db, l)) {
      if (this.#stopped) return claimed;
      const mine = await claimTurn(db, turn.id, turn.nodeId, l);
      if (!mine) continue;
      claimed++;
      await this.#adopt(conversation.id, turn.nodeId, () =>
        adopter.turn(conversation, mine, lossOf(turn.nodeId, shared)),
      );
    }
    const settled = await settleAbandoned(db, l);
    if (settled.length) this.#log.info({ conversations: settled }, 'settled conversations a lost node left running');
    if (shared) await reapNodes(db, REAP_AFTER_MS);
    return claimed;
  }

  /** A claimed piece is this node's whatever happens next; a failure to act on it must not stop the pass. */
  async #adopt(conversationId: string, lost: string | null, act: () => Promise<void>): Promise<void> {
    this.#log.info({ conversation: conversationId, lost }, 'adopting the open work of a lost node');
    await act().catch((e: unknown) =>
      this.#log.error({ err: e, conversation: conversationId }, 'acting on adopted work failed'),
    );
  }

  /** Stamps the heartbeat, then lets go of any turn another node adopted while this one looked lost. Never overlaps itself. */
  beat(): Promise<void> {
    this.#beating ??= this.#beat().finally(() => (this.#beating = null));
    return this.#beating;
  }

  async #beat(): Promise<void> {
    if (this.#stopped) return;
    try {
      await stampNode(this.#o.db, this.nodeId);
      const adopter = this.#adopter;
      if (!adopter) return;
      for (const id of await turnsTakenOver(this.#o.db, adopter.driving(), this.nodeId)) {
        this.#log.warn(
          { turn: id },
          'another node adopted a turn this node was driving (this node missed its heartbeats); letting go',
        );
        await adopter.release(id);
      }
    } catch (e) {
      this.#log.warn({ err: e }, 'node heartbeat failed');
    }
  }
}
