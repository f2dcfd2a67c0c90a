/**
 * Usage and audit as a service for the routes, the CLI's answers and the web: sums by conversation,
 * agent, day, model or turn; the per-call audit list and its CSV; the account's model limits.
 */
import type { ModelLimits } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import * as store from './store.ts';

export type { GroupBy } from './store.ts';

export interface UsageFilter {
  readonly conversationId?: string | undefined;
  readonly agentId?: string | undefined;
  readonly since?: Date | undefined;
  readonly until?: Date | undefined;
}

export interface UsageRow {
  readonly key: string;
  readonly calls: number;
  readonly refused: number;
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly cache_read_tokens: number;
  readonly cache_write_tokens: number;
  readonly cost_usd: number;
}

export interface CallRow {
  readonly id: string;
  readonly created_at: string;
  readonly conversation_id: string | null;
  readonly agent_id: string | null;
  readonly turn_id: string | null;
  readonly api: string;
  readonly endpoint: string;
  readonly model: string | null;
  readonly status: number;
  readonly refused: string | null;
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly cache_read_tokens: number;
  readonly cache_write_tokens: number;
  readonly cost_usd: number | null;
  readonly latency_ms: number;
  readonly first_byte_ms: number | null;
}

const usd = (micros: number) => micros / 1_000_000;

export const CALL_COLUMNS: ReadonlyArray<keyof CallRow> = [
  'id',
  'created_at',
  'conversation_id',
  'agent_id',
  'turn_id',
  'api',
  'endpoint',
  'model',
  'status',
  'refused',
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'cost_usd',
  'latency_ms',
  'first_byte_ms',
];

/** RFC 4180 fields: quoted when they hold a comma, quote or line break. */
const csvField = (v: unknown): string => {
  const s = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

export function callsCsv(rows: readonly CallRow[]): string {
  return (
    [CALL_COLUMNS.join(','), ...rows.map((r) => CALL_COLUMNS.map((c) => csvField(r[c])).join(','))].join('\r\n') +
    '\r\n'
  );
}

export class UsageService {
  constructor(private readonly db: EngineDb) {}

  async by(accountId: string, by: store.GroupBy, f: UsageFilter): Promise<UsageRow[]> {
    return (await store.usageBy(this.db, accountId, by, f)).map((g) => ({
      key: g.key,
      calls: g.calls,
      refused: g.refused,
      input_tokens: g.inputTokens,
      output_tokens: g.outputTokens,
      cache_read_tokens: g.cacheReadTokens,
      cache_write_tokens: g.cacheWriteTokens,
      cost_usd: usd(g.costMicros),
    }));
  }

  async calls(accountId: string, f: UsageFilter & { limit: number; before?: Date | undefined }): Promise<CallRow[]> {
    return (await store.listCalls(this.db, accountId, f)).map((c) => ({
      id: c.id,
      created_at: c.createdAt.toISOString(),
      conversation_id: c.conversationId,
      agent_id: c.agentId,
      turn_id: c.turnId,
      api: c.api,
      endpoint: c.endpoint,
      model: c.model,
      status: c.status,
      refused: c.refused,
      input_tokens: c.inputTokens,
      output_tokens: c.outputTokens,
      cache_read_tokens: c.cacheReadTokens,
      cache_write_tokens: c.cacheWriteTokens,
      cost_usd: c.costMicros === null ? null : usd(c.costMicros),
      latency_ms: c.latencyMs,
      first_byte_ms: c.firstByteMs,
    }));
  }

  limits(accountId: string): Promise<ModelLimits> {
    return store.getAccountLimits(this.db, accountId);
  }

  setLimits(accountId: string, limits: ModelLimits): Promise<void> {
    return store.setAccountLimits(this.db, accountId, limits);
  }
}
