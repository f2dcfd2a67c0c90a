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

/** Output frames built by outputFrame(): their data is known base64, so it needs no escaping. */
const base64Frames = new WeakSet<object>();

/**
 * An output frame whose `data` is encoded here from bytes. Encoding it skips JSON.stringify's
 * escape scan of the payload, which dominated the cost of streaming and replaying output.
 */
export function outputFrame(stream: 'stdout' | 'stderr', sessionId: string, bytes: Uint8Array, replayFor?: number): StreamFrame {
  const frame: StreamFrame =
    replayFor === undefined
      ? { stream, session_id: sessionId, data: encodeBase64(bytes) }
      : { stream, session_id: sessionId, data: encodeBase64(bytes), replay_for: replayFor };
  base64Frames.add(frame);
  return frame;
}

/** Encodes a frame, leaving out fields that are undefined, null-free empty arrays stay as given. */
export const encodeFrame = (frame: Request | Reply | StreamFrame): string => {
  if (base64Frames.has(frame) && 'data' in frame) {
    const f = frame as Extract<StreamFrame, { data: string }>;
    const tail = f.replay_for === undefined ? '}' : `,"replay_for":${JSON.stringify(f.replay_for)}}`;
    return `{"stream":"${f.stream}","session_id":${JSON.stringify(f.session_id)},"data":"${f.data}"${tail}`;
  }
  return JSON.stringify(frame);
};

export const okReply = (id: number, result: Record<string, unknown> = {}): Reply => ({ id, ok: true, result });
export const errorReply = (id: number, code: WireErrorCode, detail?: string): Reply =>
  detail === undefined ? { id, ok: false, error: code } : { id, ok: false, error: code, detail };

/**
 * Standard base64 to bytes; null when the text is not base64. Checked without a regex scan (it
 * cost four times the decode): Node's decoder skips bytes outside the alphabet, so strict text
 * decodes to exactly 3 bytes per 4 characters less the padding. What the decoder would wrongly
 * accept is caught first: the URL-safe `-` and `_`, and characters past U+00FF (it keeps their low byte).
 */
export function decodeBase64(text: string): Buffer | null {
  const n = text.length;
  if (n % 4 !== 0) return null;
  if (Buffer.byteLength(text, 'utf8') !== n || text.includes('-') || text.includes('_')) return null;
  const pad = n > 0 && text.charCodeAt(n - 1) === 61 ? (text.charCodeAt(n - 2) === 61 ? 2 : 1) : 0;
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === (n / 4) * 3 - pad ? bytes : null;
}

/** Bytes to standard base64, without copying a Buffer or a Uint8Array first. */
export const encodeBase64 = (bytes: Uint8Array): string =>
  (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).toString('base64');
