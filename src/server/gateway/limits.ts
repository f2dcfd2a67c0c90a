/**
 * The limits a model call is held to before it is forwarded: the agent's model allow-list, then token
 * and currency budgets and requests per minute of the agent and of the account, judged from what
 * finished calls used and what calls in flight reserved (totals.ts's `spent`).
 */
import { z } from 'zod';
import type { ModelLimits } from '../store/conversation-schema.ts';
import type { CallerContext } from './store.ts';
import type { ScopeSpent, Spent } from './totals.ts';

const count = z.number().int().positive().max(1e15);
const dollars = z.number().positive().max(1e9);
export const ModelLimitsSchema = z
  .object({
    tokens_per_conversation: count.optional(),
    tokens_per_day: count.optional(),
    tokens_per_month: count.optional(),
    usd_per_conversation: dollars.optional(),
    usd_per_day: dollars.optional(),
    usd_per_month: dollars.optional(),
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

const BUDGETS = [
  'tokens_per_conversation',
  'tokens_per_day',
  'tokens_per_month',
  'usd_per_conversation',
  'usd_per_day',
  'usd_per_month',
] as const;
type Budget = (typeof BUDGETS)[number];

/** Whether any budget or rate is set: only then does a call read the store (and reserve) before it goes. */
export const hasBudget = (l: ModelLimits): boolean =>
  BUDGETS.some((b) => l[b] !== undefined) || l.requests_per_minute !== undefined;

/** Whether a rate is set on the agent or the account: only then are the last minute's calls counted. */
export const hasRate = (c: CallerContext): boolean =>
  c.agentLimits.requests_per_minute !== undefined || c.accountLimits.requests_per_minute !== undefined;

const WINDOW: Record<'conversation' | 'day' | 'month', { when: string; agent: keyof Spent; account: keyof Spent }> = {
  conversation: { when: 'this conversation', agent: 'conversation', account: 'conversation' },
  day: { when: 'today (UTC)', agent: 'agentDay', account: 'accountDay' },
  month: { when: 'this month (UTC)', agent: 'agentMonth', account: 'accountMonth' },
};

const usd = (micros: number) => `$${(micros / 1e6).toFixed(4).replace(/\.?0+$/, '')}`;

/**
 * The first budget or rate the caller has reached, or null. A budget is spent once finished calls
 * used it up; while calls are in flight, another starts only if the used amount plus their
 * reservations stays under the budget (else it is told to retry, a 429 the runtimes back off on).
 * So a budget is passed by at most the last admitted call plus whatever in-flight calls used beyond
 * their reservations.
 */
export function budgetRefusal(c: CallerContext, s: Spent): Refusal | null {
  const near: Refusal[] = [];
  for (const owner of ['agent', 'account'] as const) {
    const limits = owner === 'agent' ? c.agentLimits : c.accountLimits;
    for (const name of BUDGETS) {
      const limit = limits[name];
      if (limit === undefined) continue;
      const w = WINDOW[name.slice(name.indexOf('_per_') + 5) as keyof typeof WINDOW];
      const scope = s[w[owner]] as ScopeSpent;
      const money = name.startsWith('usd_');
      const cap = money ? Math.round(limit * 1e6) : limit;
      const used = money ? scope.micros : scope.tokens;
      const reserved = money ? scope.reservedMicros : scope.reservedTokens;
      const show = (v: number) => (money ? usd(v) : `${v} tokens`);
      const what = money ? `budget ${name} = $${limit}` : `token budget ${name} = ${limit}`;
      if (used >= cap)
        return {
          limit: `${owner}.${name}`,
          kind: 'forbidden',
          message: `Fountain gateway: the ${owner}'s ${what} is spent (${show(used)} used ${w.when})`,
        };
      if (scope.inFlight > 0 && used + reserved >= cap)
        near.push({
          limit: `${owner}.${name}`,
          kind: 'rate',
          message: `Fountain gateway: the ${owner}'s ${what} is nearly spent (${show(used)} used ${w.when}, ${scope.inFlight} call(s) in flight may use ${show(reserved)} more): retry once they end`,
        });
    }
  }
  if (near[0]) return near[0];
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
