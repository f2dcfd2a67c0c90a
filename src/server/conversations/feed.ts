/**
 * One EventFeed per conversation and per account on this node, fed by the local event log (rows as
 * they are stored) and by the cluster bus (other nodes' "events stored" notices, read back from the
 * store), so a client on any node sees every event live, once, in id order.
 */
import type { Logger } from 'pino';
import { CLUSTER_TOPIC, EVENTS_TOPIC, type EventBus } from '../cluster/bus.ts';
import type { EventRow, EventStream } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import type { EventLog } from './event-log.ts';
import { accountsOf, eventHoles, latestEventId, pageAccountEvents, pageEvents } from './events-store.ts';

/** What a stream tails: stored rows after a cursor (replay, catch-up), and the live rows. */
export interface EventTail {
  page(after: number, limit: number): Promise<EventRow[]>;
  /** Live rows of the scope, each once; returns the unsubscribe. */
  live(push: (row: EventRow) => void): () => void;
}

type Streams = ReadonlyArray<EventStream | 'stage'> | undefined;
type Scope = { readonly kind: 'conversation'; readonly id: string } | { readonly kind: 'account'; readonly id: string };

interface Feed {
  readonly scope: Scope;
  readonly subs: Set<(row: EventRow) => void>;
  /**
   * The highest id this feed emitted; a feed emits in id order only. A conversation feed's rows come in
   * order from the one node driving it. An account feed spans conversations driven by several nodes,
   * so it emits only what it reads from the store after this cursor: a notice for one conversation
   * read alone could pass over a lower id of another, which the stream's cursor would then skip.
   */
  cursor: number;
  /** A pull is queued and not yet started: another trigger would read the same rows. */
  queued: boolean;
  /** Account feeds: ids up to here were emitted, are another account's, or were holes given up on. */
  scanned: number;
  /** Account feeds: ids above `scanned` no committed row holds yet (see `#pullAccountRows`). */
  readonly holes: Map<number, Hole>;
  /** A re-read is scheduled while a hole is awaited. */
  recheck: NodeJS.Timeout | null;
  /** Rows at or below this existed before the feed opened: subscribers replay them from the store. */
  floor: Promise<number>;
  pulling: Promise<void>;
}

const PAGE = 500;
const ACCOUNT_CACHE_MAX = 50_000;
/** After this long a hole's transaction has its id, so the horizon then taken is one it is below while it runs. */
const HOLE_SETTLE_MS = 200;
/** A hole is given up on after this long even while older transactions run (an idle session in a transaction). */
const HOLE_MAX_WAIT_MS = 10_000;
const HOLE_RECHECK_MS = 50;

/**
 * An id a transaction took and has not committed. It is given up on once every transaction running
 * when `horizon` was read has ended (the one holding it rolled back), or after HOLE_MAX_WAIT_MS.
 */
interface Hole {
  readonly since: number;
  /** `pg_snapshot_xmax` read at least HOLE_SETTLE_MS after the hole was seen. */
  horizon: bigint | null;
}

export interface EventFeedsDeps {
  readonly db: EngineDb;
  readonly events: EventLog;
  readonly bus: EventBus;
  /** This node's id: its own "events stored" notices are already in the local log. */
  readonly nodeId: string;
  readonly logger: Logger;
}

export class EventFeeds {
  readonly #d: EventFeedsDeps;
  readonly #feeds = new Map<string, Feed>();
  readonly #accountOf = new Map<string, string>();
  #accountFeeds = 0;
  readonly #unsubs: Array<() => void>;

