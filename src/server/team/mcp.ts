/**
 * The team MCP server: an MCP SDK server whose zod-validated
 * tools work the team service, built for one calling teammate conversation.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import { TEAM_MCP_NAME } from '../conversations/sandbox-token.ts';
import type { TeamService, Teammate } from './service.ts';
import { isUuid } from '../http/ids.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { replyText } from '../conversations/events-store.ts';
import { recentTurns } from './store.ts';
import { LABEL_RULE, LABELS_MAX, parseLabel } from '../conversations/labels.ts';
import type { ConversationEngine } from '../conversations/engine.ts';

export const WAIT_DEFAULT_SECONDS = 60;
export const WAIT_MAX_SECONDS = 90;
/** How often a wait looks at the teammate again; a turn's end is a row change, seen within this. */
const WAIT_POLL_MS = 250;
const READ_MAX_TURNS = 20;

export interface TeamMcpContext {
  readonly db: EngineDb;
  readonly team: TeamService;
  readonly engine: ConversationEngine;
  readonly accountId: string;
  /** The calling teammate's conversation: `list_teammates` marks it `you`. */
  readonly conversationId: string;
  /** Aborts a `wait_for_teammate` when the HTTP client goes away. */
  readonly signal: AbortSignal;
  readonly logger: Logger;
}

// ---------------------------------------------------------------- tools

const AgentArg = z.object({ agent_id: z.string().describe('The teammate, by agent id (see list_teammates).') });

const TOOL_INPUTS = {
  list_teammates: z.object({}),
  get_teammate: AgentArg,
  send_to_teammate: AgentArg.extend({
    message: z.string().min(1).max(100_000).describe('The prompt the teammate receives as its next turn.'),
  }),
  wait_for_teammate: AgentArg.extend({
    timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(WAIT_MAX_SECONDS)
      .optional()
      .describe(
        `How long to wait (default ${WAIT_DEFAULT_SECONDS}, at most ${WAIT_MAX_SECONDS}); on timed_out: true, call again.`,
      ),
  }),
  read_teammate: AgentArg.extend({
    turns: z
      .number()
      .int()
      .min(1)
      .max(READ_MAX_TURNS)
      .optional()
      .describe('How many of the latest turns to return (default 1).'),
  }),
  label_conversation: z.object({
    labels: z
      .array(z.string().max(200))
      .max(LABELS_MAX)
      .optional()
      .describe('Labels to set, `key` or `key=value` (a key already there takes the new value).'),
    remove: z.array(z.string().max(100)).max(LABELS_MAX).optional().describe('Label keys to remove.'),
  }),
} as const;

type ToolName = keyof typeof TOOL_INPUTS;

const TOOL_DESCRIPTIONS: Record<ToolName, string> = {
  list_teammates:
    'Lists your teammates (yourself marked `you: true`) with their presence and the preview of their last turn.',
  get_teammate: 'One teammate: presence, current conversation, last turn and a preview of its reply.',
  send_to_teammate:
    "Sends a message to a teammate; it becomes the teammate's next turn. Fails with conversation_busy while the teammate works.",
  wait_for_teammate: `Waits until the teammate is not working (default ${WAIT_DEFAULT_SECONDS} s, at most ${WAIT_MAX_SECONDS} s). On timed_out: true it is still working: call again.`,
  read_teammate: "The teammate's latest turns: prompt, status and reply text.",
  label_conversation: `Labels your own conversation (at most ${LABELS_MAX} labels; people filter their list by them). Returns its labels after the change.`,
};

/** A tool's failure, reported to the model as an `isError` result rather than a protocol error. */
class ToolFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const busy = (t: Teammate): boolean =>
  t.conversation.status === 'pending' ||
  t.conversation.status === 'running' ||
  t.lastTurn?.status === 'pending' ||
  t.lastTurn?.status === 'running';

function summary(t: Teammate, you: string) {
  return {
    agent_id: t.agent.id,
    name: t.name,
    presence: t.presence.state,
    conversation_id: t.conversation.id,
    you: t.conversation.id === you,
    preview: t.preview,
  };
}

function detail(t: Teammate, you: string) {
  return {
    ...summary(t, you),
    description: t.agent.description,
    runtime: t.agent.runtime,
    conversation_status: t.conversation.status,
    last_turn: t.lastTurn
      ? { turn_number: t.lastTurn.turnNumber, status: t.lastTurn.status, prompt: t.lastTurn.prompt }
      : null,
  };
}

