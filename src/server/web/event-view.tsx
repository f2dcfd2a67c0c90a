/**
 * Turns stored events into conversation HTML: agent text, folded thoughts, tool calls as cards (command,
 * status, folded output, diffs), permission requests with their options as buttons, turn status and errors
 * in words. Pure: rows in, JSX out.
 */
import { raw } from 'hono/html';
import { structuredPatch } from 'diff';
import { stringify } from 'yaml';
import { z } from 'zod';
import type { EventRow } from '../store/conversation-schema.ts';
import { renderAgentMarkdown } from './markdown.ts';
import { stageInWords, turnInWords } from './words.ts';

/** What a tool call carries: text, a file edit, or a terminal the agent ran something in. */
export type ToolBlock = { type: 'text'; text: string } | { type: 'diff'; path: string; oldText: string | null; newText: string } | { type: 'terminal'; terminalId: string };

/** What a row means to a reader; `null` for rows the conversation view drops (plans, command lists). */
export type Item =
  | { kind: 'text'; text: string; turnId: string | null }
  | { kind: 'thought'; text: string }
  | { kind: 'tool'; id: string; turnId: string | null; title: string; toolKind: string | null; status: string; command: string | null; input: string | null; blocks: ToolBlock[] }
  | { kind: 'tool_result'; id: string; turnId: string | null; status: string; blocks: ToolBlock[] }
  | { kind: 'permission'; requestId: string; tool: string; options: Array<{ option_id: string; name: string; kind: string }> }
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
        toolCallId: z.string().optional(),
        title: z.string().nullish(),
        kind: z.string().nullish(),
        status: z.string().nullish(),
        rawInput: z.unknown().optional(),
        rawOutput: z.unknown().optional(),
      })
      .passthrough(),
  }),
});
const permissionStarted = z.object({
  request_id: z.string(),
  tool: z.string().nullish(),
  options: z.array(z.object({ option_id: z.string(), name: z.string(), kind: z.string() })),
});
const permissionDone = z.object({ request_id: z.string(), tool: z.string().nullish(), outcome: z.string().optional(), option_id: z.string().nullish() });

const TERMINAL_TOOL = new Set(['completed', 'failed', 'cancelled']);

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

const toolContent = z.array(z.unknown());
const contentBlock = z.object({ type: z.literal('content'), content: contentText });
const diffBlock = z.object({ type: z.literal('diff'), path: z.string(), oldText: z.string().nullish(), newText: z.string() });
const terminalBlock = z.object({ type: z.literal('terminal'), terminalId: z.string() });

/** ACP tool content blocks as ToolBlocks; `raw` (rawOutput) stands in when there are none. */
function toolBlocks(content: unknown, raw: unknown): ToolBlock[] {
  const out: ToolBlock[] = [];
  const list = toolContent.safeParse(content);
  for (const c of list.success ? list.data : []) {
    const text = contentBlock.safeParse(c);
    if (text.success) out.push({ type: 'text', text: text.data.content.text });
    const diff = diffBlock.safeParse(c);
    if (diff.success) out.push({ type: 'diff', path: diff.data.path, oldText: diff.data.oldText ?? null, newText: diff.data.newText });
    const term = terminalBlock.safeParse(c);
    if (term.success) out.push({ type: 'terminal', terminalId: term.data.terminalId });
  }
  if (out.length === 0 && raw !== undefined && raw !== null) out.push({ type: 'text', text: readable(raw) });
  return out;
}

/** Structured values as YAML, which reads as "key: value" lines rather than JSON punctuation. */
const readable = (v: unknown): string => (typeof v === 'string' ? v : stringify(v, { lineWidth: 0 }).trimEnd());

const commandInput = z.object({ command: z.union([z.string(), z.array(z.string())]) }).loose();

