import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { COMPOSITION, cycles, folderGraph, nodeOf } from './folders.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The folders a prompt passes through on its way to the runner: the route and engine in
 * conversations/, then placement in runners/, then a provider (outside src/server; a provider never
 * imports server/, test/lint/layers.ts). Events come back through callbacks the composition wired.
 */
const PROMPT_PATH = ['conversations', 'runners'] as const;

const reachable = (graph: ReadonlyMap<string, ReadonlyMap<string, readonly string[]>>, from: string): Set<string> => {
  const seen = new Set<string>();
  const todo = [from];
  while (todo.length > 0)
    for (const next of graph.get(todo.pop()!)?.keys() ?? []) if (!seen.has(next)) todo.push(next), seen.add(next);
  return seen;
};

describe('the folders of src/server import each other without a cycle', () => {
  const graph = folderGraph(ROOT);
  const why = (component: readonly string[]) =>
    component.flatMap((a) =>
      [...(graph.get(a) ?? [])]
        .filter(([b]) => component.includes(b))
        .flatMap(([b, files]) => files.map((f) => `${a} -> ${b}: ${f}`)),
    );

  it('no two folders import each other, directly or around a longer cycle', () => {
    assert.deepEqual(cycles(graph).map(why), []);
  });

  it("a prompt's path enters each folder once: no folder on it imports one it came from", () => {
    PROMPT_PATH.forEach((folder, i) => {
      const back = PROMPT_PATH.slice(0, i).filter((earlier) => reachable(graph, folder).has(earlier));
      assert.deepEqual(back, [], `${folder} reaches back into ${back.join(', ')}`);
    });
  });

  it('http/ (auth, errors, the SSE helper) and the store reach no feature; nothing reaches the composition', () => {
    assert.deepEqual([...reachable(graph, 'http')], ['store']);
    assert.deepEqual([...reachable(graph, 'store')], []);
    const into = [...graph].filter(([, to]) => to.has(COMPOSITION)).map(([from]) => from);
    assert.deepEqual(into, []);
  });

  it('the check sees a cycle and places files in their nodes (it would hold vacuously otherwise)', () => {
    const g = new Map([
      ['a', new Map([['b', ['x']]])],
      ['b', new Map([['c', ['y']]])],
      ['c', new Map([['a', ['z']]])],
      ['d', new Map([['a', ['w']]])],
    ]);
    assert.deepEqual(cycles(g), [['a', 'b', 'c']]);
    assert.equal(nodeOf('src/server/start.ts'), COMPOSITION);
    assert.equal(nodeOf('src/server/http/app.ts'), COMPOSITION);
    assert.equal(nodeOf('src/server/http/auth.ts'), 'http');
    assert.equal(nodeOf('src/server/agents/store.ts'), 'store');
    assert.equal(nodeOf('src/server/account/keys-store.ts'), 'store');
    assert.equal(nodeOf('src/server/web/pages/agents.tsx'), 'web');
    assert.equal(nodeOf('src/runner/daemon.ts'), null);
    assert.ok(graph.get('conversations')?.has('store'), 'the scan sees real imports');
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
