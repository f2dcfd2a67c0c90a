/**
 * A turn's usage from what its agent reported: tokens from the prompt reply's
 * `usage`, the context window and cost from the turn's last ACP `usage_update`.
 */
import type { PromptUsage } from '../../acp/index.ts';
import type { TurnUsage } from '../store/conversation-schema.ts';

/** Null when the agent reported nothing at all. */
export function turnUsage(
  reply: PromptUsage | undefined,
  reported: Pick<TurnUsage, 'context' | 'cost'>,
): TurnUsage | null {
  if (!reply && !reported.context && !reported.cost) return null;
  return {
    input: reply?.inputTokens ?? 0,
    output: reply?.outputTokens ?? 0,
    ...(reply?.cachedReadTokens != null ? { cache_read: reply.cachedReadTokens } : {}),
    ...(reply?.cachedWriteTokens != null ? { cache_write: reply.cachedWriteTokens } : {}),
    ...(reported.context ? { context: reported.context } : {}),
    ...(reported.cost ? { cost: reported.cost } : {}),
  };
}
