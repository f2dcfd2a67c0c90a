/**
 * opencode asks before a tool only when its own config says so (acp.md §13): a policy stricter than
 * auto_allow is enforced by setting its shell, edit and fetch tools to `ask`, so each reaches Fountain's policy.
 */
import type { PermissionPolicy } from '../store/conversation-schema.ts';
import { asksAnything } from '../conversations/policy.ts';

export interface OpencodePermission {
  readonly bash: 'ask';
  readonly edit: 'ask';
  readonly webfetch: 'ask';
}

/** The `permission` part of opencode's config for a policy; null when the policy allows everything (opencode's default). */
export function opencodePermission(policy: PermissionPolicy): OpencodePermission | null {
  return asksAnything(policy) ? { bash: 'ask', edit: 'ask', webfetch: 'ask' } : null;
}

/**
 * The launch env that carries it: OPENCODE_CONFIG_CONTENT is merged last over opencode's config files,
 * so it holds beside the provider config written into the runtime's HOME.
 */
export function opencodePermissionEnv(policy: PermissionPolicy): Array<[string, string]> {
  const permission = opencodePermission(policy);
  return permission ? [['OPENCODE_CONFIG_CONTENT', JSON.stringify({ permission })]] : [];
}
