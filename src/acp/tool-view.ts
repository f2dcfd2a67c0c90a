/**
 * Tool calls as they are: folds an agent's `tool_call`, every `tool_call_update` (a patch: changed
 * fields replace) and the tool call inside `session/request_permission` into one view per call.
 */
import { z } from 'zod';

/** One piece of a tool call's content: text, a file edit, a terminal, or something only summarised. */
export type ToolContent =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'diff'; readonly path: string; readonly old_text: string | null; readonly new_text: string }
  | { readonly type: 'terminal'; readonly terminal_id: string }
  | { readonly type: 'other'; readonly summary: string };

export interface ToolView {
  readonly id: string;
  /** The runtime's own tool name (Claude: `_meta.claudeCode.toolName`, e.g. `Bash`, `Edit`). */
  readonly tool_name: string | null;
  readonly title: string;
  readonly kind: string | null;
  readonly status: string;
  readonly raw_input: unknown;
  readonly raw_output: unknown;
  readonly content: readonly ToolContent[];
  readonly locations: ReadonlyArray<{ readonly path: string; readonly line?: number }>;
}

const zToolCallFields = z.object({
  toolCallId: z.string().min(1).max(1000),
  title: z.string().nullish(),
  kind: z.string().max(100).nullish(),
  status: z.string().max(100).nullish(),
  rawInput: z.unknown().optional(),
  rawOutput: z.unknown().optional(),
  content: z.array(z.unknown()).nullish(),
  locations: z.array(z.unknown()).nullish(),
  _meta: z.record(z.string(), z.unknown()).nullish(),
});
type ToolCallFields = z.infer<typeof zToolCallFields>;

const zText = z.object({ type: z.literal('text'), text: z.string() });
const zContentItem = z.object({ type: z.literal('content'), content: z.object({ type: z.string() }).passthrough() });
const zDiff = z.object({
  type: z.literal('diff'),
  path: z.string(),
  oldText: z.string().nullish(),
  newText: z.string(),
});
const zTerminal = z.object({ type: z.literal('terminal'), terminalId: z.string() });
const zLocation = z.object({ path: z.string(), line: z.number().int().nullish() });
const zTyped = z.object({ type: z.string() });
const zToolKind = z.object({ sessionUpdate: z.enum(['tool_call', 'tool_call_update']) });
const zMethodLine = z.object({ method: z.string(), params: z.unknown() });
const zUpdateParams = z.object({ update: z.unknown() });
const zPermissionParams = z.object({ toolCall: z.unknown() });
const zToolNameMeta = z.object({ claudeCode: z.object({ toolName: z.string().max(200) }).passthrough() }).passthrough();

function contentOf(item: unknown): ToolContent {
  const c = zContentItem.safeParse(item);
  if (c.success) {
    const text = zText.safeParse(c.data.content);
    if (text.success) return { type: 'text', text: text.data.text };
    return { type: 'other', summary: `(${c.data.content.type} content)` };
  }
  const d = zDiff.safeParse(item);
  if (d.success) return { type: 'diff', path: d.data.path, old_text: d.data.oldText ?? null, new_text: d.data.newText };
  const t = zTerminal.safeParse(item);
  if (t.success) return { type: 'terminal', terminal_id: t.data.terminalId };
  const type = zTyped.safeParse(item);
  return { type: 'other', summary: `(${type.success ? type.data.type : 'unknown'} content)` };
}

/** The runtime's own name for the tool, when it says (Claude Code does, in `_meta.claudeCode.toolName`). */
export function toolNameOf(meta: unknown): string | null {
  const m = zToolNameMeta.safeParse(meta);
  return m.success ? m.data.claudeCode.toolName : null;
}

const isEmptyInput = (v: unknown): boolean =>
  v === undefined ||
  v === null ||
  (typeof v === 'object' && !Array.isArray(v) && Object.keys(v as object).length === 0);

/** True once a view says what the tool does (Claude's first tool_call says only "Terminal" with empty input). */
export function informative(v: ToolView): boolean {
  return (
    !isEmptyInput(v.raw_input) ||
    v.content.length > 0 ||
    v.status === 'completed' ||
    v.status === 'failed' ||
    v.status === 'cancelled'
  );
}

export const TERMINAL_TOOL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

/** A tool call's fields from a `session/update` update or a permission request's `toolCall`; null when it is neither. */
export function toolFieldsOf(
  update: unknown,
): (ToolCallFields & { readonly origin: 'tool_call' | 'tool_call_update' }) | null {
  // Most updates are message chunks with no toolCallId: zod would reject them too, but only after
  // building its issue list, which cost more per chunk than the rest of the line's handling (issue 21).
  if (
    typeof update !== 'object' ||
    update === null ||
    typeof (update as { toolCallId?: unknown }).toolCallId !== 'string'
  )
    return null;
  const kind = zToolKind.safeParse(update);
  const f = zToolCallFields.safeParse(update);
  if (!f.success) return null;
  return { ...f.data, origin: kind.success ? kind.data.sessionUpdate : 'tool_call_update' };
}

