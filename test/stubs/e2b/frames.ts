/**
 * Test helper: collects one owner's stream frames and waits for conditions on them,
 * with generous hang guards (never a timing assertion).
 */
import type { FrameSink, StreamFrame } from '../../../src/sandbox/index.ts';

export class Frames {
  readonly list: StreamFrame[] = [];
  #waiters: Array<() => void> = [];
  readonly sink: FrameSink = (f) => {
    this.list.push(f);
    for (const w of this.#waiters.splice(0)) w();
  };

  stdout(): string {
    return Buffer.concat(this.list.flatMap((f) => (f.type === 'stdout' ? [Buffer.from(f.data)] : []))).toString('utf8');
  }

  stderr(): string {
    return Buffer.concat(this.list.flatMap((f) => (f.type === 'stderr' ? [Buffer.from(f.data)] : []))).toString('utf8');
  }

  terminals(): StreamFrame[] {
    return this.list.filter((f) => f.type === 'exit' || f.type === 'error');
  }

  dump(): string {
    return JSON.stringify(
      this.list.map((f) =>
        f.type === 'stdout' || f.type === 'stderr' ? { type: f.type, text: Buffer.from(f.data).toString('utf8') } : f,
      ),
    );
  }

  async until(pred: () => boolean, what: string, guardMs = 15_000): Promise<void> {
    const deadline = Date.now() + guardMs;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`hang guard: still waiting for ${what}; frames: ${this.dump()}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  untilText(text: string): Promise<void> {
    return this.until(() => this.stdout().includes(text), `stdout containing ${JSON.stringify(text)}`);
  }

  async terminal(): Promise<StreamFrame> {
    await this.until(() => this.terminals().length > 0, 'a terminal frame');
    return this.terminals()[0]!;
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
