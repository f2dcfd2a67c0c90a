import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Past this many lines a source file of src/ says at its top why it is one file. */
export const MAX_LINES = 400;

/** The reason, in the file's leading comment: "Over 400 lines on purpose: …" or "Over 400 lines because …". */
const REASON = /Over 400 lines (on purpose|because)\b/;

/** The comment block(s) before the first statement: where a reader looks first. */
export function leadingComment(text: string): string {
  const m = /^(?:\s*(?:\/\*[\s\S]*?\*\/|\/\/[^\n]*\n))*/.exec(text);
  return m?.[0] ?? '';
}

function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (/\.tsx?$/.test(e) && !/\.test\.tsx?$/.test(e)) out.push(p);
  }
  return out;
}

describe('no file in src/ over ~400 lines without a reason written at its top', () => {
  it('every long source file gives its reason in its leading comment', () => {
    const long = sources(join(ROOT, 'src'))
      .map((abs) => ({ file: relative(ROOT, abs).split('\\').join('/'), text: readFileSync(abs, 'utf8') }))
      .filter(({ text }) => text.split('\n').length > MAX_LINES && !REASON.test(leadingComment(text)))
      .map(({ file, text }) => `${file}: ${text.split('\n').length} lines`);
    assert.deepEqual(long, []);
  });

  it('reads the reason only at the top (a reason further down would not be found by a reader)', () => {
    assert.ok(
      REASON.test(
        leadingComment('/**\n * A module.\n *\n * Over 400 lines on purpose: one state.\n */\nimport x from "y";\n'),
      ),
    );
    assert.ok(!REASON.test(leadingComment('import x from "y";\n// Over 400 lines because reasons\n')));
    assert.ok(REASON.test(leadingComment('// Over 400 lines because it is a table.\nexport const t = 1;\n')));
  });
});
