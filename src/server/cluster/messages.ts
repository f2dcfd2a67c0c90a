/**
 * The zod schemas of node-to-node messages (runner calls, their replies, forwarded stream frames,
 * close, presence). They arrive through PostgreSQL, so each is validated like any outside input.
 */
import { z } from 'zod';
import { SANDBOX_ERROR_CODES } from '../../sandbox/index.ts';
import { RUNNER_CAPABILITIES } from '../../wire/index.ts';

const sandboxErrorSchema = z.object({
  code: z.enum(SANDBOX_ERROR_CODES),
  detail: z.string().optional(),
  retryAfterMs: z.number().optional(),
  provider: z.string().optional(),
});

export const runnerInfoSchema = z.object({
  runnerId: z.string().min(1),
  accountId: z.string().min(1),
  name: z.string().min(1),
  connectedAt: z.string().transform((s) => new Date(s)),
  capabilities: z.array(z.enum(RUNNER_CAPABILITIES)).optional(),
});

export const clusterMessageSchema = z.discriminatedUnion('k', [
  z.object({
    k: z.literal('call'),
    from: z.string(),
    cid: z.string(),
    runnerId: z.string(),
    request: z.record(z.string(), z.unknown()).and(z.object({ op: z.string() })),
    timeoutMs: z.number().nullable().optional(),
    sub: z.boolean(),
  }),
  z.object({
    k: z.literal('reply'),
    cid: z.string(),
    result: z.discriminatedUnion('ok', [
      z.object({ ok: z.literal(true), value: z.record(z.string(), z.unknown()) }),
      z.object({ ok: z.literal(false), error: sandboxErrorSchema }),
    ]),
  }),
  z.object({ k: z.literal('out'), cid: z.string(), stream: z.enum(['stdout', 'stderr']), data: z.string() }),
  z.object({ k: z.literal('exit'), cid: z.string(), code: z.number().int() }),
  z.object({ k: z.literal('disc'), cid: z.string() }),
  z.object({ k: z.literal('unsub'), cid: z.string(), runnerId: z.string() }),
  z.object({
    k: z.literal('close'),
    runnerId: z.string(),
    token: z.string(),
    code: z.number().int(),
    reason: z.string(),
  }),
  /** A request of another feature (a command for the conversation this node drives), and its answer. */
  z.object({ k: z.literal('req'), from: z.string(), cid: z.string(), payload: z.unknown() }),
  z.object({
    k: z.literal('res'),
    cid: z.string(),
    ok: z.boolean(),
    value: z.unknown().optional(),
    reason: z.string().optional(),
  }),
  z.object({
    k: z.literal('presence'),
    node: z.string(),
    token: z.string(),
    state: z.enum(['online', 'offline']),
    info: runnerInfoSchema,
  }),
]);

export type ClusterMessage = z.input<typeof clusterMessageSchema>;
export type ParsedClusterMessage = z.output<typeof clusterMessageSchema>;
