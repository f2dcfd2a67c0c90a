/**
 * The embedded database's WebAssembly modules and file-system bundle, read and compiled ahead of the
 * open: started by `fountain server`/`up` before the server's modules load, so the two overlap.
 */
import { readFile } from 'node:fs/promises';

export interface PgliteArtifacts {
  readonly pgliteWasmModule: WebAssembly.Module;
  readonly initdbWasmModule: WebAssembly.Module;
  readonly fsBundle: Blob;
}

let pending: Promise<PgliteArtifacts> | null = null;

async function load(): Promise<PgliteArtifacts> {
  // The files PGlite itself would read, beside its entry point.
  const dist = new URL('.', import.meta.resolve('@electric-sql/pglite'));
  const [wasm, initdb, data] = await Promise.all(['pglite.wasm', 'initdb.wasm', 'pglite.data'].map((f) => readFile(new URL(f, dist))));
  // Asynchronous compiles run on V8's background threads while the main thread loads modules.
  const [pgliteWasmModule, initdbWasmModule] = await Promise.all([WebAssembly.compile(wasm!), WebAssembly.compile(initdb!)]);
  return { pgliteWasmModule, initdbWasmModule, fsBundle: new Blob([data!]) };
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
