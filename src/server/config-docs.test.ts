import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROVIDER_CREDENTIAL_ENV } from '../sandbox/providers.ts';
import { SERVER_ENV_VARS } from './config.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');

/** Sections of docs/configuration.md that the client reads, not the server. */
const CLIENT_SECTIONS = new Set(['CLI and runner', 'Tests']);
/** Set by the OS or by the runner for its children; read but not configuration. */
const OS_VARS = new Set(['PATH', 'HOME', 'XDG_CACHE_HOME']);

/** `| \`NAME\` | …` rows, by the `##` section they sit under. */
export function documentedVars(markdown: string): Map<string, string[]> {
  const bySection = new Map<string, string[]>();
  let section = '';
  for (const line of markdown.split('\n')) {
    const h = /^## (.+)$/.exec(line);
    if (h) section = h[1]!.trim();
    const row = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/.exec(line);
    if (row) bySection.set(section, [...(bySection.get(section) ?? []), row[1]!]);
  }
  return bySection;
}

/** `NAME=` assignments in a dotenv file (comments ignored). */
export function dotenvVars(text: string): string[] {
  return text
    .split('\n')
    .map((l) => /^([A-Z][A-Z0-9_]*)=/.exec(l.trim())?.[1])
    .filter((v): v is string => v !== undefined);
}

/** Variable names a source file reads from an environment object. */
export function envReads(source: string): string[] {
  const found = new Set<string>();
  const patterns = [
    /\benv\.([A-Z][A-Z0-9_]*)\b(?!\s*=[^=])/g,
    /\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\](?!\s*=[^=])/g,
    /\bopt\(\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) found.add(m[1]!);
  return [...found];
}

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    const full = join(dir, entry);
    if (statSync(full).isDirectory()) {
      if (entry !== 'testing' && entry !== 'static') sourceFiles(full, out);
    } else if (/\.(ts|tsx|mjs|js)$/.test(entry) && !/\.test\.tsx?$/.test(entry)) out.push(full);
  }
  return out;
}

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort();

describe('configuration, docs and example files agree', () => {
  const docs = documentedVars(read('docs/configuration.md'));
  const serverDocumented = [...docs].filter(([s]) => !CLIENT_SECTIONS.has(s)).flatMap(([, vs]) => vs);
  const clientDocumented = [...docs].filter(([s]) => CLIENT_SECTIONS.has(s)).flatMap(([, vs]) => vs);

  it('docs/configuration.md documents exactly the variables the module reads', () => {
    assert.deepEqual(sorted(serverDocumented), sorted(SERVER_ENV_VARS));
    assert.equal(new Set(serverDocumented).size, serverDocumented.length, 'a variable is documented twice');
  });

  it(".env.example lists exactly the module's variables", () => {
    const vars = dotenvVars(read('.env.example'));
    assert.deepEqual(sorted(vars), sorted(SERVER_ENV_VARS));
    assert.equal(new Set(vars).size, vars.length, 'a variable is listed twice');
  });

  it(".env.compose.example lists exactly the module's variables, plus the PostgreSQL service's own", () => {
    const vars = dotenvVars(read('.env.compose.example'));
    assert.deepEqual(sorted(vars.filter((v) => !v.startsWith('POSTGRES_'))), sorted(SERVER_ENV_VARS));
    assert.equal(new Set(vars).size, vars.length, 'a variable is listed twice');
  });

  it('every provider credential is a configuration variable', () => {
    for (const v of Object.values(PROVIDER_CREDENTIAL_ENV)) assert.ok(SERVER_ENV_VARS.includes(v as never), v);
  });

  it('the code reads no variable that is neither in the module nor documented for the client', () => {
    const allowed = new Set([...SERVER_ENV_VARS, ...clientDocumented, ...OS_VARS]);
    const stray: string[] = [];
    let seen = 0;
    for (const file of sourceFiles(join(ROOT, 'src'))) {
      for (const v of envReads(readFileSync(file, 'utf8'))) {
        seen++;
        if (!allowed.has(v)) stray.push(`${relative(ROOT, file)}: ${v}`);
      }
    }
    assert.ok(seen > 10, 'the scan found almost no reads; its patterns are broken');
    assert.deepEqual(stray, []);
  });

  it('the scanner sees reads and skips writes', () => {
    const src = [
      'const a = process.env.FOO_A;',
      "const b = env['FOO_B'];",
      "opt('FOO_C')",
      'env.FOO_D = 1;',
      "env['FOO_E'] = 'x';",
      'if (env.FOO_F === undefined) {}',
    ].join('\n');
    assert.deepEqual(envReads(src).sort(), ['FOO_A', 'FOO_B', 'FOO_C', 'FOO_F']);
  });
});
