/**
 * Encoding and decoding of runner wire frames, total on both sides.
 * A decode never throws: bad input comes back as a typed refusal the caller answers or logs.
 */
import type { Request, Reply, StreamFrame } from './frames.ts';
import { replySchema, requestEnvelopeSchema, requestSchema, streamFrameSchema } from './frames.ts';
import { GUEST_OP_NAMES } from './frames.ts';
import { MAX_FRAME_BYTES } from './ops.ts';
import { MAX_FRAME_DEPTH, nestsDeeperThan } from './depth.ts';
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
  if (nestsDeeperThan(text)) return refuse('invalid', `frame nested deeper than ${MAX_FRAME_DEPTH} levels`);
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
    return parsed.success
      ? { kind: 'stream', frame: parsed.data }
      : refuse('invalid', `bad stream frame: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
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

/** The bytes of output frames built by outputFrame(): encoded straight to the wire, no escaping needed. */
const outputBytes = new WeakMap<object, readonly Uint8Array[]>();

const asBuffer = (b: Uint8Array): Buffer =>
  Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/**
 * An output frame built from bytes, given whole or as consecutive pieces (a replay joins journal
 * records without copying them together). Its `data` is base64-encoded only when read: the wire
 * encoders work from the bytes, skipping JSON.stringify's escape scan (which dominated streaming
 * and replay) and the payload-sized string that encodeFrameBytes avoids.
 */
export function outputFrame(
  stream: 'stdout' | 'stderr',
  sessionId: string,
  bytes: Uint8Array | readonly Uint8Array[],
  replayFor?: number,
): StreamFrame {
  const parts = bytes instanceof Uint8Array ? [bytes] : bytes;
  let data: string | undefined;
  const frame: StreamFrame = {
    stream,
    session_id: sessionId,
    get data(): string {
      return (data ??= encodeBase64(parts.length === 1 ? parts[0]! : Buffer.concat(parts)));
    },
    ...(replayFor === undefined ? {} : { replay_for: replayFor }),
  };
  outputBytes.set(frame, parts);
  return frame;
}

const outputFrameEnds = (f: StreamFrame): [head: string, tail: string] => [
  `{"stream":"${f.stream}","session_id":${JSON.stringify(f.session_id)},"data":"`,
  f.replay_for === undefined ? '"}' : `","replay_for":${JSON.stringify(f.replay_for)}}`,
];

/** Encodes a frame, leaving out fields that are undefined, null-free empty arrays stay as given. */
export const encodeFrame = (frame: Request | Reply | StreamFrame): string => {
  if (outputBytes.has(frame)) {
    const [head, tail] = outputFrameEnds(frame as StreamFrame);
    return `${head}${(frame as Extract<StreamFrame, { data: string }>).data}${tail}`;
  }
  return JSON.stringify(frame);
};

/** Payload bytes base64-encoded at a time (a multiple of 3): each slice's text stays small and short-lived. */
const ENCODE_SLICE = 48 * 1024;

/**
 * encodeFrame as UTF-8 bytes. An output frame's payload is encoded a slice at a time into the
 * frame's buffer: as one string it would be copied three times more (flattened, measured,
 * re-encoded) and, past a few hundred KiB, be allocated in V8's old generation.
 * `alloc` supplies an output frame's buffer (at least the size asked; the frame is its start), so
 * a sender can reuse buffers the transport is done with; other frames are small and always fresh.
 */
export function encodeFrameBytes(
  frame: Request | Reply | StreamFrame,
  alloc: (size: number) => Buffer = Buffer.allocUnsafe,
): Buffer {
  const parts = outputBytes.get(frame);
  if (parts === undefined) return Buffer.from(encodeFrame(frame), 'utf8');
  const [head, tail] = outputFrameEnds(frame as StreamFrame);
  const size = parts.reduce((n, p) => n + p.byteLength, 0);
  const length = Buffer.byteLength(head, 'utf8') + Math.ceil(size / 3) * 4 + Buffer.byteLength(tail, 'utf8');
  const out = alloc(length).subarray(0, length);
  let at = out.write(head, 0, 'utf8');
  // Base64 runs in groups of 3 bytes; a group split between two pieces is carried over.
  let carry: Buffer = Buffer.alloc(0);
  for (const part of parts) {
    let p = asBuffer(part);
    if (carry.length > 0) {
      const need = 3 - carry.length;
      if (p.length < need) {
        carry = Buffer.concat([carry, p]);
        continue;
      }
      at += out.write(Buffer.concat([carry, p.subarray(0, need)]).toString('base64'), at, 'latin1');
      p = p.subarray(need);
    }
    const whole = p.length - (p.length % 3);
    for (let i = 0; i < whole; i += ENCODE_SLICE)
      at += out.write(p.toString('base64', i, Math.min(whole, i + ENCODE_SLICE)), at, 'latin1');
    carry = p.subarray(whole);
  }
  if (carry.length > 0) at += out.write(carry.toString('base64'), at, 'latin1');
  out.write(tail, at, 'utf8');
  return out;
}

export const okReply = (id: number, result: Record<string, unknown> = {}): Reply => ({ id, ok: true, result });
export const errorReply = (id: number, code: WireErrorCode, detail?: string): Reply =>
  detail === undefined ? { id, ok: false, error: code } : { id, ok: false, error: code, detail };

/** An output frame as received, its data already decoded to bytes. */
export interface ReceivedOutput {
  readonly stream: 'stdout' | 'stderr';
  readonly session_id: string;
  readonly data: Buffer;
  readonly replay_for?: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OUTPUT_PREFIX = {
  stdout: Buffer.from('{"stream":"stdout","session_id":"'),
  stderr: Buffer.from('{"stream":"stderr","session_id":"'),
} as const;
const DATA_KEY = Buffer.from(',"data":"');
const REPLAY_KEY = Buffer.from(',"replay_for":');

/**
 * The inverse of encodeFrame's output fast path, read straight from the received bytes: a frame
 * laid out exactly as encodeFrame writes one is decoded without turning the payload into text
 * and running JSON.parse over it, which (with the copies it makes) dominated replay on the
 * receiving side. Anything else, bad base64 included, is null: the caller's general path decides.
 */
export function decodeOutputFrameBytes(buf: Buffer): ReceivedOutput | null {
  const stream = buf[14] === 0x6f ? 'stdout' : 'stderr'; // the "o" of stdout, the "e" of stderr
  const prefix = OUTPUT_PREFIX[stream];
  if (!holdsAt(buf, prefix, 0)) return null;
  const idEnd = buf.indexOf(QUOTE, prefix.length);
  if (idEnd <= prefix.length) return null;
  // An escaped id, or one JSON would refuse, is left to JSON.parse.
  for (let i = prefix.length; i < idEnd; i++) if (buf[i]! < 0x20 || buf[i] === BACKSLASH) return null;
  if (!holdsAt(buf, DATA_KEY, idEnd + 1)) return null;
  const dataStart = idEnd + 1 + DATA_KEY.length;
  const dataEnd = buf.indexOf(QUOTE, dataStart);
  if (dataEnd < 0 || buf[buf.length - 1] !== 0x7d) return null;
  let replayFor: number | undefined;
  if (dataEnd + 2 !== buf.length) {
    if (!holdsAt(buf, REPLAY_KEY, dataEnd + 1)) return null;
    const text = buf.toString('latin1', dataEnd + 1 + REPLAY_KEY.length, buf.length - 1);
    if (!/^(0|[1-9][0-9]{0,15})$/.test(text) || !Number.isSafeInteger(Number(text))) return null;
    replayFor = Number(text);
  }
  const data = decodeBase64Bytes(buf.subarray(dataStart, dataEnd));
  if (data === null) return null;
  const session_id = buf.toString('utf8', prefix.length, idEnd);
  return replayFor === undefined ? { stream, session_id, data } : { stream, session_id, data, replay_for: replayFor };
}

const holdsAt = (buf: Buffer, key: Buffer, at: number): boolean =>
  at + key.length <= buf.length && buf.compare(key, 0, key.length, at, at + key.length) === 0;

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

/** Characters decoded at a time (a multiple of 4): each slice's text stays small and short-lived. */
const BASE64_SLICE = 64 * 1024;

/**
 * decodeBase64 over the characters' bytes, e.g. a frame's payload as received. The text is
 * decoded a slice at a time into one buffer: a whole payload as one string would land in V8's
 * old generation and force a full collection every few megabytes. Strictness is decodeBase64's:
 * every slice but the last decodes to exactly 3 bytes per 4 characters or the total falls short.
 */
export function decodeBase64Bytes(text: Uint8Array): Buffer | null {
  const src = Buffer.isBuffer(text) ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  const n = src.length;
  // Node's decoder also takes the URL-safe alphabet; bytes past 0x7f it skips, which the length check catches.
  if (n % 4 !== 0 || src.includes(0x2d) || src.includes(0x5f)) return null;
  const pad = n > 0 && src[n - 1] === 61 ? (src[n - 2] === 61 ? 2 : 1) : 0;
  const out = Buffer.allocUnsafe((n / 4) * 3 - pad);
  let written = 0;
  for (let at = 0; at < n; at += BASE64_SLICE)
    written += out.write(src.toString('latin1', at, Math.min(n, at + BASE64_SLICE)), written, 'base64');
  return written === out.length ? out : null;
}
