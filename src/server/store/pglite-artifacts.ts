/**
 * The embedded database's WebAssembly module, read and compiled ahead of the open (started when the
 * database's thread starts, pglite-worker.ts, so the compile overlaps the template's copy), and PGlite created with it.
 */
import { readFile } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import type { PGlite, PGliteOptions } from '@electric-sql/pglite';

/**
 * V8 tiers a WebAssembly function up to its optimizing compiler once it has run about this many bytes of
 * code (V8's default: 1.8 million). Postgres's start runs much of its code once; at the default, V8
 * optimized it on background threads for ~0.5–0.9 s of CPU during the first second, on a 2-core machine
 * CPU the start itself needed. At 100 times the default only the functions that keep running (the
 * query path) are optimized: a query loop is as fast after its warm-up (docs/benchmarks.md, startup).
 */
const WASM_TIERING_BUDGET = 180_000_000;
let tuned = false;

/**
 * Sets the tiering budget for this process (V8's flags are per process), before PGlite's WebAssembly is
 * compiled: by the preload, or by createPglite when there was none.
 */
function tuneWebAssemblyTiering(): void {
  if (tuned) return;
  tuned = true;
  setFlagsFromString(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`);
}

export interface PgliteArtifacts {
  readonly pgliteWasmModule: WebAssembly.Module;
}

let pending: Promise<PgliteArtifacts> | null = null;

async function load(): Promise<PgliteArtifacts> {
  // The files PGlite itself would read, beside its entry point.
  const dist = new URL('.', import.meta.resolve('@electric-sql/pglite'));
  // Only the Postgres module: initdb's is needed by a new data directory alone, and preloading it and
  // the file-system bundle too cost 45 MiB of idle RSS (docs/benchmarks.md, startup).
  const wasm = await readFile(new URL('pglite.wasm', dist));
  tuneWebAssemblyTiering();
  // An asynchronous compile runs on V8's background threads while the main thread loads modules.
  return { pgliteWasmModule: await WebAssembly.compile(wasm) };
}

/** Starts reading and compiling (once); a failure here only means the open loads them itself. */
export function preloadPglite(): void {
  pending ??= load();
  pending.catch(() => undefined);
}

/** What a preload produced (waiting for it if it is under way), handed over once so it can be freed; null without one. */
export async function takePreloadedPglite(): Promise<PgliteArtifacts | null> {
  const p = pending;
  pending = null;
  return p ? p.catch(() => null) : null;
}

/**
 * PGlite over `target` (a data directory, or a file system over one) with these server settings
 * (`name=value`) on its command line: the same in this thread and on the database's own.
 */
export async function createPglite(
  target: string | NonNullable<PGliteOptions['fs']>,
  settings: readonly string[],
): Promise<PGlite> {
  tuneWebAssemblyTiering();
  const [{ PGlite }, preloaded] = await Promise.all([import('@electric-sql/pglite'), takePreloadedPglite()]);
  const startParams = [...PGlite.defaultStartParams, ...settings.flatMap((s) => ['-c', s])];
  return typeof target === 'string'
    ? PGlite.create(target, { ...preloaded, startParams })
    : PGlite.create({ ...preloaded, fs: target, startParams });
}
