/**
 * Turns conversation events into terminal text: streamed agent output, folded thoughts,
 * tool calls with their status, and one line per lifecycle stage.
 */
import type { LogEvent } from './schemas.ts';

interface AcpUpdate {
  sessionUpdate?: string;
  content?: { type?: string; text?: string } | Array<{ type?: string; content?: { type?: string; text?: string } }>;
  title?: string;
  status?: string;
  toolCallId?: string;
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
    if (ev.stream === 'acp') return this.#acp(ev.data ?? '');
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
    if (ev.stage === 'turn' && ev.state === 'interrupted') return this.status('turn interrupted');
    if (ev.stage === 'turn' && ev.state === 'done') return this.newline();
  }

  #acp(line: string): void {
    const msg = parseJson(line) as { method?: string; params?: { update?: AcpUpdate } } | null;
    const update = msg?.method === 'session/update' ? msg.params?.update : undefined;
    if (!update) return;
    const content = update.content;
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
        if (content && !Array.isArray(content) && content.type === 'text') this.#write(content.text ?? '');
        return;
      case 'agent_thought_chunk':
        if (content && !Array.isArray(content) && content.type === 'text') this.status(`thinking: ${(content.text ?? '').trim()}`);
        return;
      case 'tool_call':
        return this.status(`tool: ${update.title ?? update.toolCallId ?? 'call'}${update.status ? ` (${update.status})` : ''}`);
      case 'tool_call_update': {
        if (!update.status || !['completed', 'failed', 'cancelled'].includes(update.status)) return;
        this.status(`tool ${update.status}`);
        if (Array.isArray(content)) {
          for (const c of content) if (c.content?.type === 'text' && c.content.text) this.#write(indent(c.content.text));
          this.newline();
        }
        return;
      }
      default:
        return;
    }
  }
}

const indent = (text: string): string =>
  text
    .replace(/\n$/, '')
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n') + '\n';
