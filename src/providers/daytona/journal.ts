/**
 * Parses a Daytona session-command journal: each line is prefixed `\x01\x01\x01` (stdout) or
 * `\x02\x02\x02` (stderr). Only complete lines are consumed, so a poll that cut a line mid-way resumes there.
 */

export interface JournalChunk {
  readonly stream: 'stdout' | 'stderr';
  readonly data: Uint8Array;
}

export interface JournalParse {
  /** Consecutive lines of one stream are coalesced into one chunk. */
  readonly chunks: JournalChunk[];
  /** Bytes of the input consumed: up to and including the last newline. */
  readonly consumed: number;
}

const NL = 0x0a;
const markerOf = (b: Uint8Array, i: number): 'stdout' | 'stderr' | null => {
  if (i + 2 >= b.length) return null;
  if (b[i] === 1 && b[i + 1] === 1 && b[i + 2] === 1) return 'stdout';
  if (b[i] === 2 && b[i + 1] === 2 && b[i + 2] === 2) return 'stderr';
  return null;
};

/**
 * `final` also consumes a trailing line without a newline (the journal is complete once the
 * command has exited). Unmarked lines (input echo, old daemons) count as stdout.
 */
export function parseJournal(bytes: Uint8Array, final = false): JournalParse {
  const chunks: { stream: 'stdout' | 'stderr'; parts: Uint8Array[] }[] = [];
  let pos = 0;
  while (pos < bytes.length) {
    let nl = bytes.indexOf(NL, pos);
    if (nl < 0) {
      if (!final) break;
      nl = bytes.length - 1;
    }
    const marker = markerOf(bytes, pos);
    const start = marker ? pos + 3 : pos;
    const stream = marker ?? 'stdout';
    const line = bytes.subarray(start, nl + 1);
    const last = chunks[chunks.length - 1];
    if (line.length > 0) {
      if (last && last.stream === stream) last.parts.push(line);
      else chunks.push({ stream, parts: [line] });
    }
    pos = nl + 1;
  }
  return {
    chunks: chunks.map((c) => ({ stream: c.stream, data: new Uint8Array(Buffer.concat(c.parts)) })),
    consumed: pos,
  };
}
