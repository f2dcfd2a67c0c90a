/**
 * A keyed job run once its key has been quiet for a while: each push restarts the wait with the newest
 * value, so a burst of pushes runs the job once, after the burst, with the last value.
 */
export class QuietWait<V> {
  readonly #ms: number;
  readonly #run: (key: string, value: V) => void;
  readonly #waiting = new Map<string, { timer: NodeJS.Timeout; value: V }>();

  constructor(ms: number, run: (key: string, value: V) => void) {
    this.#ms = ms;
    this.#run = run;
  }

  push(key: string, value: V): void {
    this.cancel(key);
    const timer = setTimeout(() => {
      this.#waiting.delete(key);
      this.#run(key, value);
    }, this.#ms);
    // A wait never holds the process open: shutdown flushes what is waiting.
    timer.unref();
    this.#waiting.set(key, { timer, value });
  }

  /** Drops the key's waiting job (a caller doing the same work now covers it). */
  cancel(key: string): void {
    const waiting = this.#waiting.get(key);
    if (!waiting) return;
    clearTimeout(waiting.timer);
    this.#waiting.delete(key);
  }

  /** Runs the key's waiting job now, if one waits. */
  runNow(key: string): void {
    const waiting = this.#waiting.get(key);
    if (!waiting) return;
    this.cancel(key);
    this.#run(key, waiting.value);
  }

  /** Runs every waiting job now. */
  flush(): void {
    for (const key of [...this.#waiting.keys()]) this.runNow(key);
  }
}
