/**
 * A session's journal on disk: every stream frame as a binary record in numbered segment files,
 * capped in bytes by dropping the oldest segments, and read back for a replay that never blocks.
 */
import { closeSync, mkdirSync, openSync, read, readSync, rmSync, unlinkSync, writevSync } from 'node:fs';
import { join } from 'node:path';

export type RecordKind = 'stdout' | 'stderr' | 'exit';
const KIND_BYTE: Record<RecordKind, number> = { stdout: 1, stderr: 2, exit: 3 };
const BYTE_KIND: Record<number, RecordKind> = { 1: 'stdout', 2: 'stderr', 3: 'exit' };
const HEADER = 5; // kind (1 byte) + payload length (u32 big-endian)

export interface JournalRecord {
  readonly kind: RecordKind;
  /** Output bytes, or for `exit` the code as a 4-byte signed big-endian int. */
  readonly payload: Buffer;
}

interface Segment {
  readonly seq: number;
  readonly path: string;
  /** File bytes written so far; a reader never reads past it, so it never sees half a record. */
  size: number;
  /** Output bytes (stdout/stderr payloads) held, which is what the cap counts. */
  outputBytes: number;
}

export interface JournalLimits {
  /** Output bytes kept before the oldest segments are dropped. */
  readonly capBytes: number;
  /** A segment is closed and a new one started past this size. */
  readonly segmentBytes: number;
}

export const defaultSegmentBytes = (capBytes: number): number =>
  Math.max(4096, Math.min(8 * 1024 * 1024, Math.floor(capBytes / 8)));

export class Journal {
  readonly #dir: string;
  readonly #limits: JournalLimits;
  readonly #segments: Segment[] = [];
  #fd: number | null = null;
  #nextSeq = 1;
  #retained = 0;
  #dropped = 0;
  #closed = false;
  /** Set after a write failure (disk full, ...): later records were not kept. */
  writeError: string | null = null;

