/**
 * Turns stored events into conversation HTML: agent text, folded thoughts, tool calls with status and
 * output, permission requests with their options as buttons, turn status and errors. Pure: rows in, JSX out.
 */
import { z } from 'zod';
import type { EventRow } from '../store/conversation-schema.ts';

/** What a row means to a reader; `null` for rows the conversation view drops (plans, command lists). */
export type Item =
  | { kind: 'text'; text: string; turnId: string | null }
  | { kind: 'thought'; text: string }
  | { kind: 'tool'; id: string; turnId: string | null; title: string; status: string; input: string | null }
  | { kind: 'tool_result'; id: string; turnId: string | null; status: string; output: string }
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

const TERMINAL_TOOL = new Set(['completed', 'failed', 'cancelled']);

function parseJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/** Text inside ACP tool content: `[{type:'content', content:{type:'text', text}}]` and friends. */
function toolOutput(content: unknown, raw: unknown): string {
  const parts: string[] = [];
  if (Array.isArray(content)) {
    for (const c of content) {
      const inner = z.object({ content: contentText }).safeParse(c);
      if (inner.success) parts.push(inner.data.content.text);
      const diff = z.object({ type: z.literal('diff'), path: z.string() }).safeParse(c);
      if (diff.success) parts.push(`(edited ${diff.data.path})`);
    }
  }
  if (parts.length === 0 && raw !== undefined) parts.push(typeof raw === 'string' ? raw : JSON.stringify(raw, null, 2));
  return parts.join('\n');
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
    case 'tool_call':
      return {
        kind: 'tool',
        id: u.toolCallId ?? '',
        turnId: row.turnId,
        title: u.title ?? u.kind ?? 'tool',
        status: u.status ?? 'pending',
        input: u.rawInput === undefined ? null : typeof u.rawInput === 'string' ? u.rawInput : JSON.stringify(u.rawInput),
      };
    case 'tool_call_update':
      if (!u.status || !TERMINAL_TOOL.has(u.status)) return null;
      return { kind: 'tool_result', id: u.toolCallId ?? '', turnId: row.turnId, status: u.status, output: toolOutput(u.content, u.rawOutput) };
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

/** The latest status of a tool call, as the badge next to its title (out-of-band when it arrives live). */
export function ToolStatus(p: { tool: { id: string; turnId: string | null }; status: string; oob?: boolean }) {
  return (
    <span id={domId('tool-status', toolKey(p.tool))} class="badge" hx-swap-oob={p.oob ? 'true' : undefined}>
      {p.status}
    </span>
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
        <div class="ev tool" data-tool-id={it.id}>
          <strong>Tool:</strong> {it.title} <ToolStatus tool={it} status={it.status} />
          {it.input ? <pre>{it.input}</pre> : null}
        </div>
      );
    case 'tool_result':
      return (
        <div class={`ev tool${it.status === 'completed' ? '' : ' err'}`} data-tool-id={it.id}>
          <span class="badge">{it.status}</span>
          {it.output ? <pre>{it.output}</pre> : null}
        </div>
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
