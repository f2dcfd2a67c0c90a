/**
 * Permission policy: the verdict for one tool call (title, then ACP kind, then `default`, then
 * auto_allow) and the option an automatic verdict picks (platform-api.md §8).
 */
import type { PermissionOption, RequestPermissionOutcome } from '@agentclientprotocol/sdk';
import { VERDICTS, type PermissionPolicy, type Verdict } from '../store/conversation-schema.ts';

export const TOOL_KINDS = ['read', 'edit', 'delete', 'move', 'search', 'execute', 'think', 'fetch', 'switch_mode', 'other'] as const;

const isVerdict = (v: unknown): v is Verdict => (VERDICTS as readonly unknown[]).includes(v);

/**
 * The policy's own entry for a key: a title like `constructor` must not reach Object.prototype, and
 * a stored value outside the closed set of verdicts counts as `ask`, never as allow.
 */
function entry(policy: PermissionPolicy, key: string | null | undefined): Verdict | undefined {
  if (!key || !Object.hasOwn(policy, key)) return undefined;
  const v: unknown = policy[key];
  return isVerdict(v) ? v : 'ask';
}

export function verdictFor(policy: PermissionPolicy, title: string | null | undefined, kind: string | null | undefined): Verdict {
  return entry(policy, title) ?? entry(policy, kind) ?? entry(policy, 'default') ?? 'auto_allow';
}

/** auto_allow: allow_always, else allow_once, else the first option. */
export function allowOutcome(options: readonly PermissionOption[]): RequestPermissionOutcome {
  const pick = options.find((o) => o.kind === 'allow_always') ?? options.find((o) => o.kind === 'allow_once') ?? options[0];
  return pick ? { outcome: 'selected', optionId: pick.optionId } : { outcome: 'cancelled' };
}

/** auto_deny and timeouts: a reject option if offered, else cancelled; never an invented id. */
export function denyOutcome(options: readonly PermissionOption[]): RequestPermissionOutcome {
  const pick = options.find((o) => o.kind === 'reject_once') ?? options.find((o) => o.kind === 'reject_always');
  return pick ? { outcome: 'selected', optionId: pick.optionId } : { outcome: 'cancelled' };
}

/** How strict a verdict is: a policy may narrow (go up), never widen. */
export const STRICTNESS: Readonly<Record<Verdict, number>> = { auto_allow: 0, ask: 1, auto_deny: 2 };

/**
 * Where `child` would decide looser than `parent` for some tool call, in words, or null when it never
 * does. Every lookup path is tried: each title either policy names (and none), with each ACP kind (and none).
 */
export function loosening(child: PermissionPolicy, parent: PermissionPolicy): string | null {
  const titles: Array<string | null> = [null, ...new Set([...Object.keys(child), ...Object.keys(parent)].filter((k) => k !== 'default'))];
  const kinds: Array<string | null> = [null, ...TOOL_KINDS];
  for (const title of titles) {
    for (const kind of kinds) {
      const c = verdictFor(child, title, kind);
      const p = verdictFor(parent, title, kind);
      if (STRICTNESS[c] < STRICTNESS[p]) return `${title ?? kind ?? 'default'} would be ${c}, where the parent's policy says ${p}`;
    }
  }
  return null;
}

