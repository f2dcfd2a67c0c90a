/**
 * Turns stored events into conversation HTML: agent text as Markdown, folded thoughts, tool calls as cards
 * (each merged with all its updates: title, `$ command`, input, output folded, edits as coloured diffs,
 * terminals), permission requests with their options as buttons, turn status and errors in words. Rows in,
 * JSX out; the reader keeps only the tool calls' merged views.
 *
 * Over 400 lines because the formatter laid out on one line each what had been packed; splitting it
 * by concern is due.
 */
import { raw } from 'hono/html';
import { stringify } from 'yaml';
import { z } from 'zod';
import { diffLines } from '../../acp/diff-lines.ts';
import {
  outputText,
  TERMINAL_TOOL_STATUSES,
  toolLabel,
  ToolFold,
  type ToolContent,
  type ToolView,
} from '../../acp/tool-view.ts';
import type { EventRow, TurnImage } from '../store/conversation-schema.ts';
import { TurnImages } from './turn-images.tsx';
import { stageInWords, turnInWords } from './words.ts';
import { homeRelative } from './home-paths.ts';
/** What a row means to a reader; `null` for rows the conversation view drops (plans, command lists). */
export type Item =
  | { kind: 'text'; text: string; turnId: string | null }
  | { kind: 'thought'; text: string }
  /** A tool call as merged so far; `first` marks its first appearance (later ones update it in place). */
  | { kind: 'tool'; key: string; view: ToolView; first: boolean }
  | {
      kind: 'permission';
      requestId: string;
      tool: string;
      options: Array<{ option_id: string; name: string; kind: string }>;
    }
  | { kind: 'permission_done'; requestId: string; tool: string | null; outcome: string; optionId: string | null }
  | { kind: 'turn'; state: string; turnId: string | null; text: string }
  | { kind: 'stage'; stage: string; state: string; text: string; failed: boolean }
  | { kind: 'output'; stream: string; text: string };

const contentText = z.object({ type: z.literal('text'), text: z.string() });
const update = z.object({
  params: z.object({
    update: z
      .object({
        sessionUpdate: z.string(),
        content: z.unknown().optional(),
      })
      .passthrough(),
  }),
});
const permissionStarted = z.object({
  request_id: z.string(),
  tool: z.string().nullish(),
  options: z.array(z.object({ option_id: z.string(), name: z.string(), kind: z.string() })),
});
const permissionDone = z.object({
  request_id: z.string(),
  tool: z.string().nullish(),
  outcome: z.string().optional(),
  option_id: z.string().nullish(),
});

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/**
 * Reads a conversation's rows in order: tool lines (`tool_call`, every `tool_call_update`, the call inside a
 * permission request) merge into one view per call; everything else is interpreted on its own.
 */
export class EventReader {
  readonly #tools = new ToolFold();
  readonly #seen = new Set<string>();

  /** `homes`: host directories shown as `~` (tool titles, inputs, diffs, permission lines; see home-paths.ts). */
  constructor(private readonly homes: readonly string[] = []) {}

  read(stored: EventRow): Item | null {
    const row = this.homes.length > 0 ? { ...stored, data: homeRelative(stored.data, this.homes) } : stored;
    if (row.kind === 'output' && row.stream === 'acp') {
      const scope = row.turnId ?? '';
      const hit = this.#tools.applyLine(row.data, scope);
      if (hit) {
        const key = `${scope}.${hit.view.id}`;
        const first = !this.#seen.has(key);
        this.#seen.add(key);
        return { kind: 'tool', key, view: hit.view, first };
      }
    }
    return interpret(row);
  }
}

