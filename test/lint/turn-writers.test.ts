import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * A turn changes only through its state machine: outside src/server/conversations/turn/ (the machine,
 * its driver and the end it records) no code assigns a field of an ActiveTurn or a Live's `turn`, arms
 * or disarms a turn's timer, or writes a turn row's status. Found by type, not by name, so a field
 * reached through any variable counts.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TURN_DIR = 'src/server/conversations/turn/';
/** The store's own functions that write a turn row's status or its end. */
const STATUS_WRITERS = new Set(['endTurnRows', 'endTurnRowsWithEvent', 'setTurnPromptId']);

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.tsx?$/.test(e) && !/\.test\.tsx?$/.test(e)) out.push(p);
  }
  return out;
}

const rel = (f: string) => relative(ROOT, f).split('\\').join('/');

/** Every place in src/server that changes a turn directly (`file:line: what`), the turn folder's included. */
export function turnWriters(): string[] {
  const files = sources(join(ROOT, 'src/server'));
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    allowImportingTsExtensions: true,
    noEmit: true,
    strict: true,
    skipLibCheck: true,
    jsx: ts.JsxEmit.ReactJSX,
    jsxImportSource: 'hono/jsx',
  });
  const checker = program.getTypeChecker();
  /** The interface or class a property is declared in, with the file it sits in. */
  const owner = (node: ts.Node): { name: string; file: string } | null => {
    const sym = checker.getSymbolAtLocation(node);
    const decl = sym?.declarations?.[0];
    const parent = decl?.parent;
    if (!parent || !(ts.isInterfaceDeclaration(parent) || ts.isClassDeclaration(parent)) || !parent.name) return null;
    return { name: parent.name.text, file: rel(parent.getSourceFile().fileName) };
  };
  const isTurnField = (target: ts.Expression): string | null => {
    if (!ts.isPropertyAccessExpression(target)) return null;
    const o = owner(target.name);
    if (!o || o.file !== 'src/server/conversations/live.ts') return null;
    if (o.name === 'ActiveTurn') return `ActiveTurn.${target.name.text}`;
    if (o.name === 'Live' && target.name.text === 'turn') return 'Live.turn';
    return null;
  };
  const found: string[] = [];
  for (const sf of program.getSourceFiles()) {
    const file = rel(sf.fileName);
    if (!file.startsWith('src/server/')) continue;
    const at = (n: ts.Node, what: string) =>
      found.push(`${file}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}: ${what}`);
    const visit = (n: ts.Node): void => {
      if (
        ts.isBinaryExpression(n) &&
        n.operatorToken.kind >= ts.SyntaxKind.FirstAssignment &&
        n.operatorToken.kind <= ts.SyntaxKind.LastAssignment
      ) {
        const f = isTurnField(n.left);
        if (f) at(n, `assigns ${f}`);
      }
      if (
        (ts.isPrefixUnaryExpression(n) || ts.isPostfixUnaryExpression(n)) &&
        (n.operator === ts.SyntaxKind.PlusPlusToken || n.operator === ts.SyntaxKind.MinusMinusToken)
      ) {
        const f = isTurnField(n.operand);
        if (f) at(n, `assigns ${f}`);
      }
      if (ts.isDeleteExpression(n)) {
        const f = isTurnField(n.expression);
        if (f) at(n, `deletes ${f}`);
      }
      if (ts.isCallExpression(n)) {
        const callee = n.expression;
        if (ts.isPropertyAccessExpression(callee)) {
          const o = owner(callee.name);
          if (o?.name === 'TurnTimers') at(n, `calls TurnTimers.${callee.name.text}`);
        }
        const name = ts.isIdentifier(callee) ? callee.text : null;
        if (name && STATUS_WRITERS.has(name)) at(n, `calls ${name}`);
        const patch = n.arguments[2];
        if (
          name === 'updateTurn' &&
          patch &&
          ts.isObjectLiteralExpression(patch) &&
          patch.properties.some((p) => p.name && ts.isIdentifier(p.name) && p.name.text === 'status')
        )
          at(n, "writes a turn row's status with updateTurn");
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return found;
}

describe("a turn's state has one writer: its state machine", () => {
  const found = turnWriters();

  it('no code outside src/server/conversations/turn/ changes a turn, its timers or its row status', () => {
    assert.deepEqual(
      found.filter((f) => !f.startsWith(TURN_DIR)),
      [],
    );
  });

  it('the scan finds the writers inside the turn folder (it is not blind to them)', () => {
    const inside = found.filter((f) => f.startsWith(TURN_DIR)).map((f) => f.replace(/:\d+:/, ':'));
    for (const want of [
      `${TURN_DIR}driver.ts: assigns ActiveTurn.state`,
      `${TURN_DIR}driver.ts: assigns ActiveTurn.driver`,
      `${TURN_DIR}driver.ts: assigns Live.turn`,
      `${TURN_DIR}driver.ts: calls TurnTimers.arm`,
      `${TURN_DIR}driver.ts: calls TurnTimers.disarm`,
      `${TURN_DIR}driver.ts: calls setTurnPromptId`,
      `${TURN_DIR}end.ts: assigns Live.turn`,
      `${TURN_DIR}end.ts: calls endTurnRowsWithEvent`,
    ])
      assert.ok(inside.includes(want), `${want} in ${JSON.stringify(inside)}`);
  });
});