  constructor(dir: string, limits: JournalLimits) {
    this.#dir = dir;
    this.#limits = limits;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }

  /** Output bytes lost to the cap: a replay starts this many bytes into the output. */
  get droppedBytes(): number {
    return this.#dropped;
  }

  /** Appends one record synchronously, so journal order is the order frames were produced. */
  append(kind: RecordKind, payload: Buffer): void {
    if (this.#closed || this.writeError !== null) return;
    try {
      let seg = this.#segments.at(-1);
      if (this.#fd === null || seg === undefined || seg.size >= this.#limits.segmentBytes) seg = this.#roll();
      const header = Buffer.allocUnsafe(HEADER);
      header.writeUInt8(KIND_BYTE[kind], 0);
      header.writeUInt32BE(payload.length, 1);
      writevSync(this.#fd!, [header, payload]);
      seg.size += HEADER + payload.length;
      if (kind !== 'exit') {
        seg.outputBytes += payload.length;
        this.#retained += payload.length;
      }
      this.#prune();
    } catch (e) {
      this.writeError = e instanceof Error ? e.message : String(e);
    }
  }

  /** The file is closed for writing (the session ended); reading stays possible. */
  seal(): void {
    if (this.#fd !== null) closeSync(this.#fd);
    this.#fd = null;
  }

  remove(): void {
    this.seal();
    this.#closed = true;
    this.#segments.length = 0;
    rmSync(this.#dir, { recursive: true, force: true });
  }

  /**
   * A reader positioned at the oldest byte still held. Segment files are opened now, so a
   * prune during a slow replay cannot pull them away (an unlinked open file stays readable).
   */
  reader(): JournalReader {
    return new JournalReader(
      this,
      this.#segments.map((s) => ({ seg: s, fd: openSync(s.path, 'r') })),
    );
  }

  /** @internal segments newer than `seq`, for a reader catching up. */
  segmentsAfter(seq: number): Segment[] {
    return this.#segments.filter((s) => s.seq > seq);
  }

  #roll(): Segment {
    if (this.#fd !== null) closeSync(this.#fd);
    const seq = this.#nextSeq++;
    const path = join(this.#dir, `${String(seq).padStart(8, '0')}.seg`);
    this.#fd = openSync(path, 'a', 0o600);
    const seg: Segment = { seq, path, size: 0, outputBytes: 0 };
    this.#segments.push(seg);
    return seg;
  }

  #prune(): void {
    // The segment being written is never dropped, so the newest output is always kept.
    while (this.#retained > this.#limits.capBytes && this.#segments.length > 1) {
      const oldest = this.#segments.shift()!;
      this.#retained -= oldest.outputBytes;
      this.#dropped += oldest.outputBytes;
      try {
        unlinkSync(oldest.path);
      } catch {
        // already gone: nothing to free
      }
    }
  }
}

const READ_CHUNK = 1024 * 1024;
const EMPTY = Buffer.alloc(0);

/** Reads records in order. Asynchronous reads for the bulk, a synchronous tail for the hand-over. */
export class JournalReader {
  readonly #journal: Journal;
  readonly #open: { seg: Segment; fd: number }[];
  #index = 0;
  #offset = 0;
  #lastSeq: number;
  #carry: Buffer = EMPTY;
  /** The buffer next(true) reads into, kept across calls; grown when a carry and a read do not fit. */
  #scratch: Buffer | null = null;
  /** Whether #carry is a view of #scratch (next(true)) rather than a copy of its own. */
  #carryInScratch = false;
  /** Set when a segment was pruned before this reader reached it: bytes were skipped. */
  gap = false;

  constructor(journal: Journal, open: { seg: Segment; fd: number }[]) {
    this.#journal = journal;
    this.#open = open;
    this.#lastSeq = open.at(-1)?.seg.seq ?? 0;
  }

  /** Bytes known to be written but not yet read. */
  pending(): number {
    this.#adopt();
    let n = 0;
    for (let i = this.#index; i < this.#open.length; i++)
      n += this.#open[i]!.seg.size - (i === this.#index ? this.#offset : 0);
    return n;
  }

  /**
   * Reads up to about 1 MiB asynchronously; returns whole records (possibly none at the end). The
   * part of a record left over from the last read starts the buffer, so nothing is joined after.
   * With `reuse`, every call reads into the same buffer: the records returned are valid only until
   * the next call, for a caller that copies them out at once (a replay frame is encoded as it is
   * sent), instead of leaving a fresh megabyte of garbage per read to the collector.
   */
  async next(reuse = false): Promise<JournalRecord[]> {
    const cur = this.#current();
    if (cur === null) return [];
    const len = Math.min(READ_CHUNK, cur.seg.size - this.#offset);
    const kept = this.#carry.length;
    let buf: Buffer;
    if (!reuse) {
      buf = Buffer.allocUnsafe(kept + len);
      this.#carry.copy(buf);
    } else if (this.#scratch === null || this.#scratch.length < kept + len) {
      // Room for a read and a whole carried record, so the buffer is made once per replay.
      buf = this.#scratch = Buffer.allocUnsafeSlow(Math.max(2 * READ_CHUNK, kept + len));
      this.#carry.copy(buf);
    } else {
      buf = this.#scratch;
      // A carry left in this buffer moves to its front (copyWithin is a memmove); another is copied in.
      const from = this.#carry.byteOffset - buf.byteOffset;
      if (this.#carryInScratch) buf.copyWithin(0, from, from + kept);
      else this.#carry.copy(buf);
    }
    this.#carry = EMPTY;
    this.#carryInScratch = false;
    const n = await new Promise<number>((res, rej) =>
      read(cur.fd, buf, kept, len, this.#offset, (e, bytes) => (e ? rej(e) : res(bytes))),
    );
    this.#offset += n;
    return this.#parse(buf.subarray(0, kept + n), reuse);
  }

  /** Reads everything left synchronously; used for the small tail so no record slips between read and hand-over. */
  rest(): JournalRecord[] {
    const out: JournalRecord[] = [];
    for (let cur = this.#current(); cur !== null; cur = this.#current()) {
      const len = cur.seg.size - this.#offset;
      const kept = this.#carry.length;
      const buf = Buffer.allocUnsafe(kept + len);
      this.#carry.copy(buf);
      this.#carry = EMPTY;
      this.#carryInScratch = false;
      const n = readSync(cur.fd, buf, kept, len, this.#offset);
      this.#offset += n;
      out.push(...this.#parse(buf.subarray(0, kept + n)));
      if (n < len) break;
    }
    return out;
  }

  close(): void {
    for (const { fd } of this.#open) {
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
    }
    this.#open.length = 0;
  }

  /** The segment with unread bytes, moving past finished ones; null when caught up. */
  #current(): { seg: Segment; fd: number } | null {
    this.#adopt();
    while (this.#index < this.#open.length) {
      const cur = this.#open[this.#index]!;
      if (this.#offset < cur.seg.size) return cur;
      // A segment that is not the newest is complete; the newest may still grow.
      if (this.#index === this.#open.length - 1) return null;
      this.#index++;
      this.#offset = 0;
    }
    return null;
  }

  /** Opens segments created since the last look. */
  #adopt(): void {
    for (const seg of this.#journal.segmentsAfter(this.#lastSeq)) {
      if (seg.seq !== this.#lastSeq + 1) this.gap = true;
      try {
        this.#open.push({ seg, fd: openSync(seg.path, 'r') });
      } catch {
        this.gap = true;
      }
      this.#lastSeq = seg.seq;
    }
  }

  /** Whole records from `buf` (which starts with the previous carry); an unfinished one is carried. */
  #parse(buf: Buffer, inScratch = false): JournalRecord[] {
    const out: JournalRecord[] = [];
    let at = 0;
    while (buf.length - at >= HEADER) {
      const kind = BYTE_KIND[buf.readUInt8(at)];
      const len = buf.readUInt32BE(at + 1);
      if (buf.length - at - HEADER < len) break;
      if (kind !== undefined) out.push({ kind, payload: buf.subarray(at + HEADER, at + HEADER + len) });
      at += HEADER + len;
    }
    if (inScratch) {
      // Left in place: the next read moves it to the front of the same buffer.
      this.#carry = at < buf.length ? buf.subarray(at) : EMPTY;
      this.#carryInScratch = at < buf.length;
      return out;
    }
    // A copy: the records returned are views of `buf`, and the carry must not keep it all alive.
    this.#carry = at < buf.length ? Buffer.from(buf.subarray(at)) : EMPTY;
    return out;
  }
}
