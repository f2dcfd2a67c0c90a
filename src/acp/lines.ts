/**
 * Byte-level line splitting for NDJSON streams that arrive in arbitrary chunks, with a per-line size limit.
 * Works on bytes so a chunk boundary inside a multi-byte UTF-8 character or inside a line is harmless.
 */

/** The line limit of a replayed journal, used for live output as well so replay and live agree. */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;

const NL = 0x0a;
const PREFIX_BYTES = 256;

export type SplitItem =
  /** A complete line without its newline. `end` is the offset just past the newline in the chunk just pushed. */
  | { readonly kind: 'line'; readonly bytes: Uint8Array; readonly end: number }
  /** A line over the limit; reported once, its bytes dropped up to the next newline. `prefix` is its start. */
  | { readonly kind: 'too_large'; readonly prefix: Uint8Array; readonly end: number };

export class LineSplitter {
  private parts: Uint8Array[] = [];
  private size = 0;
  /** Inside an oversized line that was already reported: drop until the next newline. */
  private dropping = false;

  constructor(private readonly maxLineBytes: number = MAX_LINE_BYTES) {}

  /** True when bytes of an unfinished line are buffered. */
  get pending(): boolean {
    return this.size > 0;
  }

  push(chunk: Uint8Array): SplitItem[] {
    const items: SplitItem[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NL, start);
      if (nl === -1) break;
      const end = nl + 1;
      if (this.dropping) {
        this.dropping = false;
      } else if (this.size + (nl - start) > this.maxLineBytes) {
        items.push({ kind: 'too_large', prefix: this.prefix(chunk.subarray(start, nl)), end });
      } else {
        items.push({ kind: 'line', bytes: this.take(chunk.subarray(start, nl)), end });
      }
      this.parts = [];
      this.size = 0;
      start = end;
    }
    if (start < chunk.length && !this.dropping) {
      const rest = chunk.subarray(start);
      if (this.size + rest.length > this.maxLineBytes) {
        items.push({ kind: 'too_large', prefix: this.prefix(rest), end: chunk.length });
        this.parts = [];
        this.size = 0;
        this.dropping = true;
      } else {
        // Copy: the caller may reuse its buffer after push returns.
        this.parts.push(Uint8Array.from(rest));
        this.size += rest.length;
      }
    }
    return items;
  }

  /** The unfinished last line, if any (the stream ended without a final newline). */
  flush(): Uint8Array | null {
    if (this.dropping || this.size === 0) {
      this.reset();
      return null;
    }
    const line = this.take(new Uint8Array(0));
    this.reset();
    return line;
  }

  private reset(): void {
    this.parts = [];
    this.size = 0;
    this.dropping = false;
  }

  private take(tail: Uint8Array): Uint8Array {
    if (this.parts.length === 0) return tail;
    const out = new Uint8Array(this.size + tail.length);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    out.set(tail, at);
    return out;
  }

  private prefix(tail: Uint8Array): Uint8Array {
    const all = this.parts.length === 0 ? tail.subarray(0, PREFIX_BYTES) : this.take(tail.subarray(0, PREFIX_BYTES));
    return all.subarray(0, PREFIX_BYTES);
  }
}

const strict = new TextDecoder('utf-8', { fatal: true });
const lossy = new TextDecoder('utf-8');

/** Decodes one line (dropping a trailing CR); `null` text means it was not UTF-8, with a lossy copy for reports. */
export function decodeLine(bytes: Uint8Array): { text: string | null; lossy: string } {
  const body = bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.subarray(0, bytes.length - 1) : bytes;
  try {
    const text = strict.decode(body);
    return { text, lossy: text };
  } catch {
    return { text: null, lossy: lossy.decode(body) };
  }
}

/** Whitespace-only lines carry nothing in NDJSON; they are skipped and not counted. */
export const isBlank = (bytes: Uint8Array): boolean => bytes.every((b) => b === 0x20 || b === 0x09 || b === 0x0d);
