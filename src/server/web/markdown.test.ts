import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderMarkdown, slugify } from './markdown.ts';

const html = (src: string) => renderMarkdown(src).html;

describe('markdown renderer', () => {
  it('escapes raw HTML everywhere instead of passing it through', () => {
    const out = html('# Hi <script>alert(1)</script>\n\nA <img src=x onerror=alert(1)> & "q"\n\n`<b>`\n\n```\n<div>\n```');
    assert.ok(!/<script|<img|<div>|<b>/.test(out), out);
    assert.match(out, /&lt;script&gt;/);
    assert.match(out, /&lt;img src=x onerror=alert\(1\)&gt; &amp; &quot;q&quot;/);
    assert.match(out, /<code>&lt;b&gt;<\/code>/);
    assert.match(out, /<pre><code>&lt;div&gt;<\/code><\/pre>/);
  });

  it('drops hrefs with unsafe schemes and escapes link targets', () => {
    assert.equal(html('[x](javascript:alert(1))'), '<p>x</p>\n');
    assert.equal(html('[x](data:text/html,hi)'), '<p>x</p>\n');
    assert.ok(!html('[a](https://e.x/?b="2")').includes('b="2"'));
    assert.equal(html('[a](https://e.x/?a=1&b=2)'), '<p><a href="https://e.x/?a=1&amp;b=2">a</a></p>\n');
  });

  it('gives headings unique GitHub-style ids and reports the title', () => {
    const r = renderMarkdown('# The Title\n\n## How it works\n\n## How it works\n\n### `suspend` / resume');
    assert.deepEqual(r.headingIds, ['the-title', 'how-it-works', 'how-it-works-1', 'suspend--resume']);
    assert.equal(r.title, 'The Title');
    assert.match(r.html, /<h3 id="suspend--resume"><code>suspend<\/code> \/ resume<\/h3>/);
    assert.equal(slugify('Self-hosted runners: trusted mode'), 'self-hosted-runners-trusted-mode');
  });

  it('renders emphasis, inline code and leaves snake_case alone', () => {
    assert.equal(html('**bold** and *it* and _it_ in snake_case_name `a*b*c`'), '<p><strong>bold</strong> and <em>it</em> and <em>it</em> in snake_case_name <code>a*b*c</code></p>\n');
  });

  it('renders GFM tables with inline markup, escaped pipes and alignment', () => {
    const out = html('| a | b |\n|---|:-:|\n| `x \\| y` | **z** |\n| only |');
    assert.match(out, /<th>a<\/th><th style="text-align:center">b<\/th>/);
    assert.match(out, /<td><code>x \| y<\/code><\/td><td style="text-align:center"><strong>z<\/strong><\/td>/);
    assert.match(out, /<td>only<\/td><td style="text-align:center"><\/td>/);
  });

  it('renders tight, loose, ordered and nested lists with continuation lines', () => {
    assert.equal(html('- one\n- two\n  more'), '<ul>\n<li>one</li>\n<li>two\nmore</li>\n</ul>\n');
    assert.equal(html('3. a\n4. b'), '<ol start="3">\n<li>a</li>\n<li>b</li>\n</ol>\n');
    const nested = html('- top\n  - inner\n- next');
    assert.equal(nested, '<ul>\n<li><p>top</p>\n<ul>\n<li>inner</li>\n</ul>\n</li>\n<li>next</li>\n</ul>\n');
    assert.equal(html('- a\n\n- b'), '<ul>\n<li><p>a</p>\n</li>\n<li><p>b</p>\n</li>\n</ul>\n');
  });

  it('renders fenced code with a language, quotes and rules', () => {
    assert.equal(html('```sh\nnpm test\n```'), '<pre><code class="language-sh">npm test</code></pre>\n');
    assert.equal(html('> quoted *text*'), '<blockquote>\n<p>quoted <em>text</em></p>\n</blockquote>\n');
    assert.equal(html('a\n\n---\n\nb'), '<p>a</p>\n<hr>\n<p>b</p>\n');
  });

  it('passes link targets through the rewrite hook and collects them', () => {
    const r = renderMarkdown('[r](runners.md#backends) [x](https://x.y)', { link: (h) => (h.endsWith('.md#backends') ? '/docs/runners#backends' : h) });
    assert.deepEqual(r.links, ['/docs/runners#backends', 'https://x.y']);
    assert.match(r.html, /href="\/docs\/runners#backends"/);
  });
});
