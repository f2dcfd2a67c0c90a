/**
 * The scripted model every local model-API server plays: a prompt carrying `RUN: <command>` is
 * answered with one shell tool call, the tool's result with text naming its output, `RECALL` with
 * what the earlier turns of the conversation asked to run (proof that history survived a wake),
 * `MCP: <word>` with a call to each offered MCP probe tool in turn, then text naming their answers;
 * `WRITE: <absolute path> :: <text>` with one call to the runtime's file-writing tool (Claude Code's `Write`).
 */

/** A conversation as the model sees it, whatever the wire format. */
export type Entry =
  | { readonly role: 'user' | 'assistant'; readonly text: string }
  | { readonly role: 'tool_result'; readonly text: string };

export type Step =
  | { readonly kind: 'tool'; readonly command: string }
  | { readonly kind: 'text'; readonly text: string }
  /** A call to a tool other than the shell, by the exact name the runtime offered it under. */
  | { readonly kind: 'call'; readonly tool: string; readonly args: Record<string, unknown> };

export const FINAL_PREFIX = 'The command ran. Its output:';
export const RECALL_PREFIX = 'Earlier you asked me to run:';
export const NOTHING_RECALLED = 'I remember no earlier command.';
export const MCP_PREFIX = 'The MCP tools answered:';
/** The tools `MCP:` calls, in order, found by this part of the name the runtime gives them (each prefixes it its own way). */
export const MCP_PROBE_TOOLS = ['fountain_stdio_probe', 'fountain_http_probe'] as const;

const RUN = /RUN: ([^\n<]+)/;
const MCP = /MCP: ([A-Za-z0-9-]+)/;
const WRITE = /WRITE: (\/[^\s<]+) :: ([^\n<]+)/;
/** A transcript Fountain put before the prompt for an agent that lost its session: history, not the request. */
const HISTORY = /<fountain-history>[\s\S]*?<\/fountain-history>/g;
const withoutHistory = (text: string) => text.replace(HISTORY, '');
const carriedCommands = (text: string) =>
  [...text.matchAll(HISTORY)].flatMap((m) => [...m[0].matchAll(new RegExp(RUN.source, 'g'))].map((r) => r[1]!.trim()));

/** `MCP: <word>`: one call per probe tool offered (whatever each call returned), then the answers in words. */
function mcpStep(word: string, after: readonly Entry[], tools: readonly string[]): Step {
  const offered = MCP_PROBE_TOOLS.map((p) => tools.find((t) => t.includes(p))).filter((t): t is string => !!t);
  const results = after
    .filter((e) => e.role === 'tool_result')
    .map((e) => e.text.replace(/\s+/g, ' ').trim().slice(0, 200));
  const next = offered[results.length];
  if (next) return { kind: 'call', tool: next, args: { text: word } };
  return { kind: 'text', text: `${MCP_PREFIX} ${results.join(' | ') || `none; offered tools: ${tools.join(', ')}`}` };
}

export function nextStep(entries: readonly Entry[], tools: readonly string[] = []): Step {
  const last = entries[entries.length - 1];
  if (!last) return { kind: 'text', text: 'Hello.' };
  let u = entries.length - 1;
  while (u > 0 && entries[u]!.role !== 'user') u--;
  let start = u;
  while (start > 0 && entries[start - 1]!.role === 'user') start--;
  const prompt = withoutHistory(
    entries
      .slice(start, u + 1)
      .filter((e) => e.role === 'user')
      .map((e) => e.text)
      .join('\n'),
  );
  const mcp = MCP.exec(prompt);
  if (mcp) return mcpStep(mcp[1]!, entries.slice(u + 1), tools);
  if (last.role === 'tool_result') {
    const out = last.text.trim().split('\n').slice(-3).join(' ').slice(0, 300);
    return { kind: 'text', text: `${FINAL_PREFIX} ${out}` };
  }
  if (last.role === 'user') {
    // Agents add context messages of their own (environment, instructions) beside the prompt.
    let i = entries.length - 1;
    while (i > 0 && entries[i - 1]!.role === 'user') i--;
    const whole = entries
      .slice(i)
      .map((e) => e.text)
      .join('\n');
    const tail = withoutHistory(whole);
    const run = RUN.exec(tail);
    if (run) return { kind: 'tool', command: run[1]!.trim() };
    const write = WRITE.exec(tail);
    if (write && tools.includes('Write'))
      return { kind: 'call', tool: 'Write', args: { file_path: write[1]!, content: `${write[2]!.trim()}\n` } };
    if (tail.includes('RECALL')) {
      const earlier = [
        ...carriedCommands(whole),
        ...entries
          .slice(0, i)
          .flatMap((e) =>
            e.role === 'user' ? [...carriedCommands(e.text), RUN.exec(withoutHistory(e.text))?.[1]?.trim()] : [],
          )
          .filter((c): c is string => !!c),
      ];
      return { kind: 'text', text: earlier.length ? `${RECALL_PREFIX} ${earlier.join('; ')}` : NOTHING_RECALLED };
    }
  }
  return { kind: 'text', text: 'Hello from the local model.' };
}

/** How a step is logged on the model API's record. */
export function answered(step: Step): string {
  return step.kind === 'tool'
    ? `tool:${step.command}`
    : step.kind === 'call'
      ? `call:${step.tool}`
      : `text:${step.text}`;
}
