/**
 * The folders of src/ as a graph: one node per folder and sub-folder, an edge where a file of one
 * imports a file of another (type imports count), its cycles, and the table of layers it must follow.
 */
import { sourceImports } from './layers.ts';

/** The composition: the server's own files (start.ts, app.ts, config.ts, ...), which wire every folder under it. */
export const COMPOSITION = 'server';

/**
 * The node a file belongs to, or null outside src/: the folder of src/ it is in, or the sub-folder of
 * that folder (`server/http`, `providers/e2b`, `runner/backends`); a file directly in a folder of src/
 * is that folder's node. Every file sits where it is: no name (a store, a route) moves it elsewhere.
 */
export function nodeOf(file: string): string | null {
  const parts = file.split('/');
  if (parts[0] !== 'src' || parts.length < 2) return null;
  if (parts.length === 2) return 'src';
  return parts.length === 3 ? parts[1]! : `${parts[1]}/${parts[2]}`;
}

/**
 * The layers, bottom first. A folder imports folders of its own row or of rows below it, never above;
 * within a row, the cycle check alone holds. A sub-folder of a listed folder is on its row (`providers/e2b`
 * on `providers`'s) unless it is listed itself; a folder listed nowhere is an error, so a new one gets a place.
 */
export const LAYERS: readonly (readonly string[])[] = [
  // The contract and the wire: shared by the server, the runner and the providers.
  ['sandbox', 'wire'],
  ['acp', 'providers', 'runner'],
  // The server, bottom up: its store; what every feature uses (the key lookup, the placement port and
  // the engine's refusals in core/; the bus and node ownership in cluster/; errors, SSE, auth in http/);
  // the features; the conversation engine; what drives conversations (team); the pages; the composition.
  ['server/store'],
  ['server/core', 'server/cluster', 'server/http'],
  [
    'server/account',
    'server/credentials',
    'server/runtimes',
    'server/checkpoints',
    'server/webhooks',
    'server/gateway',
    'server/environments',
    'server/runners',
    'server/agents',
  ],
  ['server/conversations'],
  ['server/team'],
  ['server/web'],
  [COMPOSITION],
  ['cli'],
];

/** The row of a node in `LAYERS` (its own entry, else its folder's), or -1 when it has none. */
export function rowOf(node: string): number {
  const find = (name: string) => LAYERS.findIndex((row) => row.includes(name));
  const own = find(node);
  return own >= 0 || !node.includes('/') || node.startsWith('server/') ? own : find(node.split('/')[0]!);
}

/** node -> node it imports -> the imports behind the edge, `file -> target`. */
export type FolderGraph = ReadonlyMap<string, ReadonlyMap<string, readonly string[]>>;

export function folderGraph(
  root: string,
  opts: { types: boolean } = { types: true },
): Map<string, Map<string, string[]>> {
  const graph = new Map<string, Map<string, string[]>>();
  for (const { file, target, typeOnly } of sourceImports(root)) {
    if (typeOnly && !opts.types) continue;
    const a = nodeOf(file);
    const b = nodeOf(target);
    if (a === null || b === null || a === b) continue;
    const out = graph.get(a) ?? new Map<string, string[]>();
    graph.set(a, out);
    out.set(b, [...(out.get(b) ?? []), `${file} -> ${target}${typeOnly ? ' (type)' : ''}`]);
  }
  return graph;
}

/** The edges that run up the table, or from or to a folder that has no row. */
export function againstLayers(graph: FolderGraph): string[] {
  const out: string[] = [];
  for (const [a, to] of graph)
    for (const [b, files] of to) {
      const [ra, rb] = [rowOf(a), rowOf(b)];
      if (ra < 0 || rb < 0) out.push(`${ra < 0 ? a : b} has no row in LAYERS (${files[0]})`);
      else if (rb > ra) out.push(...files.map((f) => `${a} -> ${b} runs up: ${f}`));
    }
  return out;
}

/** Strongly connected components with more than one node (Tarjan): each is a set of folders that import each other around a cycle. */
export function cycles(graph: FolderGraph): string[][] {
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

/** One shortest loop through a component's first folder, as the folders it passes (the first again at the end). */
export function loopOf(graph: FolderGraph, component: readonly string[]): string[] {
  const start = component[0]!;
  const from = new Map<string, string>();
  const todo = [start];
  while (todo.length > 0) {
    const at = todo.shift()!;
    for (const next of graph.get(at)?.keys() ?? []) {
      if (!component.includes(next) || from.has(next)) continue;
      from.set(next, at);
      if (next === start) {
        const path = [start];
        for (let p = from.get(start)!; p !== start; p = from.get(p)!) path.unshift(p);
        return [start, ...path];
      }
      todo.push(next);
    }
  }
  return [];
}
