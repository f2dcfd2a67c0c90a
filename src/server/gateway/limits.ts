/**
 * The limits a model call is held to before it is forwarded: the agent's model allow-list, then token
 * budgets and requests per minute of the agent and of the account, counted from PostgreSQL rows.
 */
import { z } from 'zod';
import type { ModelLimits } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { spent, type CallerContext } from './store.ts';

const count = z.number().int().positive().max(1e15);
export const ModelLimitsSchema = z
  .object({
    tokens_per_conversation: count.optional(),
    tokens_per_day: count.optional(),
    tokens_per_month: count.optional(),
    requests_per_minute: count.optional(),
    models: z.array(z.string().min(1).max(200)).max(100).optional(),
  })
  .strict();

/** Why a call was refused: the limit's name (for the audit row) and the sentence the runtime is told. */
export interface Refusal {
  readonly limit: string;
  readonly kind: 'forbidden' | 'rate';
  readonly message: string;
}

const bare = (m: string) => m.slice(m.lastIndexOf('/') + 1);

/** The allow-list takes `provider/model` or the bare id, as the agent's own model is written. */
export function modelRefusal(limits: ModelLimits, model: string | null): Refusal | null {
  if (!limits.models || limits.models.length === 0) return null;
  const allowed = limits.models.map(bare);
  if (model !== null && allowed.includes(bare(model))) return null;
  return {
    limit: 'models',
    kind: 'forbidden',
    message: `Fountain gateway: model ${model ?? '(none named)'} is not on this agent's model allow-list (${allowed.join(', ')})`,
  };
}

const hasBudget = (l: ModelLimits) =>
  l.tokens_per_conversation !== undefined ||
  l.tokens_per_day !== undefined ||
  l.tokens_per_month !== undefined ||
  l.requests_per_minute !== undefined;

/** The first budget or rate the caller has reached, or null; reads the store only when a limit is set. */
export async function budgetRefusal(db: EngineDb, c: CallerContext, now = new Date()): Promise<Refusal | null> {
  if (!hasBudget(c.agentLimits) && !hasBudget(c.accountLimits)) return null;
  const s = await spent(db, c, now);
  const checks: Array<[string, 'agent' | 'account', number | undefined, number, string]> = [
    [
      'tokens_per_conversation',
      'agent',
      c.agentLimits.tokens_per_conversation,
      s.conversationTokens,
      'this conversation',
    ],
    [
      'tokens_per_conversation',
      'account',
      c.accountLimits.tokens_per_conversation,
      s.conversationTokens,
      'this conversation',
    ],
    ['tokens_per_day', 'agent', c.agentLimits.tokens_per_day, s.agentDayTokens, 'today (UTC)'],
    ['tokens_per_day', 'account', c.accountLimits.tokens_per_day, s.accountDayTokens, 'today (UTC)'],
    ['tokens_per_month', 'agent', c.agentLimits.tokens_per_month, s.agentMonthTokens, 'this month (UTC)'],
    ['tokens_per_month', 'account', c.accountLimits.tokens_per_month, s.accountMonthTokens, 'this month (UTC)'],
  ];
  for (const [name, owner, limit, used, when] of checks) {
    if (limit !== undefined && used >= limit)
      return {
        limit: `${owner}.${name}`,
        kind: 'forbidden',
        message: `Fountain gateway: the ${owner}'s token budget ${name} = ${limit} is spent (${used} tokens used ${when})`,
      };
  }
  const rates: Array<['agent' | 'account', number | undefined, number]> = [
    ['agent', c.agentLimits.requests_per_minute, s.agentLastMinute],
    ['account', c.accountLimits.requests_per_minute, s.accountLastMinute],
  ];
  for (const [owner, limit, used] of rates) {
    if (limit !== undefined && used >= limit)
      return {
        limit: `${owner}.requests_per_minute`,
        kind: 'rate',
        message: `Fountain gateway: the ${owner}'s limit requests_per_minute = ${limit} is reached (${used} calls in the last minute)`,
      };
  }
  return null;
}
