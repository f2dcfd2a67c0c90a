import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { againstLayers, COMPOSITION, cycles, folderGraph, LAYERS, loopOf, nodeOf, rowOf } from './folders.ts';
import { importsOf } from './layers.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The folders a prompt passes through on its way to the runner: the route and engine in
 * server/conversations, then placement in server/runners, then a provider (a provider never imports
 * server/, test/lint/layers.ts). Events come back through callbacks the composition wired.
 */
const PROMPT_PATH = ['server/conversations', 'server/runners', 'providers/runner'] as const;

const reachable = (graph: ReadonlyMap<string, ReadonlyMap<string, readonly string[]>>, from: string): Set<string> => {
  const seen = new Set<string>();
  const todo = [from];
  while (todo.length > 0)
    for (const next of graph.get(todo.pop()!)?.keys() ?? []) if (!seen.has(next)) todo.push(next), seen.add(next);
  return seen;
};

describe('the folders of src/ import each other without a cycle, type imports included', () => {
  const graph = folderGraph(ROOT);
  /** A cycle as its folders, one loop through them and the imports on that loop. */
  const why = (component: readonly string[]) => {
    const loop = loopOf(graph, component);
    return [
      `folders in the cycle: ${component.join(', ')}`,
      `one loop: ${loop.join(' -> ')}`,
      ...loop.slice(1).flatMap((b, i) => (graph.get(loop[i]!)?.get(b) ?? []).map((f) => `  ${loop[i]} -> ${b}: ${f}`)),
    ];
  };

  it('no two folders import each other, directly or around a longer cycle (each cycle printed with its imports)', () => {
    assert.deepEqual(cycles(graph).map(why), []);
  });

  it('every import runs down the table of layers (LAYERS in test/lint/folders.ts), and every folder has a row', () => {
    assert.deepEqual(againstLayers(graph), []);
  });

  it("a prompt's path enters each folder once: no folder on it imports one it came from", () => {
    PROMPT_PATH.forEach((folder, i) => {
      const back = PROMPT_PATH.slice(0, i).filter((earlier) => reachable(graph, folder).has(earlier));
      assert.deepEqual(back, [], `${folder} reaches back into ${back.join(', ')}`);
    });
  });

  it('what every feature uses (server/core, cluster, http) and the store reach no feature; nothing in server/ reaches the composition', () => {
    const below = new Set(['server/store', 'server/core', 'server/cluster', 'server/http']);
    for (const folder of below) {
      const features = [...reachable(graph, folder)].filter((f) => f.startsWith('server/') && !below.has(f));
      assert.deepEqual(features, [], `${folder} reaches ${features.join(', ')}`);
    }
    const into = [...graph].filter(([from, to]) => from.startsWith('server/') && to.has(COMPOSITION)).map(([f]) => f);
    assert.deepEqual(into, []);
  });

  it('the check sees a cycle, an upward import and type imports, and places files where they sit (it would hold vacuously otherwise)', () => {
    const g = new Map([
      ['a', new Map([['b', ['x']]])],
      ['b', new Map([['c', ['y']]])],
      ['c', new Map([['a', ['z']]])],
      ['d', new Map([['a', ['w']]])],
    ]);
    assert.deepEqual(cycles(g), [['a', 'b', 'c']]);
    assert.deepEqual(loopOf(g, ['a', 'b', 'c']), ['a', 'b', 'c', 'a']);
    assert.deepEqual(againstLayers(new Map([['server/store', new Map([['server/web', ['f -> t']]])]])), [
      'server/store -> server/web runs up: f -> t',
    ]);
    assert.deepEqual(againstLayers(new Map([['server/new', new Map([['server/store', ['f -> t']]])]])), [
      'server/new has no row in LAYERS (f -> t)',
    ]);
    assert.deepEqual(
      importsOf(
        "import type { A } from './a.ts';\nimport { b, type C } from '../b.ts';\nexport type { D } from './d.ts';\n" +
          "import './e.ts';\nconst f = (x: typeof import('./f.ts')) => import('./g.ts');\nimport { z } from 'zod';\n",
      ),
      [
        { spec: './a.ts', typeOnly: true },
        { spec: '../b.ts', typeOnly: false },
        { spec: './d.ts', typeOnly: true },
        { spec: './e.ts', typeOnly: false },
        { spec: './f.ts', typeOnly: false },
        { spec: './g.ts', typeOnly: false },
      ],
    );
    assert.equal(nodeOf('src/server/start.ts'), COMPOSITION);
    assert.equal(nodeOf('src/server/app.ts'), COMPOSITION);
    assert.equal(nodeOf('src/server/http/auth.ts'), 'server/http');
    assert.equal(nodeOf('src/server/agents/store.ts'), 'server/agents');
    assert.equal(nodeOf('src/server/core/keys-store.ts'), 'server/core');
    assert.equal(nodeOf('src/server/web/pages/agents.tsx'), 'server/web');
    assert.equal(nodeOf('src/runner/daemon.ts'), 'runner');
    assert.equal(nodeOf('src/providers/e2b/adapter.ts'), 'providers/e2b');
    assert.equal(nodeOf('test/lint/folders.ts'), null);
    assert.equal(rowOf('providers/e2b'), rowOf('providers'));
    assert.equal(rowOf('server/nowhere'), -1);
    assert.ok(LAYERS.flat().every((f) => rowOf(f) >= 0));
    assert.ok(graph.get('server/conversations')?.has('server/store'), 'the scan sees real imports');
    const edges = (g: ReadonlyMap<string, ReadonlyMap<string, unknown>>) =>
      [...g.values()].reduce((n, m) => n + m.size, 0);
    assert.ok(edges(graph) > edges(folderGraph(ROOT, { types: false })), 'type imports add edges of their own');
  });
});

describe('one composition root', () => {
  /** The long-lived parts: every service, the engine, the scheduler. Built anywhere else, a part would have a second owner. */
  const PART = /\bnew ([A-Z]\w*Service|ConversationEngine|Scheduler)\(/g;
  const walk = (dir: string, out: string[] = []): string[] => {
    for (const e of readdirSync(dir)) {
      const p = join(dir, e);
      if (statSync(p).isDirectory()) walk(p, out);
      else if (/\.tsx?$/.test(e) && !/\.test\.tsx?$/.test(e) && !/^(testing|test-rig|test-hub)\.ts$/.test(e))
        out.push(p);
    }
    return out;
  };

  it("only the composition (server/start.ts, which the CLI's start-up calls) builds the server's services and engine", () => {
    const elsewhere: string[] = [];
    let seen = 0;
    for (const abs of walk(join(ROOT, 'src'))) {
      const file = relative(ROOT, abs).split('\\').join('/');
      for (const m of readFileSync(abs, 'utf8').matchAll(PART)) {
        seen++;
        if (nodeOf(file) !== COMPOSITION) elsewhere.push(`${file}: new ${m[1]}`);
      }
    }
    assert.deepEqual(elsewhere, []);
    assert.ok(seen >= 4, 'the scan finds the composition building them');
  });
});
