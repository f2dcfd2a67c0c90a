/**
 * docs/nav.yml: the one list of documentation pages, in the two-line-shape grammar of
 * platform-api.md §17. Only files the nav names become pages; anything the parser can't read is an error.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

export interface NavPage {
  readonly title: string;
  /** Path under docs/, forward slashes. */
  readonly file: string;
  /** URL slug: the file without `.md`; `index.md` becomes its directory (home = ""). */
  readonly slug: string;
  readonly section: string | null;
}

export interface NavEntry {
  readonly title: string;
  /** A page, or a section holding pages. */
  readonly page?: NavPage;
  readonly children?: readonly NavPage[];
}

export class NavError extends Error {
  constructor(line: number, detail: string) {
    super(`docs/nav.yml line ${line}: ${detail}`);
    this.name = 'NavError';
  }
}

const TOP_PAGE = /^ {2}- ([^:]+?):\s+(\S+\.md)\s*$/;
const TOP_SECTION = /^ {2}- ([^:]+?):\s*$/;
const CHILD_PAGE = /^ {6}- ([^:]+?):\s+(\S+\.md)\s*$/;
const SAFE_FILE = /^[a-z0-9][a-z0-9_-]*(\/[a-z0-9][a-z0-9_-]*)*\.md$/;

export function slugFor(file: string): string {
  const noExt = file.replace(/\.md$/, '');
  if (noExt === 'index') return '';
  return noExt.endsWith('/index') ? noExt.slice(0, -'/index'.length) : noExt;
}

export function parseNav(text: string): NavEntry[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  const entries: Array<{ title: string; page?: NavPage; children?: NavPage[] }> = [];
  let sawNav = false;
  let section: { title: string; children: NavPage[] } | null = null;
  const page = (n: number, title: string, file: string, sec: string | null): NavPage => {
    if (!SAFE_FILE.test(file)) throw new NavError(n, `file ${JSON.stringify(file)} is not a plain lower-case path ending in .md`);
    return { title: title.trim(), file, slug: slugFor(file), section: sec };
  };
  lines.forEach((line, idx) => {
    const n = idx + 1;
    if (line.trim() === '' || line.trimStart().startsWith('#')) return;
    if (!sawNav) {
      if (line === 'nav:') {
        sawNav = true;
        return;
      }
      throw new NavError(n, 'expected the "nav:" block first');
    }
    let m: RegExpExecArray | null;
    if ((m = TOP_PAGE.exec(line))) {
      section = null;
      entries.push({ title: m[1]!.trim(), page: page(n, m[1]!, m[2]!, null) });
    } else if ((m = TOP_SECTION.exec(line))) {
      section = { title: m[1]!.trim(), children: [] };
      entries.push({ title: section.title, children: section.children });
    } else if ((m = CHILD_PAGE.exec(line))) {
      if (!section) throw new NavError(n, 'a child page without a section above it');
      section.children.push(page(n, m[1]!, m[2]!, section.title));
    } else if (/^ {6}- [^:]+:\s*$/.test(line) || /^ {10}-/.test(line)) {
      throw new NavError(n, 'sections nest one level deep only');
    } else {
      throw new NavError(n, `unreadable line ${JSON.stringify(line)}`);
    }
  });
  if (!sawNav) throw new NavError(1, 'missing "nav:" block');
  for (const e of entries) if (e.children && e.children.length === 0) throw new NavError(1, `section ${JSON.stringify(e.title)} has no pages`);
  return entries;
}

export const navPages = (entries: readonly NavEntry[]): NavPage[] => entries.flatMap((e) => (e.page ? [e.page] : [...(e.children ?? [])]));

/** Every Markdown file under the docs directory, as docs-relative paths with forward slashes. */
export function markdownFilesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      if (name.startsWith('.')) continue;
      const full = join(d, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith('.md')) out.push(relative(dir, full).split(sep).join('/'));
    }
  };
  if (existsSync(dir)) walk(dir);
  return out.sort();
}

export const readNav = (docsDir: string): NavEntry[] => parseNav(readFileSync(join(docsDir, 'nav.yml'), 'utf8'));
