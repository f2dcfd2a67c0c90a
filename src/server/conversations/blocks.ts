/**
 * Blocks, derived on read from stored events: agent text, thoughts, and tool
 * calls shown as they are — each tool event carries its call's view merged with every update so far.
 */
import { z } from 'zod';
import {
  inputSummary,
  outputText,
  TERMINAL_TOOL_STATUSES,
  toolLabel,
  ToolFold,
  type ToolView,
} from '../../acp/tool-view.ts';
import type { EventRow } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { toolLinesBefore } from './events-store.ts';

export type Block =
  | { kind: 'text'; body: string }
  | { kind: 'thinking'; body: string }
  /** The call's first appearance (a `tool_call`, or a permission request naming a call not seen before). */
  | { kind: 'tool_use'; id: string; name: string; summary: string; body: unknown; tool: ToolView }
  /** An update that did not end the call (title, input, content, status pending/in_progress). */
  | { kind: 'tool_update'; id: string; name: string; summary: string; tool: ToolView }
  /** An update that ended the call: completed, failed or cancelled. */
  | { kind: 'tool_result'; tool_id: string; body: string; error: boolean; tool: ToolView }
  | { kind: 'raw'; body: string; summary: string };

const zChunk = z.object({
  method: z.literal('session/update'),
  params: z.object({
    update: z.object({
      sessionUpdate: z.enum(['agent_message_chunk', 'agent_thought_chunk']),
      content: z.object({ type: z.literal('text'), text: z.string() }),
    }),
  }),
});

function parse(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

/** Derives blocks event by event; feed it a turn's earlier tool events first (`prime`) to page from the middle. */
export class BlockDeriver {
  readonly #tools = new ToolFold();
  readonly #seen = new Set<string>();

  /** Remembers what earlier events said about tool calls, producing nothing. */
  prime(rows: Iterable<EventRow>): void {
    for (const r of rows) this.blocks(r);
  }

  blocks(row: EventRow): Block[] {
    if (row.kind !== 'output') return [];
    if (row.stream !== 'acp') return row.data === '' ? [] : [{ kind: 'raw', body: row.data, summary: row.stream }];
    const chunk = zChunk.safeParse(parse(row.data));
    if (chunk.success) {
      const u = chunk.data.params.update;
      return [{ kind: u.sessionUpdate === 'agent_message_chunk' ? 'text' : 'thinking', body: u.content.text }];
    }
    const scope = row.turnId ?? '';
    const hit = this.#tools.applyLine(row.data, scope);
    if (!hit) return [];
    const v = hit.view;
    const key = `${scope}\u0000${v.id}`;
    const first = !this.#seen.has(key);
    this.#seen.add(key);
    if (first)
      return [
        {
          kind: 'tool_use',
          id: v.id,
          name: toolLabel(v),
          summary: inputSummary(v),
          body: v.raw_input ?? null,
          tool: v,
        },
      ];
    if (hit.origin === 'tool_call_update' && TERMINAL_TOOL_STATUSES.has(v.status)) {
      return [{ kind: 'tool_result', tool_id: v.id, body: outputText(v), error: v.status !== 'completed', tool: v }];
    }
    return [{ kind: 'tool_update', id: v.id, name: toolLabel(v), summary: inputSummary(v), tool: v }];
  }
}

/** A deriver ready for events from `firstId` on: the turns those events belong to are primed with their earlier tool lines. */
export async function deriverFor(
  db: EngineDb,
  conversationId: string,
  rows: readonly EventRow[],
): Promise<BlockDeriver> {
  const d = new BlockDeriver();
  const first = rows[0];
  if (!first) return d;
  const turnIds = [...new Set(rows.flatMap((r) => (r.turnId ? [r.turnId] : [])))];
  d.prime(await toolLinesBefore(db, conversationId, turnIds, first.id));
  return d;
}
