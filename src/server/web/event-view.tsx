/**
 * Turns stored events into conversation HTML: agent text, folded thoughts, tool calls shown as they are
 * (each merged with all its updates: title, input, output, diffs), permission requests with their options
 * as buttons, turn status and errors. Rows in, JSX out; the reader keeps only the tool calls' merged views.
 */
import { z } from 'zod';
import { diffLines, inputSummary, outputText, TERMINAL_TOOL_STATUSES, toolLabel, ToolFold, type ToolView } from '../../acp/tool-view.ts';
import type { EventRow } from '../store/conversation-schema.ts';

/** What a row means to a reader; `null` for rows the conversation view drops (plans, command lists). */
export type Item =
  | { kind: 'text'; text: string; turnId: string | null }
  | { kind: 'thought'; text: string }
  /** A tool call as merged so far; `first` marks its first appearance (later ones update it in place). */
  | { kind: 'tool'; key: string; view: ToolView; first: boolean }
  | { kind: 'permission'; requestId: string; tool: string; options: Array<{ option_id: string; name: string; kind: string }> }
  | { kind: 'permission_done'; requestId: string; tool: string | null; outcome: string; optionId: string | null }
  | { kind: 'turn'; state: string; turnId: string | null; detail: string }
  | { kind: 'stage'; stage: string; state: string; detail: string; failed: boolean }
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

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

function stageDetail(data: unknown): string {
  if (!data || typeof data !== 'object') return '';
  const d = data as Record<string, unknown>;
  const bits: string[] = [];
  for (const k of ['reason', 'stop_reason', 'message', 'outcome', 'event', 'exit_code']) {
    if (d[k] !== undefined && d[k] !== null && d[k] !== '') bits.push(`${k.replace('_', ' ')}: ${String(d[k])}`);
  }
  return bits.join(' · ');
}

/**
 * Reads a conversation's rows in order: tool lines (`tool_call`, every `tool_call_update`, the call inside a
 * permission request) merge into one view per call; everything else is interpreted on its own.
 */
export class EventReader {
  readonly #tools = new ToolFold();
  readonly #seen = new Set<string>();

  read(row: EventRow): Item | null {
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
        return p.success ? { kind: 'permission', requestId: p.data.request_id, tool: p.data.tool ?? 'a tool', options: p.data.options } : null;
      }
      const p = permissionDone.safeParse(data);
      return p.success ? { kind: 'permission_done', requestId: p.data.request_id, tool: p.data.tool ?? null, outcome: p.data.outcome ?? state, optionId: p.data.option_id ?? null } : null;
    }
    if (row.stage === 'turn') return { kind: 'turn', state, turnId: row.turnId, detail: stageDetail(data) };
    return { kind: 'stage', stage: row.stage ?? 'stage', state, detail: stageDetail(data), failed: state === 'failed' };
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

/** An element id for a tool call (its key is the turn and the agent's tool call id). */
export const toolDomId = (key: string): string => domId('tool', key);

/**
 * A tool call as it stands: what it is (title, the runtime's tool name, kind), its status, what it was
 * given, and what it produced — text, edits as unified diffs, terminals. `oob` replaces the card in place.
 */
export function ToolCard(p: { toolKey: string; view: ToolView; oob?: boolean }) {
  const v = p.view;
  const ended = TERMINAL_TOOL_STATUSES.has(v.status);
  const summary = inputSummary(v);
  const texts = v.content.some((c) => c.type === 'text');
  const output = ended && !texts ? outputText(v) : '';
  return (
    <div id={toolDomId(p.toolKey)} class={`ev tool${v.status === 'failed' || v.status === 'cancelled' ? ' err' : ''}`} data-tool-id={v.id} data-tool-status={v.status} hx-swap-oob={p.oob ? 'true' : undefined}>
      <strong>{toolLabel(v)}</strong> <span class="badge">{v.status}</span>
      {v.tool_name || v.kind ? <span class="muted small"> {[v.tool_name, v.kind].filter(Boolean).join(' · ')}</span> : null}
      {summary && summary !== toolLabel(v) ? <pre class="tool-input">{summary}</pre> : null}
      {v.content.map((c) => {
        if (c.type === 'text') return <pre class="tool-output">{c.text}</pre>;
        if (c.type === 'terminal') return <p class="muted small">Ran in terminal {c.terminal_id}; its output is not reported here.</p>;
        if (c.type === 'other') return <p class="muted small">{c.summary}</p>;
        return (
          <div class="diff" data-path={c.path}>
            <div class="small">{c.old_text === null ? `New file ${c.path}` : c.path}</div>
            <pre>
              {diffLines(c).map((l) => (
                <span class={`diff-${l.type}`}>{`${l.text}\n`}</span>
              ))}
            </pre>
          </div>
        );
      })}
      {output ? <pre class="tool-output">{output}</pre> : null}
      {ended && v.content.length === 0 && !output ? <p class="muted small">The agent reported no output.</p> : null}
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
      return <ToolCard toolKey={it.key} view={it.view} />;
    case 'permission':
      return <PermissionForm conversationId={p.conversationId} requestId={it.requestId} tool={it.tool} options={it.options} />;
    case 'permission_done':
      return <div class="ev stage">{permissionOutcome(it, p.askedOptions)}</div>;
    case 'turn':
      if (it.state === 'started') {
        return (
          <div class="ev you">
            <span class="muted small">You</span>
            <div>{p.prompt ?? ''}</div>
          </div>
        );
      }
      return (
        <div class={`ev stage turn-${it.state}${it.state === 'failed' ? ' err' : ''}`} data-turn-state={it.state}>
          Turn {it.state}
          {it.detail ? ` — ${it.detail}` : ''}
        </div>
      );
    case 'stage':
      return (
        <div class={`ev stage${it.failed ? ' err' : ''}`}>
          {it.stage} {it.state}
          {it.detail ? ` — ${it.detail}` : ''}
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
