/**
 * What keeps a conversation continuous across agent launches: the replay of a session/load is never
 * stored again, a lost session's next prompt carries the history, and a changed credential is seen.
 */
import { createHash } from 'node:crypto';
import type { ContentBlock } from '@agentclientprotocol/sdk';
import type { Delivery } from '../credentials/delivery.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { historyTranscript, withHistory } from './carry-over.ts';
import type { Live } from './live.ts';

/**
 * How long the agent must be quiet after a session/load before the session counts as loaded, and the
 * longest wait. An agent that follows ACP streams a load's history before its answer, so by default
 * nothing is waited for (each wake's first answer paid 250 ms here before); gemini-cli answers the load
 * first and streams the history after its reply, so its runtime entry sets a wait of its own.
 */
export const REPLAY_QUIET_MS = 0;
export const REPLAY_MAX_MS = 10_000;

/** A one-way digest of a delivery: compared between launches, it never holds the secret itself. */
export function deliveryDigest(d: Delivery): string {
  const h = createHash('sha256');
  h.update(JSON.stringify([d.env, d.files, d.modelId]));
  for (const [k, v] of d.secretEnv) h.update(`\0${k}\0${v.reveal()}`);
  return h.digest('hex');
}

export class Continuity {
  /** A digest of what each running agent was launched with (credential, endpoint, files), to see a change. */
  readonly #launchedWith = new WeakMap<Live, string>();
  /** The transcript the next prompt of a fresh session carries, when the agent lost its own. */
  readonly #carry = new WeakMap<Live, string>();
  /** Agents whose session/load replay is still arriving: when their last line came. Nothing of it is stored. */
  readonly #replaying = new WeakMap<Live, { lastAt: number }>();

  constructor(private readonly db: EngineDb) {}

  launched(live: Live, delivery: Delivery): void {
    this.#launchedWith.set(live, deliveryDigest(delivery));
  }

  /** Whether `now` differs from what `live` was launched with (a failed delivery does); unknown is unchanged. */
  changed(live: Live, now: { ok: true; value: Delivery } | { ok: false }): boolean {
    const was = this.#launchedWith.get(live);
    if (was === undefined) return false;
    return !now.ok || deliveryDigest(now.value) !== was;
  }

  /** Makes the next prompt of `live` carry the conversation so far; false when there is nothing to carry. */
  async carryHistory(live: Live): Promise<boolean> {
    const transcript = await historyTranscript(this.db, live.conversationId);
    if (transcript === null) return false;
    this.#carry.set(live, transcript);
    return true;
  }

  /** What a turn sends as its prompt: the text, after the carried-over history once when there is one. */
  promptFor(live: Live, prompt: string): string | ContentBlock[] {
    const transcript = this.#carry.get(live);
    if (transcript === undefined) return prompt;
    this.#carry.delete(live);
    return withHistory(transcript, prompt);
  }

  /** From now until `replayDone`, every line of `live` is replay. */
  replayStarts(live: Live): void {
    this.#replaying.set(live, { lastAt: Date.now() });
  }

  /** True (and the quiet clock restarted) when a line of `live` belongs to a load's replay. */
  isReplay(live: Live): boolean {
    const r = this.#replaying.get(live);
    if (r) r.lastAt = Date.now();
    return r !== undefined;
  }

  /**
   * Resolves once the load's replay has stopped: no line for `quietMs` (at most REPLAY_MAX_MS),
   * or at once when the load failed. The first prompt is sent only then, so whatever the agent streams
   * of the old history after its load reply is dropped as replay and never mixes with the new turn.
   */
  async replayDone(live: Live, loaded: boolean, quietMs = REPLAY_QUIET_MS): Promise<void> {
    const r = this.#replaying.get(live);
    const end = Date.now() + REPLAY_MAX_MS;
    while (r && loaded && Date.now() < end) {
      const quiet = Date.now() - r.lastAt;
      if (quiet < quietMs) {
        await new Promise((res) => setTimeout(res, Math.min(quietMs - quiet, end - Date.now())));
        continue;
      }
      // A timer can fire after a stall of this process with the replay still unread on the socket: quiet
      // counts only once pending input has been read (an I/O poll runs before each setImmediate).
      await new Promise((res) => setImmediate(res));
      await new Promise((res) => setImmediate(res));
      if (Date.now() - r.lastAt >= quietMs) break;
    }
    this.#replaying.delete(live);
  }
}