/** One row on its own (tool lines need an EventReader, which merges them). */
export function interpret(row: EventRow): Item | null {
  if (row.kind === 'stage') {
    const data = parseJson(row.data);
    const state = row.state ?? '';
    if (row.stage === 'permission' || row.stage === 'request') {
      if (state === 'started') {
        const p = permissionStarted.safeParse(data);
        return p.success
          ? { kind: 'permission', requestId: p.data.request_id, tool: p.data.tool ?? 'a tool', options: p.data.options }
          : null;
      }
      const p = permissionDone.safeParse(data);
      return p.success
        ? {
            kind: 'permission_done',
            requestId: p.data.request_id,
            tool: p.data.tool ?? null,
            outcome: p.data.outcome ?? state,
            optionId: p.data.option_id ?? null,
          }
        : null;
    }
    if (row.stage === 'turn') return { kind: 'turn', state, turnId: row.turnId, text: turnInWords(state, data) };
    return {
      kind: 'stage',
      stage: row.stage ?? 'stage',
      state,
      text: stageInWords(row.stage ?? '', state, data),
      failed: state === 'failed',
    };
  }
  if (row.stream !== 'acp') return { kind: 'output', stream: row.stream, text: row.data };
  const msg = update.safeParse(parseJson(row.data));
  if (!msg.success) return null;
  const u = msg.data.params.update;
  switch (u.sessionUpdate) {
    case 'agent_message_chunk': {
      const c = contentText.safeParse(u.content);
      return c.success ? { kind: 'text', text: c.data.text, turnId: row.turnId } : null;
    }
    case 'agent_thought_chunk': {
      const c = contentText.safeParse(u.content);
      return c.success ? { kind: 'thought', text: c.data.text } : null;
    }
    default:
      return null;
  }
}

type PermissionOption = { option_id: string; name: string; kind: string };

/** An element id from an agent-chosen id (request ids carry dots, tool ids anything). */
const domId = (prefix: string, id: string): string => `${prefix}-${id.replace(/[^a-zA-Z0-9_-]/g, '_')}`;
const permissionDomId = (requestId: string): string => domId('perm', requestId);

export function PermissionForm(p: {
  conversationId: string;
  requestId: string;
  tool: string;
  options: PermissionOption[];
}) {
  const labelId = `${permissionDomId(p.requestId)}-label`;
  return (
    <form
      id={permissionDomId(p.requestId)}
      class="ev perm"
      method="post"
      action={`/conversations/${p.conversationId}/requests/${encodeURIComponent(p.requestId)}`}
      hx-post={`/conversations/${p.conversationId}/requests/${encodeURIComponent(p.requestId)}`}
      hx-swap="outerHTML"
      aria-labelledby={labelId}
      data-request-id={p.requestId}
    >
      <p id={labelId}>
        <strong>Permission requested:</strong> <InlineMd text={p.tool} />
      </p>
      <div class="row">
        {p.options.map((o) => (
          <button
            type="submit"
            name="option_id"
            value={o.option_id}
            class={o.kind.startsWith('reject') ? 'danger' : ''}
          >
            {o.name}
          </button>
        ))}
      </div>
    </form>
  );
}

/**
 * A permission request once resolved, in place of its buttons. `oob` makes it an htmx out-of-band swap,
 * so a live answer given elsewhere (the CLI, a timeout) also retires the buttons on an open page.
 */
export function PermissionResolved(p: { requestId: string; tool: string; oob?: boolean }) {
  return (
    <div id={permissionDomId(p.requestId)} class="ev stage" hx-swap-oob={p.oob ? 'true' : undefined}>
      Permission requested: <InlineMd text={p.tool} />
    </div>
  );
}

const TOOL_STATUS_WORDS: Readonly<Record<string, string>> = {
  pending: 'waiting',
  in_progress: 'running',
  completed: 'done',
  failed: 'failed',
  cancelled: 'cancelled',
};

/** What kind of tool it is, in a word, from ACP's tool kinds. */
const TOOL_KIND_WORDS: Readonly<Record<string, string>> = {
  read: 'Read',
  edit: 'Edit',
  delete: 'Delete',
  move: 'Move',
  search: 'Search',
  execute: 'Run',
  think: 'Think',
  fetch: 'Fetch',
  switch_mode: 'Mode',
};

/** Structured values as YAML, which reads as "key: value" lines rather than JSON punctuation. */
const readable = (v: unknown): string => (typeof v === 'string' ? v : stringify(v, { lineWidth: 0 }).trimEnd());

const commandInput = z.object({ command: z.union([z.string(), z.array(z.string())]) }).loose();
const isBlank = (v: unknown): boolean => v === undefined || v === null || v === '';

/** A shell command the tool runs, when its input has one; the rest of the input, readable. */
export function toolInput(rawInput: unknown): { command: string | null; input: string | null } {
  if (isBlank(rawInput)) return { command: null, input: null };
  const cmd = commandInput.safeParse(rawInput);
  if (cmd.success) {
    const { command, ...rest } = cmd.data;
    const others = Object.fromEntries(Object.entries(rest).filter(([, v]) => !isBlank(v)));
    return {
      command: Array.isArray(command) ? command.join(' ') : command,
      input: Object.keys(others).length ? readable(others) : null,
    };
  }
  if (typeof rawInput === 'object' && rawInput !== null && Object.keys(rawInput).length === 0)
    return { command: null, input: null };
  return { command: null, input: readable(rawInput) };
}

