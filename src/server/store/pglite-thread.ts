/**
 * The embedded database on a thread of its own: PGlite runs in a worker (pglite-worker.ts) and this
 * client speaks to it with the part of PGlite's interface the query builder and the migrations use.
 *
 * Why a thread: PGlite executes every statement synchronously on the thread that holds it. On the
 * server's event loop each statement stalled every request, stream and runner frame; and at start-up
 * opening it (Postgres booting inside WebAssembly, the template copied) ran after the server's modules
 * loaded instead of beside them. Here both happen on another core.
 */
import { Worker } from 'node:worker_threads';
import type { ThreadError, ThreadReply, ThreadRequest, ThreadResults } from './pglite-thread-protocol.ts';

/** What is lost with the thread: every pending request fails with it, and so does every later one. */
export class EmbeddedDatabaseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddedDatabaseError';
  }
}

/** A Postgres error from the thread, with its fields (code, detail, constraint…) as properties. */
const rebuilt = (e: ThreadError): Error => Object.assign(new Error(e.message), e.fields, { name: e.name });

type Request = ThreadRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

interface QueryOptions {
  readonly rowMode?: 'object' | 'array';
  /** Per type OID; the thread keeps a listed type's values as text (the only parser the query builder passes). */
  readonly parsers?: Readonly<Record<number, unknown>>;
}

/** The statements of one transaction: sent as they come, with nothing from outside it in between. */
export interface ThreadTransaction {
  query<T>(text: string, params?: unknown[], options?: QueryOptions): Promise<ThreadResults<T>>;
  exec(text: string): Promise<void>;
}

/**
 * Statements outside a transaction go out at once, the thread runs them in order; a transaction waits
 * for those before it and holds back those after it until it ends, as PGlite's own lock does.
 */
class Gate {
  #shared = 0;
  #exclusive = false;
  readonly #waiting: { exclusive: boolean; go: () => void }[] = [];

  async run<T>(exclusive: boolean, fn: () => Promise<T>): Promise<T> {
    if (this.#waiting.length === 0 && this.#free(exclusive)) this.#take(exclusive);
    else await new Promise<void>((go) => this.#waiting.push({ exclusive, go }));
    try {
      return await fn();
    } finally {
      if (exclusive) this.#exclusive = false;
      else this.#shared--;
      this.#pump();
    }
  }

  #free(exclusive: boolean): boolean {
    return !this.#exclusive && (!exclusive || this.#shared === 0);
  }

  #take(exclusive: boolean): void {
    if (exclusive) this.#exclusive = true;
    else this.#shared++;
  }

  #pump(): void {
    while (this.#waiting.length > 0 && this.#free(this.#waiting[0]!.exclusive)) {
      const w = this.#waiting.shift()!;
      this.#take(w.exclusive);
      w.go();
    }
  }
}

