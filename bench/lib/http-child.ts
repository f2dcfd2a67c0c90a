/**
 * An HTTP client in a process of its own, driven over IPC: a real client never shares the server's
 * event loop, so what it measures is when the answer left the server, not when that loop got to it.
 */
import { fork, type ChildProcess } from 'node:child_process';

interface Ask {
  readonly n: number;
  readonly method: string;
  readonly url: string;
  readonly key: string;
  readonly body?: unknown;
}

export interface Answer {
  readonly n: number;
  /** process.hrtime.bigint() when the request was sent, as a string: CLOCK_MONOTONIC, shared by every process on the machine. */
  readonly t0: string;
  /** Milliseconds from sending the request to its whole answer read, in the child. */
  readonly ms: number;
  readonly status: number;
  readonly text: string;
}

/** The parent's end: one child, one request at a time. */
export class HttpChild {
  readonly #proc: ChildProcess;
  readonly #waiting = new Map<number, (a: Answer) => void>();
  #n = 0;

  constructor() {
    this.#proc = fork(import.meta.filename, ['child'], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    this.#proc.on('message', (m: Answer) => {
      this.#waiting.get(m.n)?.(m);
      this.#waiting.delete(m.n);
    });
  }

  async call(method: string, url: string, key: string, body?: unknown): Promise<Answer> {
    const n = ++this.#n;
    const ask: Ask = { n, method, url, key, ...(body === undefined ? {} : { body }) };
    const answer = new Promise<Answer>((resolve) => this.#waiting.set(n, resolve));
    this.#proc.send(ask);
    const a = await answer;
    if (a.status < 200 || a.status >= 300)
      throw new Error(`${method} ${url}: HTTP ${a.status} ${a.text.slice(0, 300)}`);
    return a;
  }

  async stop(): Promise<void> {
    if (this.#proc.exitCode !== null) return;
    const exited = new Promise((r) => this.#proc.once('exit', r));
    this.#proc.kill();
    await exited;
  }
}

if (process.argv[2] === 'child' && process.send) {
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m: Ask) => {
    void (async () => {
      const t0 = process.hrtime.bigint();
      const res = await fetch(m.url, {
        method: m.method,
        headers: {
          authorization: `Bearer ${m.key}`,
          ...(m.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(m.body === undefined ? {} : { body: JSON.stringify(m.body) }),
      });
      const text = await res.text();
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      process.send!({ n: m.n, t0: String(t0), ms, status: res.status, text } satisfies Answer);
    })().catch((e: unknown) =>
      process.send!({ n: m.n, t0: '0', ms: 0, status: 599, text: String(e) } satisfies Answer),
    );
  });
}
