/**
 * JournalSkipper: drops a replayed journal's earlier turns up to and including
 * the reply to the request before the active prompt, then lets every later byte through untouched.
 */
import { err, ok, type Result } from '../sandbox/index.ts';
import { LineSplitter, MAX_LINE_BYTES, decodeLine, isBlank } from './lines.ts';
import { classifyLine, isResponseTo, type JsonRpcId } from './message.ts';

export interface ReplayError {
  readonly code: 'runner_replay_line_too_large';
  readonly message: string;
}

const EMPTY = new Uint8Array(0);

export class JournalSkipper {
  private readonly splitter: LineSplitter;
  private seen = false;
  private failure: ReplayError | null = null;
  private discarded = 0;

  /**
   * @param previousId the JSON-RPC id of the request sent just before the active prompt, i.e. `acp_prompt_id − 1`
   *   (the client numbers requests consecutively and sends one only after the previous one was answered).
   */
  constructor(
    readonly previousId: JsonRpcId,
    maxLineBytes: number = MAX_LINE_BYTES,
  ) {
    this.splitter = new LineSplitter(maxLineBytes);
  }

  /** The boundary reply was found; from then on `push` returns its input unchanged. */
  get boundarySeen(): boolean {
    return this.seen;
  }

  /** Non-blank lines dropped so far, the boundary reply included: the journal line ordinal where the kept part starts. */
  get discardedLines(): number {
    return this.discarded;
  }

  /** Feeds the next journal chunk; returns the bytes to pass on (empty until the boundary is crossed). */
  push(chunk: Uint8Array): Result<Uint8Array, ReplayError> {
    if (this.failure) return err(this.failure);
    if (this.seen) return ok(chunk);
    for (const item of this.splitter.push(chunk)) {
      if (item.kind === 'too_large') {
        this.failure = {
          code: 'runner_replay_line_too_large',
          message: `a journal line exceeds ${MAX_LINE_BYTES} bytes before the turn boundary (reply to request ${JSON.stringify(this.previousId)})`,
        };
        return err(this.failure);
      }
      if (isBlank(item.bytes)) continue;
      this.discarded += 1;
      const { text } = decodeLine(item.bytes);
      if (text === null) continue;
      const c = classifyLine(text);
      if (c.ok && isResponseTo(c.message, this.previousId)) {
        this.seen = true;
        return ok(chunk.subarray(item.end));
      }
    }
    return ok(EMPTY);
  }
}