/** A shell command the tool runs, when its input has one; the rest of the input, readable. */
function toolInput(rawInput: unknown): { command: string | null; input: string | null } {
  if (rawInput === undefined || rawInput === null) return { command: null, input: null };
  const cmd = commandInput.safeParse(rawInput);
  if (cmd.success) {
    const { command, ...rest } = cmd.data;
    const others = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined && v !== null && v !== ''));
    return { command: Array.isArray(command) ? command.join(' ') : command, input: Object.keys(others).length ? readable(others) : null };
  }
  if (typeof rawInput === 'object' && Object.keys(rawInput).length === 0) return { command: null, input: null };
  return { command: null, input: readable(rawInput) };
}

export function interpret(row: EventRow): Item | null {
  if (row.kind === 'stage') {
    const data = parseJson(row.data);
    const state = row.state ?? '';
    if (row.stage === 'permission' || row.stage === 'request') {
      if (state === 'started') {
        const p = permissionStarted.safeParse(data);
        return p.success ? { kind: 'permission', requestId: p.data.request_id, tool: p.data.tool ?? 'a tool', options: p.data.options } : null;
      }
      const p = permissionDone.safeParse(data);
      return p.success ? { kind: 'permission_done', requestId: p.data.request_id, tool: p.data.tool ?? null, outcome: p.data.outcome ?? state, optionId: p.data.option_id ?? null } : null;
    }
    if (row.stage === 'turn') return { kind: 'turn', state, turnId: row.turnId, text: turnInWords(state, data) };
    return { kind: 'stage', stage: row.stage ?? 'stage', state, text: stageInWords(row.stage ?? '', state, data), failed: state === 'failed' };
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
    case 'tool_call':
      return {
        kind: 'tool',
        id: u.toolCallId ?? '',
        turnId: row.turnId,
        title: u.title ?? u.kind ?? 'tool',
        toolKind: u.kind ?? null,
        status: u.status ?? 'pending',
        ...toolInput(u.rawInput),
        blocks: toolBlocks(u.content, undefined),
      };
    case 'tool_call_update':
      if (!u.status || !TERMINAL_TOOL.has(u.status)) return null;
      return { kind: 'tool_result', id: u.toolCallId ?? '', turnId: row.turnId, status: u.status, blocks: toolBlocks(u.content, u.rawOutput) };
    default:
      return null;
  }
}

type PermissionOption = { option_id: string; name: string; kind: string };

/** An element id from an agent-chosen id (request ids carry dots, tool ids anything). */
const domId = (prefix: string, id: string): string => `${prefix}-${id.replace(/[^a-zA-Z0-9_-]/g, '_')}`;
const permissionDomId = (requestId: string): string => domId('perm', requestId);
/** A tool call within its turn: an agent may number its calls afresh in each session, so the id alone can repeat. */
export const toolKey = (it: { id: string; turnId: string | null }): string => `${it.turnId ?? '-'}.${it.id}`;

