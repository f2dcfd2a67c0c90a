/**
 * The scripted model every local model-API server plays: a prompt carrying `RUN: <command>` is
 * answered with one shell tool call, the tool's result with text naming its output, `RECALL` with
 * what the earlier turns of the conversation asked to run (proof that history survived a wake).
 */

/** A conversation as the model sees it, whatever the wire format. */
export type Entry = { readonly role: 'user' | 'assistant'; readonly text: string } | { readonly role: 'tool_result'; readonly text: string };

export type Step = { readonly kind: 'tool'; readonly command: string } | { readonly kind: 'text'; readonly text: string };

export const FINAL_PREFIX = 'The command ran. Its output:';
export const RECALL_PREFIX = 'Earlier you asked me to run:';
export const NOTHING_RECALLED = 'I remember no earlier command.';

const RUN = /RUN: ([^\n<]+)/;

export function nextStep(entries: readonly Entry[]): Step {
  const last = entries[entries.length - 1];
  if (!last) return { kind: 'text', text: 'Hello.' };
  if (last.role === 'tool_result') {
    const out = last.text.trim().split('\n').slice(-3).join(' ').slice(0, 300);
    return { kind: 'text', text: `${FINAL_PREFIX} ${out}` };
  }
  if (last.role === 'user') {
    // Agents add context messages of their own (environment, instructions) beside the prompt.
    let i = entries.length - 1;
    while (i > 0 && entries[i - 1]!.role === 'user') i--;
    const tail = entries.slice(i).map((e) => e.text).join('\n');
    const run = RUN.exec(tail);
    if (run) return { kind: 'tool', command: run[1]!.trim() };
    if (tail.includes('RECALL')) {
      const earlier = entries.slice(0, i).map((e) => (e.role === 'user' ? RUN.exec(e.text)?.[1]?.trim() : undefined)).filter((c): c is string => !!c);
      return { kind: 'text', text: earlier.length ? `${RECALL_PREFIX} ${earlier.join('; ')}` : NOTHING_RECALLED };
    }
  }
  return { kind: 'text', text: 'Hello from the local model.' };
}
