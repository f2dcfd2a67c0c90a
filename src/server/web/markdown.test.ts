import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderAgentMarkdown, renderMarkdown, slugify } from './markdown.ts';

const html = (src: string) => renderMarkdown(src).html;

describe('markdown renderer', () => {
  it('leaves a mermaid fence of the docs as its escaped source for the browser to draw, and says the page has one', () => {
    const r = renderMarkdown('# D\n\n```mermaid\nstateDiagram-v2\n    a --> b: x <script>\n```\n');
    assert.equal(r.diagrams, true);
    assert.match(r.html, /<pre class="mermaid">stateDiagram-v2\n {4}a --&gt; b: x &lt;script&gt;\n<\/pre>/);
    const plain = renderMarkdown('```ts\nconst a = 1;\n```\n');
    assert.equal(plain.diagrams, false);
    assert.doesNotMatch(plain.html, /class="mermaid"/);
    // What an agent writes is never handed to a script.
    assert.doesNotMatch(renderAgentMarkdown('```mermaid\ngraph TD\n```\n'), /class="mermaid"/);
  });

  it('escapes raw HTML everywhere instead of passing it through', () => {
    for (const out of [
      html('# Hi <script>alert(1)</script>\n\nA <img src=x onerror=alert(1)> & "q"\n\n`<b>`\n\n```\n<div>\n```'),
      renderAgentMarkdown('<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n<div onclick="x">'),
    ]) {
      assert.ok(!/<script|<img|<div>|<div onclick|<b>/.test(out), out);
      assert.match(out, /&lt;script&gt;/);
    }
    const doc = html('A <img src=x onerror=alert(1)> & "q"\n\n`<b>`\n\n```\n<div>\n```');
    assert.match(doc, /&lt;img src=x onerror=alert\(1\)&gt; &amp; &quot;q&quot;/);
    assert.match(doc, /<code>&lt;b&gt;<\/code>/);
    assert.match(doc, /<pre><code>&lt;div&gt;\n<\/code><\/pre>/);
  });

  it('refuses hrefs with unsafe schemes and escapes link targets', () => {
    for (const bad of [
      '[x](javascript:alert(1))',
      '[x](data:text/html,hi)',
      '[x](vbscript:msgbox)',
      '[x](file:///etc/passwd)',
      '<javascript:alert(1)>',
    ]) {
      assert.ok(!/href/.test(html(bad)), bad);
      assert.ok(!/href/.test(renderAgentMarkdown(bad)), bad);
    }
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
    assert.equal(
      html('**bold** and *it* and _it_ in snake_case_name `a*b*c`'),
      '<p><strong>bold</strong> and <em>it</em> and <em>it</em> in snake_case_name <code>a*b*c</code></p>\n',
    );
  });

  it('renders GFM tables in a box of their own, with escaped pipes and alignment', () => {
    const out = html('| a | b |\n|---|:-:|\n| `x \\| y` | **z** |\n| only |');
    assert.match(out, /^<div class="md-table"><table>/);
    assert.match(out, /<th style="text-align:center">b<\/th>/);
    assert.match(out, /<td><code>x \| y<\/code><\/td>\n<td style="text-align:center"><strong>z<\/strong><\/td>/);
  });

  it('highlights fenced code on the server and leaves unknown languages plain', () => {
    assert.equal(
      html('```sh\nnpm test\n```'),
      '<pre><code class="hljs language-sh">npm <span class="hljs-built_in">test</span>\n</code></pre>\n',
    );
    assert.match(
      renderAgentMarkdown('```ts\nconst a = "<b>";\n```'),
      /<span class="hljs-keyword">const<\/span> a = <span class="hljs-string">&quot;&lt;b&gt;&quot;<\/span>/,
    );
    assert.equal(
      html('```nosuchlang\n<x>\n```'),
      '<pre><code class="hljs language-nosuchlang">&lt;x&gt;\n</code></pre>\n',
    );
  });

  it('passes link targets through the rewrite hook, drops the ones it refuses and collects the rest', () => {
    const r = renderMarkdown('[r](runners.md#backends) [x](https://x.y) [gone](gone.md)', {
      link: (h) => (h === 'gone.md' ? null : h.endsWith('.md#backends') ? '/docs/runners#backends' : h),
    });
    assert.deepEqual(r.links, ['/docs/runners#backends', 'https://x.y']);
    assert.match(r.html, /href="\/docs\/runners#backends"/);
    assert.match(r.html, / gone<\/p>/);
  });

  it("shows an agent's images as links and opens its links elsewhere without a referrer", () => {
    const out = renderAgentMarkdown('![pixel](https://tracker.example/p.png) [docs](https://example.com)');
    assert.ok(!out.includes('<img'), out);
    assert.match(out, /<a href="https:\/\/example.com" rel="noopener noreferrer nofollow" target="_blank">docs<\/a>/);
  });
});
