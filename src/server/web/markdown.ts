/**
 * A compact Markdown renderer for the subset the docs use: headings with ids, paragraphs, fenced
 * code, lists (nested by indentation), GFM tables, block quotes, rules, and inline code, emphasis and links. Every piece of source text is HTML-escaped; raw HTML is shown as text, never passed through.
 */

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
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

/** GitHub-style heading slug: lower case, punctuation dropped, spaces to hyphens. */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/<[^>]*>/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
}

/** Schemes a link may use; anything else (javascript:, data:) loses its href. */
const SAFE_HREF = /^(https?:\/\/|mailto:|\/|#|\.{0,2}\/?[\w.-])/i;
const UNSAFE_SCHEME = /^\s*[a-z][a-z0-9+.-]*:/i;

interface Ctx {
  readonly opts: RenderOptions;
  readonly ids: string[];
  readonly seen: Map<string, number>;
  readonly links: string[];
  title: string | null;
}

function safeHref(raw: string, ctx: Ctx): string | null {
  const href = raw.trim();
  if (UNSAFE_SCHEME.test(href) && !/^(https?|mailto):/i.test(href)) return null;
  if (!SAFE_HREF.test(href)) return null;
  const out = ctx.opts.link ? ctx.opts.link(href) : href;
  if (out !== null) ctx.links.push(out);
  return out;
}

/** Inline markup over one line of source text (already joined for a paragraph). */
function inline(src: string, ctx: Ctx): string {
  let out = '';
  let i = 0;
  while (i < src.length) {
    const ch = src[i]!;
    if (ch === '\\' && i + 1 < src.length && /[\\`*_[\]()#+\-.!|<>]/.test(src[i + 1]!)) {
      out += escapeHtml(src[i + 1]!);
      i += 2;
      continue;
    }
    if (ch === '`') {
      let n = 0;
      while (src[i + n] === '`') n++;
      const fence = '`'.repeat(n);
      const end = src.indexOf(fence, i + n);
      if (end > 0) {
        let code = src.slice(i + n, end);
        if (code.startsWith(' ') && code.endsWith(' ') && code.trim() !== '') code = code.slice(1, -1);
        out += `<code>${escapeHtml(code)}</code>`;
        i = end + n;
        continue;
      }
      out += escapeHtml(fence);
      i += n;
      continue;
    }
    if (ch === '[') {
      const m = /^\[((?:[^\[\]\\]|\\.|\[[^\]]*\])*)\]\(([^()\s]*(?:\([^()\s]*\))?[^()\s]*)\)/.exec(src.slice(i));
      if (m) {
        const href = safeHref(m[2]!, ctx);
        const label = inline(m[1]!, ctx);
        out += href === null ? label : `<a href="${escapeHtml(href)}">${label}</a>`;
        i += m[0].length;
        continue;
      }
    }
    if (ch === '<') {
      const m = /^<(https?:\/\/[^\s<>]+)>/.exec(src.slice(i));
      if (m) {
        const href = safeHref(m[1]!, ctx);
        out += href === null ? escapeHtml(m[1]!) : `<a href="${escapeHtml(href)}">${escapeHtml(m[1]!)}</a>`;
        i += m[0].length;
        continue;
      }
    }
    if (ch === '*' || ch === '_') {
      const double = src[i + 1] === ch;
      const marker = double ? ch + ch : ch;
      const prev = i > 0 ? src[i - 1]! : ' ';
      // Intra-word underscores (snake_case) are text, as in GFM.
      const opens = !/\s/.test(src[i + marker.length] ?? ' ') && !(ch === '_' && /[\p{L}\p{N}]/u.test(prev));
      if (opens) {
        const end = findClose(src, i + marker.length, marker);
        if (end > 0) {
          const tag = double ? 'strong' : 'em';
          out += `<${tag}>${inline(src.slice(i + marker.length, end), ctx)}</${tag}>`;
          i = end + marker.length;
          continue;
        }
      }
    }
    out += escapeHtml(ch);
    i++;
  }
  return out;
}

function findClose(src: string, from: number, marker: string): number {
  for (let j = from; j < src.length; j++) {
    if (src[j] === '`') {
      const end = src.indexOf('`', j + 1);
      if (end < 0) return -1;
      j = end;
      continue;
    }
    if (src.startsWith(marker, j) && !/\s/.test(src[j - 1]!) && (marker.length === 2 || src[j + 1] !== marker)) {
      const next = src[j + marker.length] ?? ' ';
      if (marker[0] === '_' && /[\p{L}\p{N}]/u.test(next)) continue;
      return j;
    }
  }
  return -1;
}

const FENCE = /^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

const indentOf = (line: string): number => /^\s*/.exec(line)![0].replace(/\t/g, '    ').length;
const isBlank = (line: string): boolean => line.trim() === '';

function splitRow(line: string): string[] {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const cells: string[] = [];
  let cur = '';
  let inCode = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\\' && s[i + 1] === '|') {
      cur += '|';
      i++;
    } else if (c === '`') {
      inCode = !inCode;
      cur += c;
    } else if (c === '|' && !inCode) {
      cells.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  cells.push(cur.trim());
  return cells;
}

function heading(level: number, text: string, ctx: Ctx): string {
  const base = slugify(text.replace(/`/g, '')) || 'section';
  const n = ctx.seen.get(base) ?? 0;
  ctx.seen.set(base, n + 1);
  const id = n === 0 ? base : `${base}-${n}`;
  ctx.ids.push(id);
  if (level === 1 && ctx.title === null) ctx.title = text.replace(/[`*_]/g, '');
  return `<h${level} id="${escapeHtml(id)}">${inline(text, ctx)}</h${level}>\n`;
}

/** Renders a sequence of lines as blocks; `tight` renders a lone paragraph without <p> (list items). */
function blocks(lines: readonly string[], ctx: Ctx, tight = false): string {
  let out = '';
  let i = 0;
  const paragraphs: string[] = [];
  let blockCount = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (isBlank(line)) {
      i++;
      continue;
    }
    blockCount++;
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[2]!;
      const pad = fence[1]!.length;
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trim().startsWith(marker)) {
        body.push(lines[i]!.slice(Math.min(pad, indentOf(lines[i]!))));
        i++;
      }
      i++;
      const lang = fence[3] ? ` class="language-${escapeHtml(fence[3])}"` : '';
      out += `<pre><code${lang}>${escapeHtml(body.join('\n'))}</code></pre>\n`;
      continue;
    }
    const h = HEADING.exec(line);
    if (h) {
      out += heading(h[1]!.length, h[2]!, ctx);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out += '<hr>\n';
      i++;
      continue;
    }
    if (line.trimStart().startsWith('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]!) && lines[i + 1]!.includes('-')) {
      const head = splitRow(line);
      const aligns = splitRow(lines[i + 1]!).map((c) => (c.startsWith(':') && c.endsWith(':') ? 'center' : c.endsWith(':') ? 'right' : c.startsWith(':') ? 'left' : ''));
      i += 2;
      const cell = (tag: string, text: string, k: number) => `<${tag}${aligns[k] ? ` style="text-align:${aligns[k]}"` : ''}>${inline(text, ctx)}</${tag}>`;
      let html = `<div class="table"><table>\n<thead><tr>${head.map((c, k) => cell('th', c, k)).join('')}</tr></thead>\n<tbody>\n`;
      while (i < lines.length && lines[i]!.trimStart().startsWith('|')) {
        const row = splitRow(lines[i]!);
        html += `<tr>${head.map((_, k) => cell('td', row[k] ?? '', k)).join('')}</tr>\n`;
        i++;
      }
      out += `${html}</tbody></table></div>\n`;
      continue;
    }
    if (/^\s*>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i]!)) body.push(lines[i++]!.replace(/^\s*>\s?/, ''));
      out += `<blockquote>\n${blocks(body, ctx)}</blockquote>\n`;
      continue;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      const [html, next] = list(lines, i, ctx);
      out += html;
      i = next;
      continue;
    }
    paragraphs.length = 0;
    while (i < lines.length && !isBlank(lines[i]!)) {
      const l = lines[i]!;
      if (paragraphs.length > 0 && (FENCE.test(l) || HEADING.test(l) || LIST_ITEM.test(l) || /^\s*>/.test(l) || RULE.test(l))) break;
      paragraphs.push(l.trim());
      i++;
    }
    const text = inline(paragraphs.join('\n'), ctx);
    out += tight && blockCount === 1 && i >= lines.length ? text : `<p>${text}</p>\n`;
  }
  return out;
}

