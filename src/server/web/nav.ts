/**
 * docs/nav.yml: the one list of documentation pages (MkDocs' `nav:` shape, read with the `yaml` package).
 * Only files the nav names become pages; anything the nav cannot mean is an error naming the entry.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';

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
  constructor(detail: string) {
    super(`docs/nav.yml: ${detail}`);
    this.name = 'NavError';
  }
}

const SAFE_FILE = /^[a-z0-9][a-z0-9_-]*(\/[a-z0-9][a-z0-9_-]*)*\.md$/;

export function slugFor(file: string): string {
  const noExt = file.replace(/\.md$/, '');
  if (noExt === 'index') return '';
  return noExt.endsWith('/index') ? noExt.slice(0, -'/index'.length) : noExt;
}

/** `- Title: file.md` or `- Section: [ - Title: file.md ]`: each entry one key. */
const oneKey = z.record(z.string(), z.unknown()).refine((o) => Object.keys(o).length === 1);
const navFile = z.object({ nav: z.array(z.unknown()) });

export function parseNav(text: string): NavEntry[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw new NavError((e as Error).message);
  }
  const top = navFile.safeParse(doc);
  if (!top.success) throw new NavError('expected a "nav:" list first');
  const entryOf = (item: unknown): [string, unknown] => {
    const m = oneKey.safeParse(item);
    if (!m.success)
      throw new NavError(`unreadable entry ${JSON.stringify(item)}: each is "- Title: file.md" or a section of those`);
    return Object.entries(m.data)[0]!;
  };
  const page = (title: string, file: string, section: string | null): NavPage => {
    if (!SAFE_FILE.test(file))
      throw new NavError(`file ${JSON.stringify(file)} is not a plain lower-case path ending in .md`);
    return { title: title.trim(), file, slug: slugFor(file), section };
  };
  return top.data.nav.map((item): NavEntry => {
    const [title, value] = entryOf(item);
    if (typeof value === 'string') return { title: title.trim(), page: page(title, value, null) };
    if (value === null || (Array.isArray(value) && value.length === 0))
      throw new NavError(`section ${JSON.stringify(title)} has no pages`);
    if (!Array.isArray(value)) throw new NavError(`unreadable entry ${JSON.stringify(title)}`);
    const children = value.map((child) => {
      const [t, f] = entryOf(child);
      if (typeof f !== 'string')
        throw new NavError(`${JSON.stringify(t)} in ${JSON.stringify(title)}: sections nest one level deep only`);
      return page(t, f, title.trim());
    });
    return { title: title.trim(), children };
  });
}

export const navPages = (entries: readonly NavEntry[]): NavPage[] =>
  entries.flatMap((e) => (e.page ? [e.page] : [...(e.children ?? [])]));

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
