import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { DOCS_DIR, docsRoutes, loadDocs, rewriteDocsLink } from './docs.tsx';
import { markdownFilesUnder, navPages, parseNav, NavError } from './nav.ts';

const site = await loadDocs();
const app = docsRoutes(
  async () => site,
  async () => null,
);

describe('docs/nav.yml and the pages on disk', () => {
  it('names every Markdown page under docs/, and every page it names exists', () => {
    const named = navPages(site.nav)
      .map((p) => p.file)
      .sort();
    const onDisk = markdownFilesUnder(DOCS_DIR);
    assert.deepEqual(
      onDisk.filter((f) => !named.includes(f)),
      [],
      'pages on disk missing from docs/nav.yml',
    );
    assert.deepEqual(
      named.filter((f) => !existsSync(join(DOCS_DIR, f))),
      [],
      'nav entries without a page',
    );
    assert.ok(named.includes('integrations/daytona.md') && named.includes('integrations/sprites.md'));
  });

  it('has every internal /docs link and #anchor resolving to a rendered heading', () => {
    const broken: string[] = [];
    for (const [slug, doc] of site.pages) {
      for (const link of doc.links) {
        let target: string;
        let anchor: string | undefined;
        if (link.startsWith('#')) [target, anchor] = [slug, link.slice(1)];
        else if (link === '/docs' || link.startsWith('/docs/') || link.startsWith('/docs#')) {
          const [path, hash] = link.split('#', 2) as [string, string | undefined];
          target = path.replace(/^\/docs\/?/, '');
          anchor = hash;
        } else continue;
        const page = site.pages.get(target);
        if (!page) broken.push(`${slug || 'home'}: ${link} (no such page)`);
        else if (anchor && !page.headingIds.includes(anchor))
          broken.push(`${slug || 'home'}: ${link} (no such heading)`);
      }
    }
    assert.deepEqual(broken, []);
  });

  it('keeps MkDocs-only syntax out of the pages', () => {
    for (const doc of site.pages.values()) assert.ok(!/!!!|\{%|^\?\?\?/m.test(doc.html), doc.page.file);
  });
});

describe('nav.yml grammar', () => {
  it('reads pages, sections and index slugs', () => {
    const nav = parseNav(
      'nav:\n  - Home: index.md\n  - Guides:\n      - One: guides/one.md\n      - Two: guides/index.md\n',
    );
    assert.deepEqual(
      navPages(nav).map((p) => [p.slug, p.section]),
      [
        ['', null],
        ['guides/one', 'Guides'],
        ['guides', 'Guides'],
      ],
    );
  });

  it('fails on unreadable lines, nested sections, orphans, bad paths and a missing nav block', () => {
    assert.throws(() => parseNav('  - Home: index.md\n'), NavError);
    assert.throws(() => parseNav('nav:\n  - Home index.md\n'), /unreadable/);
    assert.throws(() => parseNav('nav:\n  - A:\n      - B:\n          - C: c.md\n'), /one level/);
    assert.throws(() => parseNav('nav:\n  - A: [\n'), NavError);
    assert.throws(() => parseNav('nav:\n  - X: ../../etc/passwd.md\n'), /plain lower-case path/);
    assert.throws(() => parseNav('nav:\n  - Empty:\n'), /no pages/);
  });
});

describe('GET /docs', () => {
  it('serves named pages with the nav as a sidebar', async () => {
    const res = await app.request('/docs/runners');
    assert.equal(res.status, 200);
    const body = await res.text();
    assert.match(body, /<h1 id="self-hosted-runners">Self-hosted runners<\/h1>/);
    assert.match(body, /<nav aria-label="Documentation">/);
    assert.match(body, /href="\/docs\/integrations\/daytona"/);
    assert.match(body, /<a href="\/docs\/runners" aria-current="page">/);
    assert.equal((await app.request('/docs')).status, 200);
    assert.equal((await app.request('/docs/integrations/sprites')).status, 200);
  });

  it('answers 404 for every slug the nav does not name', async () => {
    for (const slug of [
      'nope',
      'integrations/index',
      'integrations',
      '../../etc/passwd',
      '..%2F..%2Fetc%2Fpasswd',
      'index',
      'runners.md',
    ]) {
      const res = await app.request(`/docs/${slug}`);
      assert.equal(res.status, 404, slug);
      // A dot-dot path is normalised away from /docs before routing; it still must not serve a file.
      if (!slug.startsWith('..')) assert.match(await res.text(), /Page not found/);
    }
  });

  it('rewrites page-relative links to served URLs', () => {
    assert.equal(rewriteDocsLink('integrations/daytona.md', '../runners.md#backends'), '/docs/runners#backends');
    assert.equal(rewriteDocsLink('getting-started.md', 'index.md'), '/docs');
    assert.equal(rewriteDocsLink('a.md', 'https://x.y/z.md'), 'https://x.y/z.md');
    assert.equal(rewriteDocsLink('a.md', '/api/openapi.json'), '/api/openapi.json');
  });
});
