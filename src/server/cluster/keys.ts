/**
 * Key changes across nodes: a key revoked or an account changed on one node makes every node forget
 * the keys it remembers, through the cluster bus, instead of accepting them until their entries age out.
 */
import { forgetKeys, onKeysChanged } from '../core/key-cache-store.ts';
import { KEYS_TOPIC, type EventBus } from './bus.ts';

/** Wires this node's key memory to the bus; returns the undo. */
export function shareKeyChanges(bus: EventBus, nodeId: string): () => void {
  const unlisten = onKeysChanged(() => bus.publish(KEYS_TOPIC, { type: 'keys_changed', node: nodeId }));
  const unsubscribe = bus.subscribe(KEYS_TOPIC, (e) => {
    if (e.type === 'keys_changed' && e.node !== nodeId) forgetKeys();
  });
  return () => {
    unlisten();
    unsubscribe();
  };
}