/** Merges a patch into a view (or starts one): fields present replace, absent or null ones stay. */
export function mergeTool(prev: ToolView | undefined, f: ToolCallFields): ToolView {
  const fresh: ToolView = prev ?? {
    id: f.toolCallId,
    tool_name: null,
    title: '',
    kind: null,
    status: 'pending',
    raw_input: undefined,
    raw_output: undefined,
    content: [],
    locations: [],
  };
  const locations = f.locations?.flatMap((l) => {
    const p = zLocation.safeParse(l);
    return p.success ? [{ path: p.data.path, ...(p.data.line != null ? { line: p.data.line } : {}) }] : [];
  });
  return {
    id: fresh.id,
    tool_name: toolNameOf(f._meta) ?? fresh.tool_name,
    title: f.title ? f.title : fresh.title,
    kind: f.kind ?? fresh.kind,
    status: f.status ?? fresh.status,
    raw_input:
      f.rawInput !== undefined && !(isEmptyInput(f.rawInput) && !isEmptyInput(fresh.raw_input))
        ? f.rawInput
        : fresh.raw_input,
    raw_output: f.rawOutput !== undefined ? f.rawOutput : fresh.raw_output,
    content: f.content ? f.content.map(contentOf) : fresh.content,
    locations: locations ?? fresh.locations,
  };
}

/** The line a view is shown under: the title, else the tool's name or kind. */
export function toolLabel(v: ToolView): string {
  return v.title || v.tool_name || v.kind || 'tool';
}

/** A one-line preview of what the tool was given: a command, a path, else compact JSON. */
export function inputSummary(v: ToolView): string {
  const input = v.raw_input;
  if (isEmptyInput(input)) return v.locations[0]?.path ?? '';
  if (typeof input === 'string') return input;
  if (typeof input === 'object' && input !== null) {
    const o = input as Record<string, unknown>;
    for (const k of ['command', 'cmd', 'file_path', 'path', 'url', 'pattern', 'query']) {
      const val = o[k];
      if (typeof val === 'string') return val;
      if (Array.isArray(val) && val.every((x) => typeof x === 'string')) return val.join(' ');
    }
  }
  const json = JSON.stringify(input);
  return json.length > 200 ? `${json.slice(0, 199)}…` : json;
}

/** The text a tool produced: its text content, else its raw output. */
export function outputText(v: ToolView): string {
  const texts = v.content.flatMap((c) => (c.type === 'text' ? [c.text] : []));
  if (texts.length > 0) return texts.join('\n');
  const raw = v.raw_output;
  if (raw === undefined || raw === null) return '';
  if (typeof raw === 'string') return raw;
  const o = raw as Record<string, unknown>;
  if (typeof o.output === 'string') return o.output;
  if (typeof o.stdout === 'string')
    return [o.stdout, typeof o.stderr === 'string' ? o.stderr : ''].filter(Boolean).join('\n');
  return JSON.stringify(raw, null, 2);
}

/**
 * The tool calls of a stream of ACP messages, each merged up to the latest message. Keys carry a scope
 * (the turn), since an agent may number its calls afresh in each session.
 */
export class ToolFold {
  readonly #views = new Map<string, ToolView>();

  /** Applies one stored ACP line (a session/update or a permission request); the merged view when it touched a tool call. */
  applyLine(
    line: string,
    scope = '',
  ): { view: ToolView; origin: 'tool_call' | 'tool_call_update' | 'permission' } | null {
    const msg = parseJson(line);
    const m = zMethodLine.safeParse(msg);
    if (!m.success) return null;
    if (m.data.method === 'session/update') {
      const u = zUpdateParams.safeParse(m.data.params);
      const f = u.success ? toolFieldsOf(u.data.update) : null;
      if (!f) return null;
      return { view: this.apply(f, scope), origin: f.origin };
    }
    if (m.data.method === 'session/request_permission') {
      const p = zPermissionParams.safeParse(m.data.params);
      const f = p.success ? toolFieldsOf(p.data.toolCall) : null;
      if (!f) return null;
      // The request names the call as it stands; its status is the agent's business, not the request's.
      return { view: this.apply({ ...f, status: null }, scope), origin: 'permission' };
    }
    return null;
  }

  apply(f: ToolCallFields, scope = ''): ToolView {
    const key = `${scope}\u0000${f.toolCallId}`;
    const view = mergeTool(this.#views.get(key), f);
    this.#views.set(key, view);
    return view;
  }

  get(toolCallId: string, scope = ''): ToolView | undefined {
    return this.#views.get(`${scope}\u0000${toolCallId}`);
  }

  /** Whether a call is still running: started (pending or in progress) and not yet completed, failed or cancelled. */
  anyRunning(): boolean {
    for (const v of this.#views.values()) if (!TERMINAL_TOOL_STATUSES.has(v.status)) return true;
    return false;
  }

  clear(): void {
    this.#views.clear();
  }
}

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}
