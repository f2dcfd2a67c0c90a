/**
 * Encoding and decoding of runner wire frames, total on both sides.
 * A decode never throws: bad input comes back as a typed refusal the caller answers or logs.
 */
import type { Request, Reply, StreamFrame } from './frames.ts';
import { replySchema, requestEnvelopeSchema, requestSchema, streamFrameSchema } from './frames.ts';
import { GUEST_OP_NAMES } from './frames.ts';
import { MAX_FRAME_BYTES } from './ops.ts';
import type { WireErrorCode } from './ops.ts';

export type Inbound =
  | { kind: 'request'; request: Request }
  | { kind: 'reply'; reply: Reply }
  | { kind: 'stream'; frame: StreamFrame };

/** Why a frame was refused; `id` is set when the frame was a request that can be answered. */
export interface DecodeRefusal {
  kind: 'refused';
  id?: number;
  code: WireErrorCode;
  detail: string;
}

const refuse = (code: WireErrorCode, detail: string, id?: number): DecodeRefusal =>
  id === undefined ? { kind: 'refused', code, detail } : { kind: 'refused', code, detail, id };

/** Decodes one JSON text frame from either direction. */
export function decodeFrame(text: string): Inbound | DecodeRefusal {
  if (text.length > MAX_FRAME_BYTES) return refuse('invalid', 'frame too large');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return refuse('invalid', 'frames must be JSON text');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return refuse('invalid', 'frame is not a JSON object');
  }
  const obj = value as Record<string, unknown>;
  if ('stream' in obj) {
    const parsed = streamFrameSchema.safeParse(obj);
    return parsed.success ? { kind: 'stream', frame: parsed.data } : refuse('invalid', `bad stream frame: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  }
  if ('ok' in obj) {
    const parsed = replySchema.safeParse(obj);
    return parsed.success ? { kind: 'reply', reply: parsed.data } : refuse('invalid', 'malformed reply');
  }
  const envelope = requestEnvelopeSchema.safeParse(obj);
  if (!envelope.success) return refuse('invalid', 'frame is neither a request, a reply nor a stream frame');
  const { id, op } = envelope.data;
  if (!GUEST_OP_NAMES.includes(op)) return refuse('not_supported', op, id);
  const parsed = requestSchema.safeParse(obj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
    return refuse('invalid', `${where}${issue?.message ?? 'invalid request'}`, id);
  }
  return { kind: 'request', request: parsed.data };
}

/** Encodes a frame, leaving out fields that are undefined, null-free empty arrays stay as given. */
export const encodeFrame = (frame: Request | Reply | StreamFrame): string => JSON.stringify(frame);

export const okReply = (id: number, result: Record<string, unknown> = {}): Reply => ({ id, ok: true, result });
export const errorReply = (id: number, code: WireErrorCode, detail?: string): Reply =>
  detail === undefined ? { id, ok: false, error: code } : { id, ok: false, error: code, detail };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** Standard base64 to bytes; null when the text is not base64. */
export function decodeBase64(text: string): Buffer | null {
  if (text.length % 4 !== 0 || !BASE64.test(text)) return null;
  return Buffer.from(text, 'base64');
}
export const encodeBase64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
