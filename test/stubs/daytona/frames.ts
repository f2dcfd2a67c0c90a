/**
 * A test helper that records a command's stream frames and waits for a condition on them.
 * Timeouts here are hang guards only; no test asserts a duration.
 */
import type { FrameSink, StreamFrame } from '../../../src/sandbox/index.ts';

export class FrameLog {
  readonly frames: StreamFrame[] = [];
  #waiters: (() => void)[] = [];

  readonly sink: FrameSink = (f) => {
    this.frames.push(f);
    for (const w of this.#waiters.splice(0)) w();
  };

  text(stream: 'stdout' | 'stderr'): string {
    return Buffer.concat(this.frames.flatMap((f) => (f.type === stream ? [Buffer.from(f.data)] : []))).toString('utf8');
  }

  terminals(): StreamFrame[] {
    return this.frames.filter((f) => f.type === 'exit' || f.type === 'error');
  }

  async until(pred: (log: FrameLog) => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; frames: ${JSON.stringify(this.describe())}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 200));
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  describe(): unknown[] {
    return this.frames.map((f) =>
      f.type === 'stdout' || f.type === 'stderr' ? { type: f.type, text: Buffer.from(f.data).toString('utf8') } : f,
    );
  }
}

/** Prints `ready`, then echoes each stdin chunk on its own line; exits 0 on EOF. Line-safe for Daytona's labeler. */
export const STAY_SCRIPT =
  'echo ready; while :; do c=$(dd bs=65536 count=1 2>/dev/null); [ -z "$c" ] && exit 0; printf "%s\\n" "$c"; done';

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
