/**
 * Lifecycle policy: what idle does to a sandbox, and when a sandbox has aged out.
 * The single decision point for park-versus-destroy, used by the idle sweep and the reaper.
 */
import type { Capability } from './capabilities.ts';

export type IdleAction = 'suspend' | 'destroy';

/** Suspend only where the provider can keep the disk; otherwise honest amnesia. */
export const idleAction = (capabilities: ReadonlySet<Capability>): IdleAction =>
  capabilities.has('suspend') ? 'suspend' : 'destroy';

export interface LifecycleLimits {
  /** Null or 0 disables. */
  readonly idleTimeoutMs: number | null;
  readonly maxLifetimeMs: number | null;
}

export type LifecycleVerdict =
  | { readonly kind: 'ok' }
  | { readonly kind: 'expired'; readonly reason: 'max_lifetime' | 'idle' };

/** Max lifetime first; idle only when no turn is in flight. */
export function checkLifecycle(
  limits: LifecycleLimits,
  startedAt: Date,
  lastActivityAt: Date,
  busy: boolean,
  now: Date,
): LifecycleVerdict {
  if (limits.maxLifetimeMs && now.getTime() - startedAt.getTime() >= limits.maxLifetimeMs) {
    return { kind: 'expired', reason: 'max_lifetime' };
  }
  if (!busy && limits.idleTimeoutMs && now.getTime() - lastActivityAt.getTime() >= limits.idleTimeoutMs) {
    return { kind: 'expired', reason: 'idle' };
  }
  return { kind: 'ok' };
}
