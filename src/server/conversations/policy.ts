/**
 * Permission policy: the verdict for one tool call (the runtime's tool name, then the title, then the
 * ACP kind, then `default`, then auto_allow) and the option an automatic verdict picks.
 */
import type { PermissionOption, RequestPermissionOutcome } from '@agentclientprotocol/sdk';
import { VERDICTS, type PermissionPolicy, type Verdict } from '../store/conversation-schema.ts';

export const TOOL_KINDS = [
  'read',
  'edit',
  'delete',
  'move',
  'search',
  'execute',
  'think',
  'fetch',
  'switch_mode',
  'other',
] as const;

/** What a tool call is called, as far as the agent said. */
export interface ToolIdentity {
  /** The runtime's own tool name (Claude: `_meta.claudeCode.toolName`, e.g. `Bash`). */
  readonly toolName?: string | null | undefined;
  readonly title?: string | null | undefined;
  readonly kind?: string | null | undefined;
}

const isVerdict = (v: unknown): v is Verdict => (VERDICTS as readonly unknown[]).includes(v);

/**
 * The policy's own entry for a key: a title like `constructor` must not reach Object.prototype, and
 * a stored value outside the closed set of verdicts counts as `ask`, never as allow (issue 22 #5).
 */
function entry(policy: PermissionPolicy, key: string | null | undefined): Verdict | undefined {
  if (!key || !Object.hasOwn(policy, key)) return undefined;
  const v: unknown = policy[key];
  return isVerdict(v) ? v : 'ask';
}

/** The first key the policy has decides: the runtime's tool name, the title, the kind, then `default`. */
export function verdictFor(policy: PermissionPolicy, tool: ToolIdentity): Verdict {
  return (
    entry(policy, tool.toolName) ??
    entry(policy, tool.title) ??
    entry(policy, tool.kind) ??
    entry(policy, 'default') ??
    'auto_allow'
  );
}

/**
 * auto_allow answers `allow_once`, never `allow_always`: an "always" makes Claude write a bypass rule into
 * the sandbox, and that tool never reaches the policy again. Null when no allow_once is offered (ask a person).
 */
export function allowOutcome(options: readonly PermissionOption[]): RequestPermissionOutcome | null {
  const pick = options.find((o) => o.kind === 'allow_once');
  return pick ? { outcome: 'selected', optionId: pick.optionId } : null;
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
  const titles: Array<string | null> = [
    null,
    ...new Set([...Object.keys(child), ...Object.keys(parent)].filter((k) => k !== 'default')),
  ];
  const kinds: Array<string | null> = [null, ...TOOL_KINDS];
  for (const title of titles) {
    for (const kind of kinds) {
      const c = verdictFor(child, { toolName: title, title, kind });
      const p = verdictFor(parent, { toolName: title, title, kind });
      if (STRICTNESS[c] < STRICTNESS[p])
        return `${title ?? kind ?? 'default'} would be ${c}, where the parent's policy says ${p}`;
    }
  }
  return null;
}
