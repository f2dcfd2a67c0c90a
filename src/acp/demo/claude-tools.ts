/**
 * The demo agent's Claude-shaped tools: `bash:` and `edit:` send their tool calls the way
 * claude-agent-acp does — an empty first `tool_call` named only in `_meta.claudeCode.toolName`, the details
 * in `tool_call_update`s, a permission request without kind or tool name, edits as diffs — so every client
 * view is tested against the shape real Claude sends.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type {
  PermissionOption,
  RequestPermissionOutcome,
  SessionUpdate,
  ToolCallUpdate,
} from '@agentclientprotocol/sdk';
import { runShell } from './shell.ts';

export interface ToolContext {
  readonly cwd: string;
  readonly signal: AbortSignal;
  update(u: SessionUpdate): Promise<void>;
  askPermission(toolCall: ToolCallUpdate, options: PermissionOption[]): Promise<RequestPermissionOutcome>;
}

export interface ToolOutcome {
  readonly cancelled: boolean;
  readonly answer: string;
}

/** Claude Code's three answers, "always" first as Claude offers them. */
export const CLAUDE_OPTIONS: PermissionOption[] = [
  { optionId: 'allow_always', name: 'Always Allow', kind: 'allow_always' },
  { optionId: 'allow', name: 'Allow', kind: 'allow_once' },
  { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
];

const meta = (toolName: string) => ({ claudeCode: { toolName } });

/** `edit: <path> :: <old> => <new>` */
export function parseEdit(spec: string): { path: string; oldText: string; newText: string } | null {
  const m = /^(\S+)\s*::\s*([\s\S]*?)\s*=>\s*([\s\S]*)$/.exec(spec.trim());
  return m ? { path: m[1]!, oldText: m[2]!, newText: m[3]! } : null;
}

async function allowed(
  ctx: ToolContext,
  toolCallId: string,
  toolCall: Omit<ToolCallUpdate, 'toolCallId'>,
): Promise<'yes' | 'no' | 'cancelled'> {
  const decision = await ctx.askPermission({ toolCallId, ...toolCall }, CLAUDE_OPTIONS);
  if (decision.outcome === 'cancelled' || ctx.signal.aborted) return 'cancelled';
  return decision.optionId === 'reject' ? 'no' : 'yes';
}

/** `bash: <command>`: Claude's Bash tool. Nothing is sent while the command runs. */
export async function claudeBash(ctx: ToolContext, toolCallId: string, command: string): Promise<ToolOutcome> {
  await ctx.update({
    sessionUpdate: 'tool_call',
    toolCallId,
    title: 'Terminal',
    kind: 'execute',
    status: 'pending',
    rawInput: {},
    content: [],
    _meta: meta('Bash'),
  });
  const rawInput = { command, description: `Run ${command}` };
  await ctx.update({ sessionUpdate: 'tool_call_update', toolCallId, title: command, rawInput, _meta: meta('Bash') });
  const ok = await allowed(ctx, toolCallId, { title: command, rawInput });
  if (ok === 'cancelled') {
    await ctx.update({ sessionUpdate: 'tool_call_update', toolCallId, status: 'failed', _meta: meta('Bash') });
    return { cancelled: true, answer: '' };
  }
  if (ok === 'no') {
    await ctx.update({
      sessionUpdate: 'tool_call_update',
      toolCallId,
      status: 'failed',
      content: [
        { type: 'content', content: { type: 'text', text: "The user doesn't want to proceed with this tool use." } },
      ],
      _meta: meta('Bash'),
    });
    return { cancelled: false, answer: `You did not allow it, so I did not run \`${command}\`.` };
  }
  const r = await runShell(command, ctx.cwd, ctx.signal);
  if (r.aborted) return { cancelled: true, answer: '' };
  await ctx.update({
    sessionUpdate: 'tool_call_update',
    toolCallId,
    status: r.exitCode === 0 ? 'completed' : 'failed',
    content: [{ type: 'content', content: { type: 'text', text: `\`\`\`console\n${r.output.trimEnd()}\n\`\`\`` } }],
    rawOutput: { stdout: r.output, stderr: '', interrupted: false, exitCode: r.exitCode },
    _meta: meta('Bash'),
  });
  return { cancelled: false, answer: `Ran \`${command}\` (exit ${r.exitCode ?? 'none'}).` };
}

/** `edit: <path> :: <old> => <new>`: Claude's Edit tool, shown as diffs before and after it runs. */
export async function claudeEdit(ctx: ToolContext, toolCallId: string, spec: string): Promise<ToolOutcome> {
  const e = parseEdit(spec);
  if (!e) return { cancelled: false, answer: 'Write it as `edit: <path> :: <old text> => <new text>`.' };
  const path = isAbsolute(e.path) ? e.path : join(ctx.cwd, e.path);
  await ctx.update({
    sessionUpdate: 'tool_call',
    toolCallId,
    title: 'Edit',
    kind: 'edit',
    status: 'pending',
    rawInput: {},
    content: [],
    locations: [],
    _meta: meta('Edit'),
  });
  await ctx.update({
    sessionUpdate: 'tool_call_update',
    toolCallId,
    title: `Edit ${e.path}`,
    locations: [{ path }],
    _meta: meta('Edit'),
  });
  const rawInput = { file_path: path, old_string: e.oldText, new_string: e.newText };
  await ctx.update({
    sessionUpdate: 'tool_call_update',
    toolCallId,
    rawInput,
    content: [{ type: 'diff', path, oldText: e.oldText, newText: e.newText }],
    _meta: meta('Edit'),
  });
  const ok = await allowed(ctx, toolCallId, {
    title: `Edit ${e.path}`,
    rawInput,
    content: [{ type: 'diff', path, oldText: e.oldText, newText: e.newText }],
  });
  if (ok !== 'yes') {
    await ctx.update({ sessionUpdate: 'tool_call_update', toolCallId, status: 'failed', _meta: meta('Edit') });
    return {
      cancelled: ok === 'cancelled',
      answer: ok === 'no' ? `You did not allow it, so ${e.path} is unchanged.` : '',
    };
  }
  let before: string;
  try {
    before = await readFile(path, 'utf8');
  } catch {
    before = '';
  }
  if (before !== '' && !before.includes(e.oldText)) {
    await ctx.update({
      sessionUpdate: 'tool_call_update',
      toolCallId,
      status: 'failed',
      rawOutput: `String to replace not found in file.`,
      _meta: meta('Edit'),
    });
    return { cancelled: false, answer: `${e.path} does not contain that text.` };
  }
  const after = before === '' ? e.newText : before.replace(e.oldText, e.newText);
  await writeFile(path, after, 'utf8');
  await ctx.update({
    sessionUpdate: 'tool_call_update',
    toolCallId,
    status: 'completed',
    rawOutput: `The file ${path} has been updated successfully.`,
    _meta: meta('Edit'),
  });
  await ctx.update({
    sessionUpdate: 'tool_call_update',
    toolCallId,
    content: [{ type: 'diff', path, oldText: before === '' ? null : before, newText: after }],
    locations: [{ path, line: 1 }],
  });
  return { cancelled: false, answer: `Edited ${e.path}.` };
}