/** What a finished tool produced when it sent no text content: its raw output, as words rather than JSON. */
function rawOutputText(v: ToolView): string {
  const r = v.raw_output;
  if (r !== null && typeof r === 'object' && !('output' in r) && !('stdout' in r)) return readable(r);
  return outputText(v);
}

/** Output longer than this many lines shows its start, the rest behind "show more". */
export const FOLD_LINES = 12;

function FoldedText(p: { text: string }) {
  const lines = p.text.replace(/\n$/, '').split('\n');
  if (lines.length <= FOLD_LINES) return <pre class="out">{lines.join('\n')}</pre>;
  return (
    <div class="folded">
      <pre class="out">{lines.slice(0, FOLD_LINES).join('\n')}</pre>
      <details>
        <summary>Show {lines.length - FOLD_LINES} more lines</summary>
        <pre class="out">{lines.slice(FOLD_LINES).join('\n')}</pre>
      </details>
    </div>
  );
}

/** A file edit as a unified diff, added and removed lines coloured. */
export function DiffView(p: { diff: Extract<ToolContent, { type: 'diff' }> }) {
  const d = p.diff;
  const cls = { hunk: 'hunk', context: 'ctx', del: 'del', add: 'add' } as const;
  return (
    <div class="diff" data-path={d.path}>
      <div class="diff-path">{d.old_text === null ? `New file ${d.path}` : d.path}</div>
      <pre>
        {diffLines(d).map((l) => (
          <>
            <span class={cls[l.type]}>{l.text}</span>
            {'\n'}
          </>
        ))}
      </pre>
    </div>
  );
}

function ContentView(p: { content: ToolContent }) {
  const c = p.content;
  if (c.type === 'text') return <FoldedText text={c.text} />;
  if (c.type === 'diff') return <DiffView diff={c} />;
  if (c.type === 'terminal')
    return <p class="small muted">Ran in a terminal ({c.terminal_id}); its output is not reported here.</p>;
  return <p class="small muted">{c.summary}</p>;
}

/** An element id for a tool call (its key is the turn and the agent's tool call id). */
export const toolDomId = (key: string): string => domId('tool', key);

/**
 * A tool call as it stands, as one collapsible card: what it is (kind, title, the runtime's tool name), its
 * status in words, the command (`$ …`) and the rest of its input as key: value lines, and what it produced —
 * text folded after FOLD_LINES lines, edits as coloured unified diffs, terminals. `oob` replaces the card in
 * place as the call's updates arrive.
 */
export function ToolCard(p: { toolKey: string; view: ToolView; oob?: boolean }) {
  const v = p.view;
  const ended = TERMINAL_TOOL_STATUSES.has(v.status);
  const { command, input } = toolInput(v.raw_input);
  const location = !command && !input ? v.locations[0]?.path : undefined;
  const output = ended && !v.content.some((c) => c.type === 'text') ? rawOutputText(v) : '';
  const label = toolLabel(v);
  // "Run" before a title that already says "Run `uname -a`" would read twice.
  const kindWord = TOOL_KIND_WORDS[v.kind ?? ''] ?? 'Tool';
  const sayKind = !label.toLowerCase().startsWith(kindWord.toLowerCase());
  return (
    <details
      id={toolDomId(p.toolKey)}
      class={`ev tool${v.status === 'failed' || v.status === 'cancelled' ? ' err' : ''}`}
      data-tool-id={v.id}
      data-tool-status={v.status}
      hx-swap-oob={p.oob ? 'true' : undefined}
      open
    >
      <summary>
        {sayKind ? <span class="tool-kind">{kindWord}</span> : null}
        {sayKind ? ' ' : null}
        <span class="tool-title">
          <InlineMd text={label} />
        </span>{' '}
        <span class={`badge tool-${v.status}`} data-status={v.status}>
          {TOOL_STATUS_WORDS[v.status] ?? v.status}
        </span>
        {v.tool_name && v.tool_name !== label ? <span class="muted small"> {v.tool_name}</span> : null}
      </summary>
      {command ? <pre class="cmd">$ {command}</pre> : null}
      {input ? <pre class="input">{input}</pre> : null}
      {location && location !== label ? <pre class="input">{location}</pre> : null}
      {v.content.map((c) => (
        <ContentView content={c} />
      ))}
      {output ? <FoldedText text={output} /> : null}
      {ended && v.content.length === 0 && !output ? (
        <p class="small muted">
          {v.status === 'completed' ? 'No output' : `Tool ${TOOL_STATUS_WORDS[v.status] ?? v.status}`}
        </p>
      ) : null}
    </details>
  );
}