  constructor(d: EventFeedsDeps) {
    this.#d = d;
    this.#unsubs = [
      d.events.subscribeAll((row) => this.#local(row)),
      d.bus.subscribe(EVENTS_TOPIC, (e) => {
        if (e.type === 'events_appended' && e.node !== d.nodeId) this.#remote(e.conversationIds);
      }),
      // Notices sent while this node's connection was down are lost: every open feed re-reads the store.
      d.bus.subscribe(CLUSTER_TOPIC, (e) => {
        if (e.type === 'reconnected') for (const f of this.#feeds.values()) this.#pull(f);
      }),
    ];
  }

  stop(): void {
    for (const u of this.#unsubs) u();
  }

  conversation(conversationId: string, streams?: Streams): EventTail {
    return {
      page: (after, limit) => pageEvents(this.#d.db, conversationId, { after, limit, streams }),
      live: (push) => this.#subscribe({ kind: 'conversation', id: conversationId }, push),
    };
  }

  account(accountId: string, streams?: Streams): EventTail {
    return {
      page: (after, limit) => pageAccountEvents(this.#d.db, accountId, { after, limit, streams }),
      live: (push) => this.#subscribe({ kind: 'account', id: accountId }, push),
    };
  }

  /** Where a stream without a cursor starts: after everything stored now. */
  present(): Promise<number> {
    return latestEventId(this.#d.db);
  }

  #subscribe(scope: Scope, push: (row: EventRow) => void): () => void {
    const key = `${scope.kind}:${scope.id}`;
    let feed = this.#feeds.get(key);
    if (!feed) {
      feed = {
        scope,
        subs: new Set(),
        cursor: 0,
        queued: false,
        scanned: 0,
        holes: new Map(),
        recheck: null,
        floor: latestEventId(this.#d.db).catch(() => 0),
        pulling: Promise.resolve(),
      };
      this.#feeds.set(key, feed);
      if (scope.kind === 'account') this.#accountFeeds++;
    }
    const f = feed;
    f.subs.add(push);
    return () => {
      f.subs.delete(push);
      if (f.subs.size > 0 || this.#feeds.get(key) !== f) return;
      this.#feeds.delete(key);
      if (f.recheck) clearTimeout(f.recheck);
      if (scope.kind === 'account') this.#accountFeeds--;
    };
  }

  #emit(f: Feed, row: EventRow): void {
    if (row.id <= f.cursor) return;
    f.cursor = row.id;
    for (const push of [...f.subs]) push(row);
  }

  #local(row: EventRow): void {
    const conv = this.#feeds.get(`conversation:${row.conversationId}`);
    if (conv) this.#emit(conv, row);
    if (this.#accountFeeds === 0) return;
    this.#toAccounts([row.conversationId]);
  }

  #remote(conversationIds: readonly string[]): void {
    for (const id of conversationIds) {
      const f = this.#feeds.get(`conversation:${id}`);
      if (f) this.#pull(f);
    }
    this.#toAccounts(conversationIds);
  }

  /** The account feeds of these conversations read what was stored since their cursor. */
  #toAccounts(conversationIds: readonly string[]): void {
    if (this.#accountFeeds === 0) return;
    const known = conversationIds.map((id) => this.#accountOf.get(id));
    if (known.every((acc) => acc !== undefined)) {
      for (const acc of new Set(known)) this.#pullAccount(acc!);
      return;
    }
    void this.#lookup(conversationIds).then((accounts) => {
      for (const acc of new Set(accounts.values())) this.#pullAccount(acc);
    });
  }

  #pullAccount(accountId: string): void {
    const f = this.#feeds.get(`account:${accountId}`);
    if (f) this.#pull(f);
  }

  /** Reads the scope's rows stored after what the feed emitted, in id order, and emits them; pulls run one at a time. */
  #pull(f: Feed): void {
    if (f.queued) return;
    f.queued = true;
    f.pulling = f.pulling
      .then(async () => {
        f.queued = false;
        if (f.scope.kind === 'account') return this.#pullAccountRows(f, f.scope.id);
        for (let cursor = Math.max(f.cursor, await f.floor); ; ) {
          const page = await pageEvents(this.#d.db, f.scope.id, { after: cursor, limit: PAGE });
          for (const row of page) this.#emit(f, row);
          if (page.length < PAGE) return;
          cursor = page[page.length - 1]!.id;
        }
      })
      .catch((e: unknown) =>
        this.#d.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'event feed read failed'),
      );
  }

  /**
   * An account's rows come from several nodes, each committing on its own: id 100 can commit after
   * 101. The feed emits in id order, so it stops below the lowest id no committed row holds yet (a
   * hole) until that row commits or its transaction is known to have ended without it; reading past
   * the hole would move the cursor over the late row for good.
   */
  async #pullAccountRows(f: Feed, accountId: string): Promise<void> {
    const db = this.#d.db;
    for (;;) {
      const from = Math.max(f.cursor, f.scanned, await f.floor);
      const seen = await eventHoles(db, from);
      const now = Date.now();
      for (const id of [...f.holes.keys()]) if (id <= from || !seen.holes.includes(id)) f.holes.delete(id);
      let bound = seen.top;
      for (const id of seen.holes) {
        let hole = f.holes.get(id);
        if (!hole) f.holes.set(id, (hole = { since: now, horizon: null }));
        const age = now - hole.since;
        if (hole.horizon === null && age >= HOLE_SETTLE_MS) hole.horizon = seen.xmax;
        const ended = hole.horizon !== null && seen.xmin >= hole.horizon;
        if (ended || age >= HOLE_MAX_WAIT_MS) continue;
        bound = id - 1;
        break;
      }
      if (bound <= from) break;
      const page = await pageAccountEvents(db, accountId, { after: from, upTo: bound, limit: PAGE });
      for (const row of page) this.#emit(f, row);
      if (page.length === PAGE) continue;
      f.scanned = bound;
      if (bound < seen.top || !seen.more) break;
    }
    // Still waiting on a hole: no notice may come for it (a rollback sends none), so look again soon.
    for (const id of [...f.holes.keys()]) if (id <= f.scanned) f.holes.delete(id);
    if (f.holes.size > 0 && !f.recheck && this.#feeds.get(`account:${accountId}`) === f) {
      f.recheck = setTimeout(() => {
        f.recheck = null;
        this.#pull(f);
      }, HOLE_RECHECK_MS);
      f.recheck.unref();
    }
  }

  async #lookup(ids: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const missing: string[] = [];
    for (const id of ids) {
      const acc = this.#accountOf.get(id);
      if (acc === undefined) missing.push(id);
      else out.set(id, acc);
    }
    if (missing.length === 0) return out;
    try {
      const found = await accountsOf(this.#d.db, missing);
      if (this.#accountOf.size + found.size > ACCOUNT_CACHE_MAX) this.#accountOf.clear();
      for (const [id, acc] of found) {
        this.#accountOf.set(id, acc);
        out.set(id, acc);
      }
    } catch (e) {
      this.#d.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'event feed account lookup failed');
    }
    return out;
  }
}