export function PermissionForm(p: { conversationId: string; requestId: string; tool: string; options: PermissionOption[] }) {
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
        <strong>Permission requested:</strong> {p.tool}
      </p>
      <div class="row">
        {p.options.map((o) => (
          <button type="submit" name="option_id" value={o.option_id} class={o.kind.startsWith('reject') ? 'danger' : ''}>
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
      Permission requested: {p.tool}
    </div>
  );
}

const TOOL_STATUS_WORDS: Readonly<Record<string, string>> = { pending: 'waiting', in_progress: 'running', completed: 'done', failed: 'failed', cancelled: 'cancelled' };

/** The latest status of a tool call, as the badge next to its title (out-of-band when it arrives live). */
export function ToolStatus(p: { tool: { id: string; turnId: string | null }; status: string; oob?: boolean }) {
  return (
    <span id={domId('tool-status', toolKey(p.tool))} class={`badge tool-${p.status}`} data-status={p.status} hx-swap-oob={p.oob ? 'true' : undefined}>
      {TOOL_STATUS_WORDS[p.status] ?? p.status}
    </span>
  );
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
function DiffView(p: { path: string; oldText: string | null; newText: string }) {
  const patch = structuredPatch(p.path, p.path, p.oldText ?? '', p.newText, '', '', { context: 3 });
  return (
    <div class="diff">
      <div class="diff-path">{p.oldText === null ? `New file ${p.path}` : p.path}</div>
      <pre>
        {patch.hunks.map((h) => (
          <>
            <span class="hunk">{`@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`}</span>
            {'\n'}
            {h.lines.map((l) => (
              <>
                <span class={l.startsWith('+') ? 'add' : l.startsWith('-') ? 'del' : 'ctx'}>{l}</span>
                {'\n'}
              </>
            ))}
          </>
        ))}
      </pre>
    </div>
  );
}

function Blocks(p: { blocks: readonly ToolBlock[] }) {
  return (
    <>
      {p.blocks.map((b) =>
        b.type === 'text' ? <FoldedText text={b.text} /> : b.type === 'diff' ? <DiffView path={b.path} oldText={b.oldText} newText={b.newText} /> : <p class="small muted">Ran in a terminal ({b.terminalId})</p>,
      )}
    </>
  );
}

/** What kind of tool it is, in a word, from ACP's tool kinds. */
const TOOL_KIND_WORDS: Readonly<Record<string, string>> = { read: 'Read', edit: 'Edit', delete: 'Delete', move: 'Move', search: 'Search', execute: 'Run', think: 'Think', fetch: 'Fetch', switch_mode: 'Mode' };

/** Agent text as Markdown (sanitised: markdown-it with raw HTML off). */
export function AgentText(p: { text: string; id?: string; oob?: boolean }) {
  return (
    <div class="ev text md" id={p.id} hx-swap-oob={p.oob ? 'true' : undefined}>
      {raw(renderAgentMarkdown(p.text))}
    </div>
  );
}

/** How a permission request ended, in words; option names come from the request when it is known. */
export function permissionOutcome(it: Extract<Item, { kind: 'permission_done' }>, options: readonly PermissionOption[] | undefined): string {
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
export function ItemView(p: { item: Item; conversationId: string; prompt?: string | undefined; askedOptions?: readonly PermissionOption[] | undefined }) {
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
      return (
        <details class="ev tool" data-tool-id={it.id} open>
          <summary>
            <span class="tool-kind">{TOOL_KIND_WORDS[it.toolKind ?? ''] ?? 'Tool'}</span> <span class="tool-title">{it.title}</span> <ToolStatus tool={it} status={it.status} />
          </summary>
          {it.command ? <pre class="cmd">$ {it.command}</pre> : null}
          {it.input ? <pre class="input">{it.input}</pre> : null}
          <Blocks blocks={it.blocks} />
        </details>
      );
    case 'tool_result':
      if (it.blocks.length === 0) {
        return (
          <div class={`ev tool-out small muted${it.status === 'completed' ? '' : ' err'}`} data-tool-id={it.id}>
            {it.status === 'completed' ? 'No output' : `Tool ${TOOL_STATUS_WORDS[it.status] ?? it.status}`}
          </div>
        );
      }
      return (
        <details class={`ev tool-out${it.status === 'completed' ? '' : ' err'}`} data-tool-id={it.id} open>
          <summary class="small">{it.status === 'completed' ? 'Output' : `Output (${TOOL_STATUS_WORDS[it.status] ?? it.status})`}</summary>
          <Blocks blocks={it.blocks} />
        </details>
      );
    case 'permission':
      return <PermissionForm conversationId={p.conversationId} requestId={it.requestId} tool={it.tool} options={it.options} />;
    case 'permission_done':
      return <div class="ev stage">{permissionOutcome(it, p.askedOptions)}</div>;
    case 'turn':
      if (it.state === 'started') {
        return (
          <div class="ev you">
            <span class="muted small">You</span>
            <div class="prompt-text">{p.prompt ?? ''}</div>
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