export class PgliteThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  readonly #gate = new Gate();
  #next = 1;
  #lost: EmbeddedDatabaseError | null = null;

  /** Starts the thread (or takes the one prestartPgliteThread began); it compiles PGlite's WebAssembly before `open`. */
  constructor() {
    this.#worker = takeSpare() ?? startWorker();
    // Referenced only while a request waits: an open database alone does not keep the process alive.
    this.#worker.unref();
    this.#worker.on('message', (reply: ThreadReply) => {
      const p = this.#pending.get(reply.id);
      if (!p) return;
      this.#pending.delete(reply.id);
      if (this.#pending.size === 0) this.#worker.unref();
      if (reply.ok) p.resolve(reply.value);
      else p.reject(rebuilt(reply.error));
    });
    this.#worker.on('error', (e) => this.#fail(`the embedded database's thread failed: ${e.message}`));
    this.#worker.on('exit', (code) => this.#fail(`the embedded database's thread ended (exit code ${code})`));
  }

  /**
   * Opens (boots) the database in `dir` with these server settings (`name=value`) on its command line,
   * a new one copied from template `seed` first (a failed copy rejects with a TemplateCopyError's name).
   */
  async open(dir: string, settings: readonly string[], seed?: string): Promise<void> {
    await this.#call({ op: 'open', dir, settings: [...settings], seed });
  }

  query<T>(text: string, params?: unknown[], options?: QueryOptions): Promise<ThreadResults<T>> {
    return this.#gate.run(false, () => this.#query<T>(text, params, options));
  }

  exec(text: string): Promise<void> {
    return this.#gate.run(false, () => this.#call({ op: 'exec', text }) as Promise<void>);
  }

  /** BEGIN, the callback's statements, COMMIT; ROLLBACK when it throws. */
  transaction<T>(fn: (tx: ThreadTransaction) => Promise<T>): Promise<T> {
    return this.#gate.run(true, async () => {
      await this.#call({ op: 'exec', text: 'BEGIN' });
      let closed = false;
      const live = () => {
        if (closed) throw new EmbeddedDatabaseError('the transaction has ended');
      };
      const tx: ThreadTransaction = {
        query: async <R>(text: string, params?: unknown[], options?: QueryOptions) => {
          live();
          return await this.#query<R>(text, params, options);
        },
        exec: async (text: string) => {
          live();
          await this.#call({ op: 'exec', text });
        },
      };
      try {
        const result = await fn(tx);
        closed = true;
        await this.#call({ op: 'exec', text: 'COMMIT' });
        return result;
      } catch (e) {
        closed = true;
        await this.#call({ op: 'exec', text: 'ROLLBACK' });
        throw e;
      }
    });
  }

  /** Closes the database, then ends the thread. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#lost === null) {
      await this.#gate.run(true, () => this.#call({ op: 'close' }));
      this.#lost = new EmbeddedDatabaseError('the embedded database is closed');
    }
    await this.#worker.terminate();
  }

  #query<T>(text: string, params: unknown[] | undefined, options: QueryOptions | undefined) {
    const rawTypes = options?.parsers ? Object.keys(options.parsers).map(Number) : [];
    return this.#call({ op: 'query', text, params, rowMode: options?.rowMode ?? 'object', rawTypes }) as Promise<
      ThreadResults<T>
    >;
  }

  #call(req: Request): Promise<unknown> {
    if (this.#lost) return Promise.reject(this.#lost);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...req, id });
    });
  }

  #fail(message: string): void {
    this.#lost ??= new EmbeddedDatabaseError(message);
    for (const p of this.#pending.values()) p.reject(this.#lost);
    this.#pending.clear();
  }
}

/**
 * The thread's JavaScript holds little beyond one statement's rows at a time (PGlite's memory is its
 * WebAssembly's, outside these limits): a young generation of V8's default size only adds to RSS.
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 4 };

let spare: { worker: Worker; failed: boolean } | null = null;

/**
 * Starts the next database's thread now, before the caller knows where the database is: `fountain
 * server`/`up` call it before loading their modules, so the thread's own start and PGlite's load overlap them.
 */
export function prestartPgliteThread(): void {
  if (spare) return;
  const s = { worker: startWorker(), failed: false };
  s.worker.unref();
  // A spare that failed is replaced at take; its error must not go uncaught meanwhile.
  s.worker.once('error', () => {
    s.failed = true;
  });
  spare = s;
}

function takeSpare(): Worker | null {
  const s = spare;
  spare = null;
  if (!s) return null;
  if (!s.failed) return s.worker;
  void s.worker.terminate();
  return null;
}

/**
 * The worker beside this module: compiled JavaScript in dist/; from src/ (tests, a stale build) the
 * TypeScript through tsx, whose `--import` hooks a Node 20 worker does not take for its entry module.
 */
function startWorker(): Worker {
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./pglite-worker.js', import.meta.url), { resourceLimits: WORKER_LIMITS });
  const api = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const entry = JSON.stringify(new URL('./pglite-worker.ts', import.meta.url).href);
  return new Worker(`import(${api}).then((tsx) => tsx.tsImport(${entry}, ${entry}))`, {
    eval: true,
    resourceLimits: WORKER_LIMITS,
  });
}