/**
 * Agent text as Markdown (sanitised: markdown-it with raw HTML off). Asynchronous so that markdown-it and
 * highlight.js load with the first page that shows agent text, not at start-up (~150 ms of CPU; docs/benchmarks.md).
 */
export async function AgentText(p: { text: string; id?: string; oob?: boolean }) {
  const { renderAgentMarkdown } = await import('./markdown.ts');
  return (
    <div class="ev text md" id={p.id} hx-swap-oob={p.oob ? 'true' : undefined}>
      {raw(renderAgentMarkdown(p.text))}
    </div>
  );
}

/** One line an agent wrote, as inline Markdown (a tool's title, a permission request): no raw backticks on the page. */
export async function InlineMd(p: { text: string }) {
  const { renderAgentInline } = await import('./markdown.ts');
  return raw(renderAgentInline(p.text));
}

/** How a permission request ended, in words; option names come from the request when it is known. */
export function permissionOutcome(
  it: Extract<Item, { kind: 'permission_done' }>,
  options: readonly PermissionOption[] | undefined,
): string {
  const chosen = it.optionId ? (options?.find((o) => o.option_id === it.optionId)?.name ?? it.optionId) : null;
  switch (it.outcome) {
    case 'answered':
      return `Answered: ${chosen ?? 'no option'}`;
    case 'timeout':
      return `No answer in time${chosen ? `; the agent was told: ${chosen}` : ''}`;
    case 'cancelled':
      return 'The request was withdrawn when the turn was interrupted';
    case 'turn_ended':
      return 'The turn ended before the request was answered';
    case 'auto_allow':
      return `${it.tool ?? 'A tool'}: allowed by the permission policy`;
    case 'auto_deny':
      return `${it.tool ?? 'A tool'}: refused by the permission policy`;
    default:
      return `Permission ${it.outcome}${chosen ? ` (${chosen})` : ''}`;
  }
}

/** One item as an element; text chunks are inline spans so a streamed answer reads as one paragraph. */
export function ItemView(p: {
  item: Item;
  conversationId: string;
  /** The turn a "started" item opens: the user's message and its images. */
  turn?: { prompt: string; images: readonly TurnImage[] } | undefined;
  askedOptions?: readonly PermissionOption[] | undefined;
}) {
  const it = p.item;
  switch (it.kind) {
    case 'text':
      return <span class="chunk">{it.text}</span>;
    case 'thought':
      return (
        <details class="ev thought">
          <summary>Thought</summary>
          {it.text}
        </details>
      );
    case 'tool':
      return <ToolCard toolKey={it.key} view={it.view} />;
    case 'permission':
      return (
        <PermissionForm
          conversationId={p.conversationId}
          requestId={it.requestId}
          tool={it.tool}
          options={it.options}
        />
      );
    case 'permission_done':
      return (
        <div class="ev stage">
          <InlineMd text={permissionOutcome(it, p.askedOptions)} />
        </div>
      );
    case 'turn':
      if (it.state === 'started') {
        return (
          <div class="ev you">
            <span class="muted small">You</span>
            <div class="prompt-text">{p.turn?.prompt ?? ''}</div>
            {p.turn && it.turnId && p.turn.images.length > 0 ? (
              <TurnImages conversationId={p.conversationId} turnId={it.turnId} images={p.turn.images} />
            ) : null}
          </div>
        );
      }
      return (
        <div class={`ev stage turn-${it.state}${it.state === 'failed' ? ' err' : ''}`} data-turn-state={it.state}>
          {it.text}
        </div>
      );
    case 'stage':
      return (
        <div class={`ev stage${it.failed ? ' err' : ''}`} data-stage={`${it.stage}/${it.state}`}>
          {it.text}
        </div>
      );
    case 'output':
      return <pre class={`ev ${it.stream === 'stderr' ? 'err' : ''}`}>{it.text}</pre>;
  }
}

/** Answered or withdrawn request ids, so a reloaded page shows no stale buttons. */
export function resolvedRequests(items: readonly Item[]): Set<string> {
  return new Set(items.flatMap((i) => (i.kind === 'permission_done' ? [i.requestId] : [])));
}
