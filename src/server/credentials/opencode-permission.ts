/**
 * opencode asks before a tool only when its own config says so: its shell, edit and fetch
 * tools are set to `ask`, so every such call reaches Fountain's permission policy.
 */

export interface OpencodePermission {
  readonly bash: 'ask';
  readonly edit: 'ask';
  readonly webfetch: 'ask';
}

/**
 * The `permission` part of opencode's config. Always `ask`, whatever the agent's policy: the policy is
 * applied by Fountain on each request (an auto_allow verdict answers allow_once at once), so a policy
 * changed later, or narrowed at launch, holds without rewriting the file.
 */
export function opencodePermission(): OpencodePermission {
  return { bash: 'ask', edit: 'ask', webfetch: 'ask' };
}
