/**
 * Zod schemas for every runner wire frame: requests by op, replies by id, stream frames.
 * Requests omit empty fields; `data` is always standard base64.
 */
import { z } from 'zod';
import { GUEST_OPS, WIRE_ERROR_CODES } from './ops.ts';

const id = z.number().int().safe();
const name = z.string().min(1).max(255);
const sessionId = z.string().min(1).max(256);
const base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'data is not base64');
const envPairs = z.array(z.array(z.string())).max(4096);

const withName = { id, name };

export const requestSchemas = {
  create: z.object({ ...withName, op: z.literal('create') }),
  get: z.object({ ...withName, op: z.literal('get') }),
  destroy: z.object({ ...withName, op: z.literal('destroy') }),
  list: z.object({ id, op: z.literal('list') }),
  suspend: z.object({ ...withName, op: z.literal('suspend') }),
  resume: z.object({ ...withName, op: z.literal('resume') }),
  write_file: z.object({
    ...withName,
    op: z.literal('write_file'),
    path: z.string().min(1).max(4096),
    data: base64,
    mode: z.number().int().min(0).max(0o7777).nullish(),
  }),
  exec: z.object({
    ...withName,
    op: z.literal('exec'),
    cmd: z.string().min(1),
    args: z.array(z.string()).default([]),
    env: envPairs.default([]),
    dir: z.string().optional(),
    timeout_ms: z.number().int().nonnegative().nullish(),
    stderr_to_stdout: z.boolean().optional(),
  }),
  spawn: z.object({
    ...withName,
    op: z.literal('spawn'),
    cmd: z.string().min(1),
    args: z.array(z.string()).default([]),
    env: envPairs.default([]),
    dir: z.string().optional(),
    stdin: z.boolean().optional(),
    tty: z.boolean().optional(),
    detachable: z.boolean().optional(),
  }),
  /**
   * `write_id` names the write for a retry after a lost reply: a daemon that advertises `stdin_write_id`
   * acknowledges a repeated id without writing it again. Without it every frame is written.
   */
  stdin: z.object({
    id,
    op: z.literal('stdin'),
    name: name.optional(),
    session_id: sessionId,
    data: base64,
    write_id: z.string().min(1).max(128).optional(),
  }),
  stdin_close: z.object({ id, op: z.literal('stdin_close'), name: name.optional(), session_id: sessionId }),
  detach: z.object({ id, op: z.literal('detach'), name: name.optional(), session_id: sessionId }),
  list_sessions: z.object({ ...withName, op: z.literal('list_sessions') }),
  attach: z.object({ ...withName, op: z.literal('attach'), session_id: sessionId, stdin: z.boolean().optional() }),
  ping: z.object({ id, op: z.literal('ping') }),
  /** Replaces the sandbox's egress policy; `allow: []` denies all egress. */
  apply_network_policy: z.object({
    ...withName,
    op: z.literal('apply_network_policy'),
    allow: z.array(z.string().min(1).max(253)).max(1000),
  }),
} as const;

export const requestSchema = z.discriminatedUnion('op', [
  requestSchemas.create,
  requestSchemas.get,
  requestSchemas.destroy,
  requestSchemas.list,
  requestSchemas.suspend,
  requestSchemas.resume,
  requestSchemas.write_file,
  requestSchemas.exec,
  requestSchemas.spawn,
  requestSchemas.stdin,
  requestSchemas.stdin_close,
  requestSchemas.detach,
  requestSchemas.list_sessions,
  requestSchemas.attach,
  requestSchemas.ping,
  requestSchemas.apply_network_policy,
]);
export type Request = z.infer<typeof requestSchema>;
export type RequestOf<O extends Request['op']> = Extract<Request, { op: O }>;

/** What a request looks like before validation: enough to answer it by id. */
export const requestEnvelopeSchema = z.object({ id, op: z.string() }).loose();

export const okReplySchema = z.object({ id, ok: z.literal(true), result: z.record(z.string(), z.unknown()) });
export const errorReplySchema = z.object({
  id,
  ok: z.literal(false),
  error: z.union([z.enum(WIRE_ERROR_CODES), z.string()]),
  detail: z.string().optional(),
});
export const replySchema = z.discriminatedUnion('ok', [okReplySchema, errorReplySchema]);
export type Reply = z.infer<typeof replySchema>;
export type OkReply = z.infer<typeof okReplySchema>;
export type ErrorReply = z.infer<typeof errorReplySchema>;

const replayFor = z.number().int().safe().optional();
export const outputFrameSchema = z.object({
  stream: z.enum(['stdout', 'stderr']),
  session_id: sessionId,
  data: z.string(),
  replay_for: replayFor,
});
export const exitFrameSchema = z.object({
  stream: z.literal('exit'),
  session_id: sessionId,
  code: z.number().int(),
  replay_for: replayFor,
});
export const streamFrameSchema = z.discriminatedUnion('stream', [outputFrameSchema, exitFrameSchema]);
export type StreamFrame = z.infer<typeof streamFrameSchema>;
export type OutputFrame = z.infer<typeof outputFrameSchema>;
export type ExitFrame = z.infer<typeof exitFrameSchema>;

/** Results of ops whose shape the server relies on. */
export const resultSchemas = {
  get: z.object({ status: z.string(), path: z.string().optional() }),
  list: z.object({ names: z.array(z.string()) }),
  exec: z.object({ output: z.string(), code: z.number().int() }),
  /** `replay_from` > 0 says the journal cap dropped the first bytes: replay does not start at byte zero. */
  spawn: z.object({ session_id: sessionId, replay_from: z.number().int().nonnegative().optional() }),
  attach: z.object({ session_id: sessionId, replay_from: z.number().int().nonnegative().optional() }),
  list_sessions: z.object({
    sessions: z.array(
      z.object({
        id: sessionId,
        command: z.string().nullable(),
        created_at: z.string(),
        last_activity_at: z.string().nullable().optional(),
        tty: z.boolean().optional(),
        exit_code: z.number().int().optional(),
      }),
    ),
  }),
  ping: z.object({ agent: z.string() }),
} as const;

export const GUEST_OP_NAMES: readonly string[] = GUEST_OPS;