async function teammate(ctx: TeamMcpContext, agentId: string): Promise<Teammate> {
  const t = isUuid(agentId) ? await ctx.team.get(ctx.accountId, agentId) : undefined;
  if (!t)
    throw new ToolFailure('not_found', `no teammate with agent_id ${agentId}; list_teammates shows who is on the team`);
  return t;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

type ToolArgs = { [N in ToolName]: z.output<(typeof TOOL_INPUTS)[N]> };

/** Runs one tool on arguments the SDK has already checked against its input schema. */
async function callTool<N extends ToolName>(
  ctx: TeamMcpContext,
  name: N,
  args: ToolArgs[N],
): Promise<Record<string, unknown>> {
  const call = { name, args } as { [K in ToolName]: { name: K; args: ToolArgs[K] } }[ToolName];
  switch (call.name) {
    case 'list_teammates': {
      const roster = await ctx.team.roster(ctx.accountId);
      return { teammates: roster.map((t) => summary(t, ctx.conversationId)) };
    }
    case 'get_teammate': {
      const a = call.args;
      return detail(await teammate(ctx, a.agent_id), ctx.conversationId);
    }
    case 'send_to_teammate': {
      const a = call.args;
      await teammate(ctx, a.agent_id);
      const r = await ctx.team.message(ctx.accountId, a.agent_id, a.message);
      if (!r.ok) throw new ToolFailure(r.error.code, r.error.message);
      return { status: 'queued', conversation_id: r.value.conversationId };
    }
    case 'wait_for_teammate': {
      const a = call.args;
      const deadline = Date.now() + (a.timeout_seconds ?? WAIT_DEFAULT_SECONDS) * 1000;
      for (;;) {
        const t = await teammate(ctx, a.agent_id);
        const working = busy(t);
        if (!working || Date.now() >= deadline || ctx.signal.aborted)
          return { timed_out: working, ...detail(t, ctx.conversationId) };
        await sleep(Math.min(WAIT_POLL_MS, Math.max(0, deadline - Date.now())), ctx.signal);
      }
    }
    case 'read_teammate': {
      const a = call.args;
      const t = await teammate(ctx, a.agent_id);
      const turns = [];
      // The teammate's conversations newest first, each newest turn first: the latest `n` turns overall.
      const want = a.turns ?? 1;
      for (const row of t.history) {
        for (const turn of await recentTurns(ctx.db, row.conversation.id, want - turns.length)) {
          turns.push({
            conversation_id: row.conversation.id,
            turn_number: turn.turnNumber,
            status: turn.status,
            prompt: turn.prompt,
            reply: (await replyText(ctx.db, row.conversation.id, turn.id)).trim(),
          });
        }
        if (turns.length >= want) break;
      }
      return { agent_id: t.agent.id, name: t.name, presence: t.presence.state, turns };
    }
    case 'label_conversation': {
      const a = call.args;
      const add = (a.labels ?? []).map((text) => {
        const l = parseLabel(text);
        if (!l) throw new ToolFailure('invalid_label', `${JSON.stringify(text)}: ${LABEL_RULE}`);
        return l;
      });
      const r = await ctx.engine.changeLabels(ctx.accountId, ctx.conversationId, { add, remove: a.remove ?? [] });
      if (!r.ok) throw new ToolFailure(r.code, r.message);
      return { conversation_id: ctx.conversationId, labels: r.labels };
    }
  }
}

/** A tool's answer: the JSON as text for the model, and the same as structured content. */
const result = (out: Record<string, unknown>, isError: boolean): CallToolResult => ({
  content: [{ type: 'text', text: JSON.stringify(out) }],
  structuredContent: out,
  isError,
});

/**
 * The server for one request. Tool failures are tool results with `isError`, so the model can read
 * and act on them; an unexpected error is logged and reported without its details.
 */
export function teamMcpServer(ctx: TeamMcpContext): McpServer {
  const server = new McpServer(
    { name: TEAM_MCP_NAME, version: '1.0.0' },
    {
      instructions:
        'Work with your teammates: list them, message one, wait for its turn to end, then read its reply. Label your own conversation so people can find it.',
    },
  );
  for (const name of Object.keys(TOOL_INPUTS) as ToolName[]) {
    const inputSchema: z.ZodType<Record<string, unknown>> = TOOL_INPUTS[name];
    server.registerTool(name, { description: TOOL_DESCRIPTIONS[name], inputSchema }, async (args, extra) => {
      const signal = AbortSignal.any([ctx.signal, extra.signal]);
      try {
        return result(await callTool({ ...ctx, signal }, name, args as ToolArgs[typeof name]), false);
      } catch (e) {
        if (e instanceof ToolFailure) return result({ error: e.code, message: e.message }, true);
        ctx.logger.error({ err: e, tool: name }, 'team MCP tool failed');
        return result({ error: 'internal_error', message: `${name} failed on the server` }, true);
      }
    });
  }
  return server;
}
