/**
 * "A conversation of this account changed" (created, retitled, labelled, read, deleted, finished): published on
 * the cluster bus so every node's account streams hear it, and debounced per stream to one a second.
 */
import { conversationsTopic, type EventBus } from '../cluster/bus.ts';

/** Tells every node's account streams that the account's conversation list changed. */
export function publishConversationsChanged(bus: EventBus, accountId: string): void {
  bus.publish(conversationsTopic(accountId), { type: 'conversations_changed', accountId });
}

/**
 * One account stream's signal: `watch` wakes the SSE loop on a change; `due` says whether to send now,
 * and when a change comes inside the gap, wakes the loop again once the gap has passed (so the last
 * change of a burst is never lost, and a burst sends one signal per gap).
 */
export function conversationsSignal(bus: EventBus, accountId: string, gapMs: number) {
  let pending = false;
  let lastSent = -Infinity;
  let timer: NodeJS.Timeout | null = null;
  let wakeLoop: (() => void) | null = null;
  return {
    watch(wake: () => void): () => void {
      wakeLoop = wake;
      const off = bus.subscribe(conversationsTopic(accountId), (e) => {
        if (e.type !== 'conversations_changed') return;
        pending = true;
        wake();
      });
      return () => {
        off();
        wakeLoop = null;
        if (timer) clearTimeout(timer);
        timer = null;
      };
    },
    /** True when a change waits and the gap since the last signal has passed (the caller then sends it). */
    due(now = Date.now()): boolean {
      if (!pending) return false;
      const wait = lastSent + gapMs - now;
      if (wait <= 0) {
        pending = false;
        lastSent = now;
        return true;
      }
      if (!timer && wakeLoop) {
        timer = setTimeout(() => {
          timer = null;
          wakeLoop?.();
        }, wait);
        timer.unref?.();
      }
      return false;
    },
  };
}
