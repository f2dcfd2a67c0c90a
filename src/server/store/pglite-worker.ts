/**
 * The embedded database's thread: PGlite (Postgres compiled to WebAssembly) runs here, off the server's
 * event loop, answering the requests of pglite-thread.ts over the worker's message port.
 */
import { execFile } from 'node:child_process';
import { cp } from 'node:fs/promises';
import { promisify } from 'node:util';
import { parentPort } from 'node:worker_threads';
import type { PGlite } from '@electric-sql/pglite';
// Loaded as the thread starts, not when the open arrives (createPglite imports it then, from the cache).
import '@electric-sql/pglite';
import { NodeFS } from '@electric-sql/pglite/nodefs';
import { createPglite, preloadPglite } from './pglite-artifacts.ts';
import { TemplateCopyError } from './pglite-template.ts';
import type { ThreadReply, ThreadRequest, ThreadError } from './pglite-thread-protocol.ts';

const port = parentPort;
if (!port) throw new Error('pglite-worker.ts runs only as a worker thread');

// Compiling the WebAssembly runs on V8's background threads while the template is copied.
preloadPglite();

/**
 * `cp -a` copies the template's ~550 files in about half the time of Node's recursive copy and leaves
 * this thread free meanwhile (the WebAssembly's read and compile go on); Node's copy where there is no `cp`.
 */
async function copyTree(from: string, to: string): Promise<void> {
  try {
    try {
      await promisify(execFile)('cp', ['-a', `${from}/.`, `${to}/`]);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      await cp(from, to, { recursive: true });
    }
  } catch (e) {
    throw new TemplateCopyError((e as Error).message);
  }
}

/**
 * The data directory as PGlite's Node file system, once the template's copy into it is done: PGlite
 * reads its file bundle and instantiates its WebAssembly (~0.2 s) first and looks into the directory
 * only after initialSyncFs, so the copy runs meanwhile instead of before.
 */
class SeededNodeFS extends NodeFS {
  readonly #seeded: Promise<void>;

  constructor(dir: string, seeded: Promise<void>) {
    super(dir);
    this.#seeded = seeded;
  }

  override async initialSyncFs(): Promise<void> {
    await this.#seeded;
    await super.initialSyncFs();
  }
}

let db: PGlite | null = null;

/** Only what clones: a DatabaseError's fields (code, detail, constraint…) are strings and numbers. */
function errorOf(e: unknown): ThreadError {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e), fields: {} };
  const fields: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(e))
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') fields[k] = v;
  return { name: e.name, message: e.message, fields };
}

const open = (): PGlite => {
  if (!db) throw new Error('the embedded database is not open');
  return db;
};

async function serve(req: ThreadRequest): Promise<unknown> {
  switch (req.op) {
    case 'open': {
      if (db) throw new Error('the embedded database is already open');
      const seeded = req.seed === undefined ? Promise.resolve() : copyTree(req.seed, req.dir);
      // Awaited by the file system below; a copy that fails first must not count as unhandled meanwhile.
      seeded.catch(() => undefined);
      db = await createPglite(new SeededNodeFS(req.dir, seeded), req.settings);
      return null;
    }
    case 'query': {
      // Values of the listed types stay text, as the query builder asks for timestamps and intervals.
      const parsers = Object.fromEntries(req.rawTypes.map((oid) => [oid, (v: string) => v]));
      const r = await open().query(req.text, req.params, { rowMode: req.rowMode, parsers });
      return { rows: r.rows, fields: r.fields, affectedRows: r.affectedRows };
    }
    case 'exec':
      await open().exec(req.text);
      return null;
    case 'close': {
      const d = db;
      db = null;
      if (d) await d.close();
      return null;
    }
  }
}

port.on('message', (req: ThreadRequest) => {
  serve(req).then(
    (value) => port.postMessage({ id: req.id, ok: true, value } satisfies ThreadReply),
    (e: unknown) => port.postMessage({ id: req.id, ok: false, error: errorOf(e) } satisfies ThreadReply),
  );
});
