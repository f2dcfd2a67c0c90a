/**
 * The one-list guardrail: provider names are spelled out only in src/sandbox/providers.ts; every
 * other list (API enums, validation, the boot check, the agent form) follows a name added there.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KNOWN_PROVIDERS } from '../src/sandbox/providers.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const HOME_OF_THE_LIST = 'src/sandbox/providers.ts';
const NAMES = [...KNOWN_PROVIDERS, 'fake'].join('|');

/**
 * Two provider names as adjacent literals of an array, enum or union (`'e2b', 'daytona'`,
 * `"runner" | "sprites"`), or a file offering two of them as `value="…"` choices (a select).
 */
export function literalLists(source: string): Array<{ line: number; text: string }> {
  const hits: Array<{ line: number; text: string }> = [];
  const lineOf = (i: number) => source.slice(0, i).split('\n').length;
  const adjacent = new RegExp(
    `(['"\`])(${NAMES})\\1\\s*(?:,|\\|)\\s*(?:\\/\\/[^\\n]*\\n\\s*)*(['"\`])(${NAMES})\\3`,
    'g',
  );
  for (const m of source.matchAll(adjacent))
    if (m[2] !== m[4]) hits.push({ line: lineOf(m.index), text: m[0].replace(/\s+/g, ' ') });
  const options = [...source.matchAll(new RegExp(`value=(['"])(${NAMES})\\1`, 'g'))];
  if (new Set(options.map((m) => m[2])).size >= 2)
    for (const m of options) hits.push({ line: lineOf(m.index), text: m[0] });
  return hits;
}

function files(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) files(full, out);
    else if (/\.(ts|tsx|js|mjs|sql|html)$/.test(entry) && !/\.test\.tsx?$/.test(entry)) out.push(full);
  }
  return out;
}

describe('one list of providers', () => {
  it('the scanner finds arrays, enums, unions and option lists, and passes single names', () => {
    const bad = [
      "const P = ['runner', 'e2b'];",
      'z.enum([\n  "daytona",\n  "sprites",\n])',
      "type P = 'runner' | 'sprites';",
      '<option value="e2b">E2B</option><option value="daytona">Daytona</option>',
      "['e2b', // hosted\n 'sprites']",
    ];
    for (const src of bad) assert.ok(literalLists(src).length > 0, src);
    const fine = [
      "readonly provider = 'runner' as const;",
      "if (p === 'e2b') return 1;\nif (p === 'sprites') return 2;",
      '<option value={p}>{p}</option>',
      "['runner', 'runner']",
    ];
    for (const src of fine) assert.deepEqual(literalLists(src), [], src);
  });

  it('no source file outside the registry spells out a list of provider names', () => {
    const found: string[] = [];
    const all = files(join(ROOT, 'src'));
    assert.ok(all.length > 50, 'the scan found almost no files');
    for (const file of all) {
      const rel = relative(ROOT, file);
      if (rel === HOME_OF_THE_LIST) continue;
      for (const hit of literalLists(readFileSync(file, 'utf8'))) found.push(`${rel}:${hit.line}: ${hit.text}`);
    }
    assert.deepEqual(found, [], 'derive these from KNOWN_PROVIDERS (src/sandbox/providers.ts)');
    assert.ok(
      literalLists(readFileSync(join(ROOT, HOME_OF_THE_LIST), 'utf8')).length > 0,
      'the registry list itself is not seen',
    );
  });

  it('a name added to the registry list reaches the API schemas, SANDBOX_PROVIDER validation and the boot check', async () => {
    const probe = join(ROOT, 'test/fixtures/provider-probe.ts');
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ['--import', 'tsx', probe], { cwd: ROOT, timeout: 120_000 }, (e, out, errOut) =>
        e ? reject(new Error(`${e.message}\n${errOut}`)) : resolve(out),
      ),
    );
    const r = JSON.parse(stdout) as {
      known: string[];
      agentFieldEnums: Array<{ schema: string; values: unknown[] | null }>;
      allEnums: Array<{ path: string; values: unknown[] }>;
      acceptedDefault: string;
      unknownRefusal: string | null;
      bootRefusal: string | null;
    };
    const expected = [...KNOWN_PROVIDERS, 'zzprobe'];
    assert.deepEqual(r.known, expected);
    for (const { schema, values } of r.agentFieldEnums) {
      assert.deepEqual(
        values?.filter((v) => v !== null),
        expected,
        `${schema}.sandbox_provider`,
      );
    }
    assert.ok(r.allEnums.length >= 4, 'the agent and catalog schemas carry provider enums');
    for (const { path, values } of r.allEnums)
      assert.deepEqual(
        values.filter((v) => v !== null),
        expected,
        path,
      );
    assert.equal(r.acceptedDefault, 'zzprobe');
    assert.equal(r.unknownRefusal, `SANDBOX_PROVIDER: must be one of ${expected.join(', ')}`);
    assert.match(r.bootRefusal ?? '', /^SANDBOX_PROVIDER: "zzprobe" is not enabled \(ZZPROBE_TOKEN is not set\)/);
  });
});
