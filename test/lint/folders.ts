/**
 * The folders of src/server as a graph: one node per feature folder, an edge where a file of one
 * imports (a value of) a file of another, and the strongly connected components of that graph.
 */
import { isStore, valueImports } from './layers.ts';

/**
 * The composition: the server's start-up files (src/server/*.ts) and the app that mounts every
 * feature's routes (http/app.ts). They wire every folder, so they are a node of their own that no
 * folder may import (an import of one would show as a cycle).
 */
export const COMPOSITION = '(composition)';

/**
 * The node a file belongs to, or null outside src/server. Each feature's store queries (store.ts,
 * *-store.ts) belong to the store with the schema: the store is the bottom layer every feature reads.
 */
export function nodeOf(file: string): string | null {
  if (!file.startsWith('src/server/')) return null;
  if (file === 'src/server/http/app.ts' || /^src\/server\/[^/]+\.tsx?$/.test(file)) return COMPOSITION;
  if (isStore(file)) return 'store';
  return file.split('/')[2]!;
}

export interface Edge {
  readonly from: string;
  readonly to: string;
  /** The imports behind the edge, `file -> target`. */
  readonly because: readonly string[];
}

export function folderGraph(root: string): Map<string, Map<string, string[]>> {
  const graph = new Map<string, Map<string, string[]>>();
  for (const { file, target } of valueImports(root)) {
    const a = nodeOf(file);
    const b = nodeOf(target.replace(/\.js$/, '.ts'));
    if (a === null || b === null || a === b) continue;
    const out = graph.get(a) ?? new Map<string, string[]>();
    graph.set(a, out);
    out.set(b, [...(out.get(b) ?? []), `${file} -> ${target}`]);
  }
  return graph;
}

/** Strongly connected components with more than one node (Tarjan): each is a set of folders that import each other around a cycle. */
export function cycles(graph: ReadonlyMap<string, ReadonlyMap<string, readonly string[]>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const nodes = new Set<string>([...graph.keys(), ...[...graph.values()].flatMap((m) => [...m.keys()])]);
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) out.push(component.sort());
    }
  };
  for (const v of [...nodes].sort()) if (!index.has(v)) visit(v);
  return out;
}
