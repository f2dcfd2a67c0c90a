/**
 * The documentation site: the pages docs/nav.yml names, rendered once, on the first request for one
 * (not at start-up), with the nav as a sidebar. Any slug the nav does not name is a 404, whatever exists on disk.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join, posix } from 'node:path';
import { Hono } from 'hono';
import { raw } from 'hono/html';
import { Layout, STATIC_PREFIX } from './layout.tsx';
import { navPages, readNav, type NavEntry, type NavPage } from './nav.ts';

export const DOCS_DIR = fileURLToPath(new URL('../../../docs/', import.meta.url));

export interface DocsPage {
  readonly page: NavPage;
  readonly title: string;
  readonly html: string;
  readonly headingIds: readonly string[];
  readonly links: readonly string[];
  /** The page draws diagrams: Mermaid's script is loaded on it (and on no other page). */
  readonly diagrams: boolean;
}

export interface DocsSite {
  readonly nav: readonly NavEntry[];
  /** By slug ("" = home). */
  readonly pages: ReadonlyMap<string, DocsPage>;
}

export const docsHref = (slug: string): string => (slug === '' ? '/docs' : `/docs/${slug}`);

/** Rewrites a page-relative `x.md#y` link to its served URL; other links pass through. */
export function rewriteDocsLink(fromFile: string, href: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('/') || href.startsWith('#')) return href;
  const [path, hash] = href.split('#', 2) as [string, string | undefined];
  if (!path.endsWith('.md')) return href;
  const target = posix.normalize(posix.join(posix.dirname(fromFile), path));
  const noExt = target.replace(/\.md$/, '');
  const slug = noExt === 'index' ? '' : noExt.replace(/\/index$/, '');
  return `${docsHref(slug)}${hash ? `#${hash}` : ''}`;
}

export async function loadDocs(dir = DOCS_DIR): Promise<DocsSite> {
  // markdown-it and highlight.js load with the first page that needs them, not at start-up (docs/benchmarks.md).
  const { renderMarkdown } = await import('./markdown.ts');
  const nav = readNav(dir);
  const pages = new Map<string, DocsPage>();
  for (const page of navPages(nav)) {
    const src = readFileSync(join(dir, page.file), 'utf8');
    const r = renderMarkdown(src, { link: (href) => rewriteDocsLink(page.file, href) });
    pages.set(page.slug, {
      page,
      title: r.title ?? page.title,
      html: r.html,
      headingIds: r.headingIds,
      links: r.links,
      diagrams: r.diagrams,
    });
  }
  return { nav, pages };
}

function Sidebar(p: { nav: readonly NavEntry[]; current: string }) {
  const item = (pg: NavPage) => (
    <li>
      <a href={docsHref(pg.slug)} aria-current={pg.slug === p.current ? 'page' : undefined}>
        {pg.title}
      </a>
    </li>
  );
  return (
    <nav aria-label="Documentation">
      <ul>
        {p.nav.map((e) =>
          e.page ? (
            item(e.page)
          ) : (
            <li>
              <strong>{e.title}</strong>
              <ul>{(e.children ?? []).map(item)}</ul>
            </li>
          ),
        )}
      </ul>
    </nav>
  );
}

/** `/docs` and `/docs/<slug>`; `user` lets the header show the signed-in links. */
export function docsRoutes(
  docs: () => Promise<DocsSite>,
  user: (c: import('hono').Context) => Promise<{ name: string } | null>,
): Hono {
  const app = new Hono();
  let loaded: Promise<DocsSite> | undefined;
  const serve = async (c: import('hono').Context, slug: string) => {
    // A failed render is not kept: the next request tries again.
    const site = await (loaded ??= docs().catch((e: unknown) => {
      loaded = undefined;
      throw e;
    }));
    const doc = site.pages.get(slug);
    const u = await user(c);
    if (!doc) {
      return c.html(
        <Layout title="Not found" section="docs" user={u}>
          <div class="docs">
            <Sidebar nav={site.nav} current="" />
            <article>
              <h1>Page not found</h1>
              <p>There is no documentation page at this address. The list on the left has every page.</p>
            </article>
          </div>
        </Layout>,
        404,
      );
    }
    return c.html(
      <Layout title={doc.title} section="docs" user={u}>
        <div class="docs">
          <Sidebar nav={site.nav} current={slug} />
          <article>{raw(doc.html)}</article>
        </div>
        {/* Mermaid draws every <pre class="mermaid"> once the page has loaded (its startOnLoad default). */}
        {doc.diagrams ? <script src={`${STATIC_PREFIX}/mermaid.min.js`} defer></script> : null}
      </Layout>,
    );
  };
  app.get('/docs', (c) => serve(c, ''));
  app.get('/docs/', (c) => serve(c, ''));
  app.get('/docs/*', (c) => {
    const slug = decodeURIComponent(c.req.path.slice('/docs/'.length)).replace(/\/+$/, '');
    return serve(c, slug);
  });
  return app;
}
