/**
 * Turns conversation events into terminal text: streamed agent output, folded thoughts, tool calls as
 * they grow (each update merged into its call: what runs, its output, edits as diffs), and one line per stage.
 */
import { inLine } from './queue-words.ts';
import { diffLines } from '../acp/diff-lines.ts';
import {
  informative,
  inputSummary,
  outputText,
  TERMINAL_TOOL_STATUSES,
  toolLabel,
  ToolFold,
  type ToolView,
} from '../acp/tool-view.ts';
import type { LogEvent } from './schemas.ts';

/** What of a tool call the terminal already shows (lines cannot be redrawn, so only news is printed). */
interface ToolShown {
  label: string;
  input: string;
  status: string;
  readonly content: Set<string>;
  output: boolean;
}

interface AcpUpdate {
  sessionUpdate?: string;
  content?: { type?: string; text?: string };
}

const parseJson = (s: string | null | undefined): unknown => {
  if (!s) return null;
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
};

const STAGE_TEXT: Record<string, string> = {
  'provision/started': 'starting a sandbox…',
  'provision/done': 'sandbox ready',
  'sandbox/done': 'sandbox parked',
  'reattach/done': 'reconnected to the running agent',
  'connection/started': 'runner disconnected; waiting for it to come back…',
  'connection/done': 'runner back',
  'terminate/done': 'conversation terminated',
};

export class EventRenderer {
  readonly #out: (text: string) => void;
  #midLine = false;
  readonly #tools = new ToolFold();
  readonly #shown = new Map<string, ToolShown>();

  constructor(out: (text: string) => void) {
    this.#out = out;
  }

  /** Writes text as it is (a question, a list), keeping track of the open line. */
  write(text: string): void {
    this.#write(text);
  }

  #write(text: string): void {
    if (text === '') return;
    this.#out(text);
    this.#midLine = !text.endsWith('\n');
  }

  /** Ends a partial line so the next status line starts on its own. */
  newline(): void {
    if (this.#midLine) this.#write('\n');
  }

  status(text: string): void {
    this.newline();
    this.#write(`· ${text}\n`);
  }

  render(ev: LogEvent): void {
    if (ev.kind === 'stage') return this.#stage(ev);
    if (ev.stream === 'acp') return this.#acp(ev.data ?? '', ev.turn_id ?? '');
    if (ev.stream === 'stderr') return;
    this.#write(ev.data ?? '');
  }

  #stage(ev: LogEvent): void {
    const key = `${ev.stage}/${ev.state}`;
    const meta = parseJson(ev.data) as Record<string, unknown> | null;
    if (STAGE_TEXT[key]) return this.status(STAGE_TEXT[key]);
    if (ev.state === 'failed') {
      const reason = meta && typeof meta.reason === 'string' ? meta.reason : 'failed';
      return this.status(`${ev.stage} failed: ${reason}`);
    }
    if (ev.stage === 'session') {
      // A lost session (or a restart with a new credential) is said in the conversation, never silently.
      const detail = meta && typeof meta.detail === 'string' ? meta.detail : null;
      if (ev.state === 'done') return this.status(`the agent started afresh${detail ? `: ${detail}` : ''}`);
      if (meta?.event === 'load_delayed')
        return this.status("waiting for the minute to turn before reloading the agent's session…");
      return this.status(detail ? `restarting the agent: ${detail}` : 'restarting the agent…');
    }
    if (ev.stage === 'queue') {
      // The account's limits are reached: the prompt (or the new conversation) waits its turn.
      if (ev.state === 'done') return this.status('capacity freed: starting');
      const position = typeof meta?.position === 'number' ? meta.position : null;
      if (position !== null)
        return this.status(`${inLine(position)}; it starts as capacity frees (Ctrl-C leaves it waiting)`);
    }
    if (ev.stage === 'turn' && ev.state === 'interrupted') return this.status('turn interrupted');
    if (ev.stage === 'turn' && ev.state === 'done') {
      const usage = usageText(meta?.usage);
      return usage ? this.status(usage) : this.newline();
    }
  }

  #acp(line: string, turnId: string): void {
    const tool = this.#tools.applyLine(line, turnId);
    if (tool) return this.#tool(`${turnId}.${tool.view.id}`, tool.view);
    const msg = parseJson(line) as { method?: string; params?: { update?: AcpUpdate } } | null;
    const update = msg?.method === 'session/update' ? msg.params?.update : undefined;
    if (!update) return;
    const content = update.content;
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
        if (content?.type === 'text') this.#write(content.text ?? '');
        return;
      case 'agent_thought_chunk':
        if (content?.type === 'text') this.status(`thinking: ${(content.text ?? '').trim()}`);
        return;
      default:
        return;
    }
  }

  /** Prints what is new about a tool call: its name once it says what it does, then input, content and its end. */
  #tool(key: string, v: ToolView): void {
    // Claude's first tool_call says only "Terminal" with empty input: wait until the call says more.
    if (!informative(v)) return;
    let st = this.#shown.get(key);
    const label = toolLabel(v);
    if (!st) {
      st = { label, input: '', status: '', content: new Set(), output: false };
      this.#shown.set(key, st);
      const what = [v.tool_name, v.kind].filter(Boolean).join(', ');
      this.status(`tool: ${label}${what ? ` (${what})` : ''}`);
    } else if (label !== st.label) {
      st.label = label;
      this.status(`tool: ${label}`);
    }
    const input = inputSummary(v);
    if (input && input !== st.input && input !== label) {
      st.input = input;
      this.#write(indent(`$ ${input}`));
    }
    const ending = TERMINAL_TOOL_STATUSES.has(v.status) && v.status !== st.status;
    if (ending) {
      st.status = v.status;
      this.status(`tool ${v.status}`);
    }
    for (const c of v.content) {
      const sig = JSON.stringify(c);
      if (st.content.has(sig)) continue;
      st.content.add(sig);
      if (c.type === 'text') this.#write(indent(c.text));
      else if (c.type === 'terminal') this.#write(indent(`(terminal ${c.terminal_id}: its output is not reported)`));
      else if (c.type === 'other') this.#write(indent(c.summary));
      else this.#write(indent([`--- ${c.path}`, `+++ ${c.path}`, ...diffLines(c).map((l) => l.text)].join('\n')));
    }
    if (ending) {
      const out = v.content.some((c) => c.type === 'text') ? '' : outputText(v);
      if (out && !st.output) {
        st.output = true;
        this.#write(indent(out));
      }
    }
  }
}

/** A turn's or conversation's usage in one line: tokens in and out, cost when reported; null when there is none. */
export function usageText(u: unknown): string | null {
  if (!u || typeof u !== 'object') return null;
  const o = u as { input?: unknown; output?: unknown; cost?: { amount?: unknown; currency?: unknown } };
  if (typeof o.input !== 'number' || typeof o.output !== 'number') return null;
  const cost =
    o.cost && typeof o.cost.amount === 'number' && typeof o.cost.currency === 'string'
      ? ` · ${o.cost.amount} ${o.cost.currency}`
      : '';
  return `usage: ${o.input} in, ${o.output} out tokens${cost}`;
}

const indent = (text: string): string =>
  text
    .replace(/\n$/, '')
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n') + '\n';