/** A list starting at `start`: its items (with their indented continuations) rendered recursively. */
function list(lines: readonly string[], start: number, ctx: Ctx): [string, number] {
  const first = LIST_ITEM.exec(lines[start]!)!;
  const base = first[1]!.length;
  const ordered = /\d/.test(first[2]!);
  const items: string[][] = [];
  let loose = false;
  let i = start;
  while (i < lines.length) {
    const line = lines[i]!;
    const m = LIST_ITEM.exec(line);
    if (m && m[1]!.length === base && /\d/.test(m[2]!) === ordered) {
      const content = m[1]!.length + m[2]!.length + 1;
      const body = [m[3]!];
      i++;
      while (i < lines.length) {
        const l = lines[i]!;
        if (isBlank(l)) {
          // A blank line continues the item only when indented content follows.
          const nxt = lines[i + 1];
          if (nxt !== undefined && !isBlank(nxt) && indentOf(nxt) > base) {
            body.push('');
            loose = loose || !LIST_ITEM.test(nxt);
            i++;
            continue;
          }
          break;
        }
        if (indentOf(l) <= base && (LIST_ITEM.test(l) || FENCE.test(l) || HEADING.test(l))) break;
        body.push(l.slice(Math.min(content, indentOf(l))));
        i++;
      }
      items.push(body);
      if (i < lines.length && isBlank(lines[i]!)) {
        const nxt = lines[i + 1];
        const nm = nxt === undefined ? null : LIST_ITEM.exec(nxt);
        if (nm && nm[1]!.length === base && /\d/.test(nm[2]!) === ordered) {
          loose = true;
          i++;
          continue;
        }
      }
      continue;
    }
    break;
  }
  const startAttr = ordered && parseInt(first[2]!, 10) !== 1 ? ` start="${parseInt(first[2]!, 10)}"` : '';
  const tag = ordered ? 'ol' : 'ul';
  const html = items.map((body) => `<li>${blocks(body, ctx, !loose)}</li>\n`).join('');
  return [`<${tag}${startAttr}>\n${html}</${tag}>\n`, i];
}

export function renderMarkdown(source: string, opts: RenderOptions = {}): Rendered {
  const ctx: Ctx = { opts, ids: [], seen: new Map(), links: [], title: null };
  const html = blocks(source.replace(/\r\n?/g, '\n').split('\n'), ctx);
  return { html, headingIds: ctx.ids, title: ctx.title, links: ctx.links };
}
