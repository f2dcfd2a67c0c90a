/**
 * The dependency rules of DESIGN.md as data, and the scan that checks them: every relative import of
 * every non-test source file under src/, resolved to a path, tested against the `never` rules.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

export interface Rule {
  readonly name: string;
  /** Files the rule applies to (repository-relative, forward slashes). */
  readonly from: (file: string) => boolean;
  /** Import targets it forbids. */
  readonly to: (target: string) => boolean;
}

const under = (dir: string) => (p: string) => p.startsWith(dir);
const isTestSupport = (p: string) =>
  /\.test\.tsx?$/.test(p) || /\/(testing|test-rig|test-hub|fake-daemon)\.ts$/.test(p) || p.includes('/testing/');
/** The store: the schema, migrations and db handle under server/store/, and each feature's queries (store.ts, *-store.ts). */
export const isStore = (p: string) =>
  p.startsWith('src/server/store/') || /^src\/server\/[^/]+\/(store|[\w-]+-store)\.ts$/.test(p);
/** Route modules: routes.ts and *-routes.ts of every feature. */
export const isRoutes = (p: string) => /^src\/server\/[^/]+\/([\w-]+-)?routes\.ts$/.test(p);

export const RULES: readonly Rule[] = [
  {
    name: 'sandbox/ imports nothing above it',
    from: under('src/sandbox/'),
    to: (t) => t.startsWith('src/') && !t.startsWith('src/sandbox/'),
  },
  {
    name: 'wire/ imports nothing above it',
    from: under('src/wire/'),
    to: (t) => t.startsWith('src/') && !t.startsWith('src/wire/'),
  },
  { name: 'runner/ never imports server/', from: under('src/runner/'), to: under('src/server/') },
  { name: 'a provider never imports server/', from: under('src/providers/'), to: under('src/server/') },
  { name: 'web pages never touch the store', from: under('src/server/web/'), to: isStore },
  { name: 'routes never touch the store', from: isRoutes, to: isStore },
  { name: 'the engine never names a provider', from: under('src/server/conversations/'), to: under('src/providers/') },
];

function walk(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.tsx?$/.test(e)) out.push(p);
  }
  return out;
}

export interface Violation {
  readonly rule: string;
  readonly file: string;
  readonly target: string;
}

export interface Import {
  readonly file: string;
  readonly target: string;
  /** `import type` / `export type`: it touches nothing at run time. */
  readonly typeOnly: boolean;
}

/**
 * The relative module specifiers a source text imports: static imports and re-exports (`type` ones
 * marked), side-effect imports, and `import('…')`, whether called or used in a type.
 */
export function importsOf(text: string): { spec: string; typeOnly: boolean }[] {
  const out: { spec: string; typeOnly: boolean }[] = [];
  for (const m of text.matchAll(
    /^(?:import|export)\s+(type\s)?[^;]*?from\s+'(\.{1,2}\/[^']+)'|^import\s+'(\.{1,2}\/[^']+)'|import\(\s*'(\.{1,2}\/[^']+)'\s*\)/gms,
  ))
    out.push({ spec: (m[2] ?? m[3] ?? m[4])!, typeOnly: m[1] !== undefined });
  return out;
}

/**
 * Every relative import of every non-test source file under src/ (repository-relative paths), type
 * imports included and marked. Test files and test support are left out: they may reach anywhere.
 */
export function sourceImports(root: string): Import[] {
  const out: Import[] = [];
  for (const abs of walk(join(root, 'src'))) {
    const file = relative(root, abs).split('\\').join('/');
    if (isTestSupport(file)) continue;
    for (const { spec, typeOnly } of importsOf(readFileSync(abs, 'utf8'))) {
      const target = relative(root, resolve(dirname(abs), spec))
        .split('\\')
        .join('/')
        .replace(/\.js$/, '.ts');
      out.push({ file, target, typeOnly });
    }
  }
  return out;
}

/** The imports that exist at run time: a type-only import touches nothing there, so the `never` rules leave it out. */
export const valueImports = (root: string): Import[] => sourceImports(root).filter((i) => !i.typeOnly);

/** Every value import that breaks a rule. */
export function violations(root: string): Violation[] {
  const out: Violation[] = [];
  for (const { file, target } of valueImports(root)) {
    for (const rule of RULES) if (rule.from(file) && rule.to(target)) out.push({ rule: rule.name, file, target });
  }
  return out;
}
