/**
 * Commands that must reach the node driving a conversation (prompt, interrupt, permission answer, the
 * start of a turn the capacity queue admitted):
 * their wire shapes between nodes, and the check of what comes back, which is answered as if local.
 */
import { z } from 'zod';
import { ImageRefSchema, MAX_IMAGES } from './prompt-images.ts';
import { ENGINE_ERROR_STATUS, refuse, type EngineErrorCode, type EngineResult } from '../core/engine-errors.ts';

export const engineCommandSchema = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('prompt'),
    accountId: z.string(),
    conversationId: z.string(),
    text: z.string(),
    /** The prompt's images, already in the shared blob store: only their references travel. */
    images: z.array(ImageRefSchema).max(MAX_IMAGES).optional(),
  }),
  z.object({ op: z.literal('interrupt'), accountId: z.string(), conversationId: z.string() }),
  /** A turn the capacity queue admitted: it starts on the node that drives its conversation. */
  z.object({ op: z.literal('start'), accountId: z.string(), conversationId: z.string(), turnId: z.string() }),
  z.object({
    op: z.literal('answer'),
    accountId: z.string(),
    conversationId: z.string(),
    requestId: z.string(),
    optionId: z.string(),
  }),
]);
export type EngineCommand = z.infer<typeof engineCommandSchema>;

const CODES = Object.keys(ENGINE_ERROR_STATUS) as [EngineErrorCode, ...EngineErrorCode[]];

const resultSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), value: z.unknown().optional() }),
  z.object({
    ok: z.literal(false),
    error: z.object({ code: z.enum(CODES), message: z.string(), extras: z.record(z.string(), z.unknown()).optional() }),
  }),
]);

/** What a node-to-node request came back with (runners/cluster-host.ts NodeReply). */
export type LinkReply =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly reason: string };

/** The cluster as the engine sees it: requests to another node, and serving the requests of others. */
export interface OwnerLink {
  request(node: string, command: EngineCommand, timeoutMs: number): Promise<LinkReply>;
  serve(handler: (command: EngineCommand) => Promise<EngineResult<unknown>>): void;
}

/** The owner's answer as an EngineResult; `value` is checked by the caller's `valueSchema`. */
export function answerOf<T>(reply: LinkReply, valueSchema: z.ZodType<T>): EngineResult<T> {
  if (!reply.ok)
    return refuse(
      'server_node_unreachable',
      `the server node driving this conversation did not answer: ${reply.reason}`,
    );
  const r = resultSchema.safeParse(reply.value);
  if (!r.success)
    return refuse('server_node_unreachable', 'the server node driving this conversation answered something malformed');
  if (!r.data.ok)
    return {
      ok: false,
      error: r.data.error.extras
        ? { ...r.data.error, extras: r.data.error.extras }
        : { code: r.data.error.code, message: r.data.error.message },
    };
  const v = valueSchema.safeParse(r.data.value);
  return v.success
    ? { ok: true, value: v.data }
    : refuse('server_node_unreachable', 'the server node driving this conversation answered something malformed');
}

/** Node-to-node requests as the cluster carries them (runners/cluster-host.ts implements it). */
export interface NodeRequests {
  request(node: string, payload: Record<string, unknown>, timeoutMs: number): Promise<LinkReply>;
  serveRequests(handler: (payload: unknown) => Promise<unknown>): void;
}

/** The engine's OwnerLink over the cluster's requests; what arrives is validated before it runs. */
export function ownerLinkOver(nodes: NodeRequests): OwnerLink {
  return {
    request: (node, command, timeoutMs) => nodes.request(node, command, timeoutMs),
    serve: (handler) =>
      nodes.serveRequests(async (payload) => {
        const command = engineCommandSchema.safeParse(payload);
        if (!command.success) throw new Error(`malformed command: ${command.error.issues[0]?.message ?? 'invalid'}`);
        return handler(command.data);
      }),
  };
}
