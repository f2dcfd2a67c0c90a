/**
 * Markdown to HTML with markdown-it, for the docs and for what agents write. Raw HTML in the source is
 * shown as text (html: false), unsafe link schemes are refused, and fenced code is highlighted on the server.
 */
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';
import MarkdownIt from 'markdown-it';
import type { MarkdownIt as Md, Token } from 'markdown-it';

// The languages agents and these docs write most; anything else is shown escaped, unhighlighted.
for (const [name, lang] of Object.entries({
  bash,
  css,
  diff,
  dockerfile,
  go,
  ini,
  javascript,
  json,
  python,
  rust,
  shell,
  sql,
  typescript,
  xml,
  yaml,
})) {
  hljs.registerLanguage(name, lang);
}
hljs.registerAliases(['sh', 'zsh', 'console'], { languageName: 'bash' });
hljs.registerAliases(['ts', 'tsx'], { languageName: 'typescript' });
hljs.registerAliases(['js', 'jsx', 'mjs'], { languageName: 'javascript' });
hljs.registerAliases(['toml'], { languageName: 'ini' });
hljs.registerAliases(['html'], { languageName: 'xml' });

export interface RenderOptions {
  /** Rewrites a link target (e.g. `runners.md#x` to `/docs/runners#x`); return null to drop the link. */
  readonly link?: (href: string) => string | null;
}

export interface Rendered {
  readonly html: string;
  /** Ids given to headings, in document order. */
  readonly headingIds: readonly string[];
  /** The first level-1 heading's text, if any. */
  readonly title: string | null;
  /** Every link target after rewriting, for link checks. */
  readonly links: readonly string[];
  /** Whether the page has a diagram (a `mermaid` fence, left as its source in `<pre class="mermaid">` for the browser to draw). */
  readonly diagrams: boolean;
}

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

/** GitHub-style heading slug: lower case, punctuation dropped, spaces to hyphens. */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
}

/** Only these schemes keep an href; markdown-it's own check already refuses javascript:, vbscript:, file: and data:. */
const SAFE_SCHEME = /^(https?:|mailto:)/i;
const HAS_SCHEME = /^[a-z][a-z0-9+.-]*:/i;
const safeHref = (href: string): boolean => !HAS_SCHEME.test(href) || SAFE_SCHEME.test(href);

function highlight(code: string, lang: string): string {
  const name = lang.trim().split(/\s+/)[0] ?? '';
  if (!name || !hljs.getLanguage(name)) return '';
  return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
}

interface Env {
  opts: RenderOptions;
  ids: string[];
  links: string[];
  title: string | null;
  diagrams: boolean;
}

const inlineText = (t: Token | undefined): string =>
  (t?.children ?? [])
    .filter((c) => c.type === 'text' || c.type === 'code_inline')
    .map((c) => c.content)
    .join('');

function base(images: boolean): Md {
  const md = new MarkdownIt({ html: false, linkify: true, typographer: false, highlight });
  md.validateLink = (url) => safeHref(url.trim());
  if (!images) md.disable('image');
  // Wide tables scroll inside their own box instead of widening the page.
  md.renderer.rules.table_open = () => '<div class="md-table"><table>\n';
  md.renderer.rules.table_close = () => '</table></div>\n';
  const fence = md.renderer.rules.fence!;
  md.renderer.rules.fence = (tokens, idx, options, env, self) =>
    fence(tokens, idx, options, env, self).replace('<pre><code class="language-', '<pre><code class="hljs language-');
  return md;
}

/** The docs renderer: headings get unique GitHub-style ids, links go through the page's rewrite hook. */
const docsMd = base(true);
const docsFence = docsMd.renderer.rules.fence!;
docsMd.renderer.rules.fence = (tokens, idx, options, env, self) => {
  const tok = tokens[idx]!;
  if (tok.info.trim() !== 'mermaid') return docsFence(tokens, idx, options, env, self);
  (env as unknown as Env).diagrams = true;
  return `<pre class="mermaid">${escapeHtml(tok.content)}</pre>\n`;
};
docsMd.core.ruler.push('fountain_docs', (state) => {
  const env = state.env as unknown as Env;
  const used = new Map<string, number>();
  state.tokens.forEach((tok, i) => {
    if (tok.type === 'heading_open') {
      const text = inlineText(state.tokens[i + 1]);
      const slug = slugify(text);
      const n = used.get(slug) ?? 0;
      used.set(slug, n + 1);
      const id = n === 0 ? slug : `${slug}-${n}`;
      tok.attrSet('id', id);
      env.ids.push(id);
      if (tok.tag === 'h1' && env.title === null) env.title = text;
    }
    if (tok.type !== 'inline' || !tok.children) return;
    const drop: number[] = [];
    const open: number[] = [];
    tok.children.forEach((c, j) => {
      if (c.type === 'link_open') {
        const href = String(c.attrGet('href') ?? '');
        const to = env.opts.link ? env.opts.link(href) : href;
        if (to === null || !safeHref(to)) drop.push(j);
        else {
          c.attrSet('href', to);
          env.links.push(to);
        }
        open.push(j);
      } else if (c.type === 'link_close') {
        const from = open.pop();
        if (from !== undefined && drop.includes(from)) drop.push(j);
      }
    });
    tok.children = tok.children.filter((_, j) => !drop.includes(j));
  });
});

export function renderMarkdown(src: string, opts: RenderOptions = {}): Rendered {
  const env: Env = { opts, ids: [], links: [], title: null, diagrams: false };
  const html = docsMd.render(src, env as unknown as Record<string, unknown>);
  return { html, headingIds: env.ids, title: env.title, links: env.links, diagrams: env.diagrams };
}

/**
 * What an agent wrote, as HTML safe to put on the page: no raw HTML, no images (a remote image would
 * report the reader to whoever wrote the URL), links open elsewhere without a referrer.
 */
const agentMd = base(false);
agentMd.renderer.rules.link_open = (tokens, idx, options, _env, self) => {
  tokens[idx]!.attrSet('rel', 'noopener noreferrer nofollow');
  tokens[idx]!.attrSet('target', '_blank');
  return self.renderToken(tokens, idx, options);
};

export const renderAgentMarkdown = (src: string): string => agentMd.render(src);
