/**
 * The Connect protocol's JSON codec as envd speaks it: 5-byte envelopes (flag byte, big-endian
 * length) around JSON, with an end-stream envelope (flag 0x02) that carries the RPC's error, if any.
 */
import { z } from 'zod';
import { connectErrorSchema } from './errors.ts';

export const FLAG_COMPRESSED = 0x01;
export const FLAG_END_STREAM = 0x02;
/** Bounds a single message so a broken peer cannot make us buffer without limit. */
export const MAX_ENVELOPE = 16 * 1024 * 1024;

export const UNARY_CONTENT_TYPE = 'application/json';
export const STREAM_CONTENT_TYPE = 'application/connect+json';

export interface Envelope {
  readonly flags: number;
  readonly data: Buffer;
}

export function encodeEnvelope(message: unknown, flags = 0): Buffer {
  const json = Buffer.from(JSON.stringify(message), 'utf8');
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

/** Splits a byte stream into envelopes, however the chunks fall. */
export class EnvelopeReader {
  #buf: Buffer = Buffer.alloc(0);

  /** Returns the envelopes completed by this chunk; throws on an oversized frame. */
  push(chunk: Buffer): Envelope[] {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    const out: Envelope[] = [];
    while (this.#buf.length >= 5) {
      const len = this.#buf.readUInt32BE(1);
      if (len > MAX_ENVELOPE) throw new Error(`envelope of ${len} bytes exceeds the limit`);
      if (this.#buf.length < 5 + len) break;
      out.push({ flags: this.#buf.readUInt8(0), data: this.#buf.subarray(5, 5 + len) });
      this.#buf = this.#buf.subarray(5 + len);
    }
    return out;
  }

  /** Bytes of an incomplete envelope still held: non-zero at the end of a body means truncation. */
  get pending(): number {
    return this.#buf.length;
  }
}

export const endStreamSchema = z.object({
  error: connectErrorSchema.optional(),
  metadata: z.record(z.string(), z.array(z.string())).optional(),
});
export type EndStream = z.infer<typeof endStreamSchema>;

export const parseJson = (data: Buffer): unknown => {
  try {
    return JSON.parse(data.toString('utf8'));
  } catch {
    return undefined;
  }
};
