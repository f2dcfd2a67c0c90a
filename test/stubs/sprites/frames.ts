/**
 * Test helper: collects a command's stream frames and waits for a condition on them,
 * with a generous timeout that is only a hang guard.
 */
import type { FrameSink, StreamFrame } from '../../../src/sandbox/index.ts';

export class Frames {
  readonly list: StreamFrame[] = [];
  #waiters: Array<() => void> = [];
  readonly sink: FrameSink = (f) => {
    this.list.push(f);
    for (const w of this.#waiters.splice(0)) w();
  };

  text(type: 'stdout' | 'stderr' = 'stdout'): string {
    return this.list
      .filter((f): f is Extract<StreamFrame, { type: 'stdout' | 'stderr' }> => f.type === type)
      .map((f) => Buffer.from(f.data).toString('utf8'))
      .join('');
  }

  terminals(): StreamFrame[] {
    return this.list.filter((f) => f.type === 'exit' || f.type === 'error');
  }

  async until(pred: (f: Frames) => boolean, what: string, timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; frames: ${JSON.stringify(this.summary())}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 100));
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  summary(): string[] {
    return this.list.map((f) =>
      f.type === 'exit'
        ? `exit:${f.code}`
        : f.type === 'error'
          ? `error:${f.error.code}:${f.error.detail ?? ''}`
          : `${f.type}:${Buffer.from(f.data).toString('utf8')}`,
    );
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls until `check` holds; a hang guard, never a measurement. */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  what: string,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}
