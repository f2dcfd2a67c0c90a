/**
 * The embedded database's WebAssembly module, read and compiled ahead of the open: started when the
 * database's thread starts (pglite-worker.ts), so the compile overlaps the template's copy.
 */
import { readFile } from 'node:fs/promises';

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
