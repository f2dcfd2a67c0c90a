/**
 * `fountain usage [calls|limits]`: model usage through the gateway by conversation, agent, day, model
 * or turn; the audit list of calls (as a table, JSON or CSV); the account's model limits.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { callsCsv, type CallRow } from '../server/gateway/service.ts';
import { data } from './schemas.ts';
import { CliError, action, apiFor, printJson, printTable } from './session.ts';

const GROUPS = ['conversation', 'agent', 'day', 'model', 'turn'] as const;
const usageRow = z
  .object({
    key: z.string(),
    calls: z.number(),
    refused: z.number(),
    input_tokens: z.number(),
    output_tokens: z.number(),
    cache_read_tokens: z.number(),
    cache_write_tokens: z.number(),
    cost_usd: z.number(),
  })
  .loose();
const callRow = z
  .object({
    id: z.string(),
    created_at: z.string(),
    conversation_id: z.string().nullable(),
    agent_id: z.string().nullable(),
    turn_id: z.string().nullable(),
    api: z.string(),
    endpoint: z.string(),
    model: z.string().nullable(),
    status: z.number(),
    refused: z.string().nullable(),
    input_tokens: z.number(),
    output_tokens: z.number(),
    cache_read_tokens: z.number(),
    cache_write_tokens: z.number(),
    cost_usd: z.number().nullable(),
    latency_ms: z.number(),
    first_byte_ms: z.number().nullable(),
  })
  .loose();
const limitsSchema = z.record(z.string(), z.unknown());

interface FilterOpts {
  conversation?: string;
  agent?: string;
  since?: string;
  until?: string;
}

function query(o: FilterOpts & Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of [
    ['conversation_id', o.conversation],
    ['agent_id', o.agent],
    ['since', o.since],
    ['until', o.until],
  ] as const)
    if (v !== undefined) q.set(k, v);
  for (const [k, v] of Object.entries(o))
    if (!['conversation', 'agent', 'since', 'until', 'json', 'csv'].includes(k) && v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

const filters = (c: Command): Command =>
  c
    .option('--conversation <id>', 'only this conversation')
    .option('--agent <id>', 'only this agent')
    .option('--since <iso>', 'from this time (ISO 8601)')
    .option('--until <iso>', 'before this time (ISO 8601)');

const count = (n: number) => n.toLocaleString('en-US');

export function register(program: Command): void {
  const usage = filters(
    program
      .command('usage')
      .description('model tokens and cost through the gateway, summed by conversation, agent, day, model or turn'),
  )
    .option('--by <group>', `one of ${GROUPS.join(', ')}`, 'day')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: FilterOpts & { by: string; json?: boolean }, cmd: Command) => {
        const by = z.enum(GROUPS).safeParse(opts.by);
        if (!by.success) throw new CliError(`--by is one of ${GROUPS.join(', ')}`, 2);
        const { data: rows } = await apiFor(cmd).request(
          'GET',
          `/api/usage${query({ conversation: opts.conversation, agent: opts.agent, since: opts.since, until: opts.until, by: by.data })}`,
          data(z.array(usageRow)),
        );
        if (opts.json) return printJson(rows);
        printTable(
          [by.data.toUpperCase(), 'CALLS', 'REFUSED', 'INPUT', 'OUTPUT', 'CACHE READ', 'CACHE WRITE', 'COST (USD)'],
          rows.map((r) => [
            r.key || '(none)',
            count(r.calls),
            count(r.refused),
            count(r.input_tokens),
            count(r.output_tokens),
            count(r.cache_read_tokens),
            count(r.cache_write_tokens),
            r.cost_usd.toFixed(4),
          ]),
        );
      }),
    );

  filters(usage.command('calls').description('the audit list: one row per model call, newest first (no bodies)'))
    .option('--limit <n>', 'at most this many (1-10000)', '100')
    .option('--csv', 'print CSV (for a spreadsheet)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: FilterOpts & { limit: string; csv?: boolean; json?: boolean }, cmd: Command) => {
        const limit = z.coerce.number().int().min(1).max(10_000).safeParse(opts.limit);
        if (!limit.success) throw new CliError('--limit is a whole number from 1 to 10000', 2);
        const { data: rows } = await apiFor(cmd).request(
          'GET',
          `/api/usage/calls${query({ conversation: opts.conversation, agent: opts.agent, since: opts.since, until: opts.until, limit: limit.data })}`,
          data(z.array(callRow)),
        );
        if (opts.json) return printJson(rows);
        if (opts.csv) return void process.stdout.write(callsCsv(rows as CallRow[]));
        printTable(
          ['TIME', 'CONVERSATION', 'MODEL', 'STATUS', 'INPUT', 'OUTPUT', 'MS', 'REFUSED BY'],
          rows.map((r) => [
            r.created_at,
            r.conversation_id ?? '',
            r.model ?? '',
            String(r.status),
            count(r.input_tokens),
            count(r.output_tokens),
            String(r.latency_ms),
            r.refused ?? '',
          ]),
        );
      }),
    );

  usage
    .command('limits')
    .description("show the account's model limits (set them with PUT /api/usage/limits)")
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const { data: limits } = await apiFor(cmd).request('GET', '/api/usage/limits', data(limitsSchema));
        if (opts.json) return printJson(limits);
        const rows = Object.entries(limits).map(([k, v]) => [k, String(v)]);
        if (rows.length === 0) process.stdout.write('no account limits\n');
        else printTable(['LIMIT', 'VALUE'], rows);
      }),
    );
}
