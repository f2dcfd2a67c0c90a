/**
 * The `demo` runtime: a real ACP agent built on the SDK's agent side, with no model and no network.
 * It answers deterministically: `run: <cmd>` (asks permission, then runs it), `bash: <cmd>` and
 * `edit: <path> :: <old> => <new>` (the same, shaped as Claude Code sends them), `remember: <text>`, `recall`,
 * `slow: <n> [<ms>ms] [stamped]` (n numbered lines, one chunk each, paced; stamped: each carries the wall-clock
 * time it was written, for latency benchmarks), `mcp servers` (what the session got), else an echo.
 * Each turn reports usage (a `usage_update` and the reply's `usage`, counted in words) and the first one titles the session.
 *
 * Over 400 lines because it is one table of deterministic demo commands and their answers; it has
 * not been split yet.
 */
import { demoTakesImages, describeImages } from './images.ts';
import { randomUUID } from 'node:crypto';
import { gist } from './gist.ts';
import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import type { AgentContext, ContentBlock, McpServer, SessionUpdate, StopReason } from '@agentclientprotocol/sdk';
import { DemoStore } from './store.ts';
import { killAllShells, runShell } from './shell.ts';
import { claudeBash, claudeEdit, type ToolContext } from './claude-tools.ts';

export const DEMO_AGENT_VERSION = '1.0.0';
const WORDS_PER_CHUNK = 4;
/** `slow:` bounds: enough output to cut a connection in the middle of, never an endless turn. */
const SLOW_MAX_CHUNKS = 10_000;
const SLOW_MAX_EVERY_MS = 10_000;
const SLOW_DEFAULT_EVERY_MS = 100;

export interface DemoAgentOptions {
  /** Where memory and session history live (the agent's HOME). */
  readonly home: string;
  /** Diagnostics go here, never to stdout (stdout carries only ACP). */
  readonly log?: (line: string) => void;
}

interface DemoSession {
  readonly cwd: string;
  /** What session/new or session/load brought, for `mcp servers`. */
  readonly mcpServers: readonly McpServer[];
  abort: AbortController | null;
  /** Whether the session has a title yet (a loaded one has). */
  titled: boolean;
  /** Words in and out so far: the context window `usage_update` reports, and what its cost is counted from. */
  used: number;
}

/** The demo's price list: a micro-dollar per word, so usage and cost are checkable numbers. */
const DEMO_CONTEXT_SIZE = 200_000;
const DEMO_USD_PER_WORD = 0.000001;
const words = (text: string): number => (text.match(/\S+/g) ?? []).length;

type Intent =
  | { readonly kind: 'run'; readonly command: string }
  | { readonly kind: 'bash'; readonly command: string }
  | { readonly kind: 'edit'; readonly spec: string }
  | { readonly kind: 'remember'; readonly text: string }
  | { readonly kind: 'recall' }
  | { readonly kind: 'mcp' }
  | { readonly kind: 'slow'; readonly chunks: number; readonly everyMs: number; readonly stamped: boolean }
  | { readonly kind: 'echo'; readonly text: string };

export function parseIntent(text: string): Intent {
  const t = text.trim();
  const run = /^run:\s*([\s\S]+)$/i.exec(t);
  if (run?.[1]) return { kind: 'run', command: run[1].trim() };
  const bash = /^bash:\s*([\s\S]+)$/i.exec(t);
  if (bash?.[1]) return { kind: 'bash', command: bash[1].trim() };
  const edit = /^edit:\s*([\s\S]+)$/i.exec(t);
  if (edit?.[1]) return { kind: 'edit', spec: edit[1].trim() };
  const remember = /^remember:\s*([\s\S]+)$/i.exec(t);
  if (remember?.[1]) return { kind: 'remember', text: remember[1].trim() };
  if (/^recall\b/i.test(t) || /what do you remember/i.test(t)) return { kind: 'recall' };
  if (/^mcp servers\b/i.test(t)) return { kind: 'mcp' };
  const slow = /^slow:\s*(\d{1,6})(?:\s+(\d{1,6})\s*ms)?(\s+stamped)?$/i.exec(t);
  if (slow?.[1]) {
    const chunks = Math.min(Number(slow[1]), SLOW_MAX_CHUNKS);
    const everyMs = Math.min(slow[2] === undefined ? SLOW_DEFAULT_EVERY_MS : Number(slow[2]), SLOW_MAX_EVERY_MS);
    return { kind: 'slow', chunks, everyMs, stamped: slow[3] !== undefined };
  }
  return { kind: 'echo', text: t };
}

/** The exact answer of `slow: <n>`: line i reads `slow chunk i of n`. */
export function slowAnswer(chunks: number): string[] {
  return Array.from({ length: chunks }, (_, i) => slowLine(i + 1, chunks));
}

/** Line i of a `slow:` answer; stamped with `at <t>`, t in wall-clock milliseconds since the epoch (microsecond precision). */
export const slowLine = (i: number, of: number, at?: number): string =>
  `slow chunk ${i} of ${of}${at === undefined ? '' : ` at ${at.toFixed(3)}`}\n`;

/** Wall-clock milliseconds with sub-millisecond precision, comparable between processes on one machine. */
export const wallClockMs = (): number => performance.timeOrigin + performance.now();

/** The write time carried by a stamped `slow:` line, or null when the text carries none. */
export function slowLineStamp(text: string): number | null {
  const m = / at (\d+\.\d{3})\n$/.exec(text);
  return m ? Number(m[1]) : null;
}

const pause = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

const promptText = (blocks: ContentBlock[]): string =>
  blocks
    .map((b) => (b.type === 'text' ? b.text : b.type === 'resource_link' ? b.uri : ''))
    .filter((s) => s !== '')
    .join('\n');

/** Splits an answer into word groups that concatenate back to exactly the answer. */
export function chunkText(text: string, wordsPerChunk = WORDS_PER_CHUNK): string[] {
  const pieces = text.match(/\S+\s*|\s+/g) ?? [];
  const out: string[] = [];
  for (let i = 0; i < pieces.length; i += wordsPerChunk) out.push(pieces.slice(i, i + wordsPerChunk).join(''));
  return out.length > 0 ? out : [text];
}

/**
 * One line per MCP server. Header values are never shown (they carry the sandbox token); a bearer
 * header is only compared with this process's FOUNTAIN_TOKEN.
 */
export function describeMcpServers(servers: readonly McpServer[], env: NodeJS.ProcessEnv = process.env): string {
  if (servers.length === 0) return 'I got no MCP servers.';
  const lines = servers.map((s) => {
    if (!('type' in s) || (s.type !== 'http' && s.type !== 'sse')) return `- ${s.name}: stdio ${s.command}`;
    const headers = s.headers.map((h) => {
      const bearer = /^Bearer\s+(\S+)$/i.exec(h.value);
      const note = bearer
        ? bearer[1] === env.FOUNTAIN_TOKEN
          ? ' (bearer = FOUNTAIN_TOKEN)'
          : ' (bearer ≠ FOUNTAIN_TOKEN)'
        : '';
      return `${h.name}${note}`;
    });
    return `- ${s.name}: ${s.type} ${s.url} headers: ${headers.join(', ') || 'none'}`;
  });
  return `I got ${servers.length} MCP server(s):\n${lines.join('\n')}`;
}

export function demoAgentApp(opts: DemoAgentOptions): acp.AgentApp {
  const store = new DemoStore(opts.home);
  const sessions = new Map<string, DemoSession>();
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  let toolCalls = 0;

  const update = (client: AgentContext, sessionId: string, u: SessionUpdate): Promise<void> =>
    client.notify(acp.methods.client.session.update, { sessionId, update: u });

  /** Streams `text` as several agent_message_chunk updates; false when cancelled midway. */
  const say = async (client: AgentContext, sessionId: string, text: string, signal: AbortSignal): Promise<boolean> => {
    const messageId = randomUUID();
    for (const piece of chunkText(text)) {
      if (signal.aborted) return false;
      await update(client, sessionId, {
        sessionUpdate: 'agent_message_chunk',
        messageId,
        content: { type: 'text', text: piece },
      });
    }
    return true;
  };

  const runCommand = async (
    client: AgentContext,
    sessionId: string,
    session: DemoSession,
    command: string,
    signal: AbortSignal,
  ): Promise<{ stop: StopReason; answer: string }> => {
    const toolCallId = `run-${++toolCalls}`;
    const title = `Run \`${command}\``;
    await update(client, sessionId, {
      sessionUpdate: 'tool_call',
      toolCallId,
      title,
      kind: 'execute',
      status: 'pending',
      rawInput: { command },
    });
    const decision = await client.request(acp.methods.client.session.requestPermission, {
      sessionId,
      toolCall: { toolCallId, title, kind: 'execute', status: 'pending', rawInput: { command } },
      options: [
        { optionId: 'allow_once', name: 'Allow once', kind: 'allow_once' },
        { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
      ],
    });
    if (decision.outcome.outcome === 'cancelled' || signal.aborted) {
      await update(client, sessionId, { sessionUpdate: 'tool_call_update', toolCallId, status: 'failed' });
      return { stop: 'cancelled', answer: '' };
    }
    if (decision.outcome.optionId !== 'allow_once') {
      await update(client, sessionId, {
        sessionUpdate: 'tool_call_update',
        toolCallId,
        status: 'failed',
        content: [{ type: 'content', content: { type: 'text', text: 'Permission was not granted.' } }],
      });
      return { stop: 'end_turn', answer: `You did not allow it, so I did not run \`${command}\`.` };
    }
    await update(client, sessionId, { sessionUpdate: 'tool_call_update', toolCallId, status: 'in_progress' });
    const r = await runShell(command, session.cwd, signal);
    const output = r.truncated ? `${r.output}\n[output truncated]` : r.output;
    await update(client, sessionId, {
      sessionUpdate: 'tool_call_update',
      toolCallId,
      status: r.exitCode === 0 ? 'completed' : 'failed',
      content: [{ type: 'content', content: { type: 'text', text: output } }],
      rawOutput: { exitCode: r.exitCode, output },
    });
    if (r.aborted) return { stop: 'cancelled', answer: '' };
    const status = r.exitCode === null ? 'did not finish' : `exited with code ${r.exitCode}`;
    const shown = output.trim() === '' ? 'It printed nothing.' : `Its output:\n${output.trimEnd()}`;
    return { stop: 'end_turn', answer: `I ran \`${command}\`; it ${status}. ${shown}` };
  };

  const answerFor = async (
    client: AgentContext,
    sessionId: string,
    session: DemoSession,
    intent: Exclude<Intent, { kind: 'slow' }>,
    signal: AbortSignal,
  ): Promise<{ stop: StopReason; answer: string }> => {
    const tools: ToolContext = {
      cwd: session.cwd,
      signal,
      update: (u) => update(client, sessionId, u),
      askPermission: async (toolCall, options) => {
        const decision = await client.request(acp.methods.client.session.requestPermission, {
          sessionId,
          toolCall,
          options,
        });
        return decision.outcome;
      },
    };
    switch (intent.kind) {
      case 'run':
        return runCommand(client, sessionId, session, intent.command, signal);
      case 'bash':
      case 'edit': {
        const toolCallId = `toolu_${String(++toolCalls).padStart(4, '0')}`;
        const r =
          intent.kind === 'bash'
            ? await claudeBash(tools, toolCallId, intent.command)
            : await claudeEdit(tools, toolCallId, intent.spec);
        return { stop: r.cancelled ? 'cancelled' : 'end_turn', answer: r.answer };
      }
      case 'remember':
        await store.remember(intent.text);
        return { stop: 'end_turn', answer: `I will remember that: ${intent.text}` };
      case 'recall': {
        const items = await store.recall();
        const answer =
          items.length === 0 ? 'I remember nothing.' : `I remember:\n${items.map((i) => `- ${i}`).join('\n')}`;
        return { stop: 'end_turn', answer };
      }
      case 'mcp':
        return { stop: 'end_turn', answer: describeMcpServers(session.mcpServers) };
      case 'echo':
        return {
          stop: 'end_turn',
          answer:
            `You said: ${intent.text}\n` +
            'I am the Fountain demo agent. I have no model; try `run: <command>`, `remember: <text>` or `recall`.',
        };
    }
  };

  return acp
    .agent({ name: 'fountain-demo' })
    .onRequest(acp.methods.agent.initialize, () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: demoTakesImages(), audio: false, embeddedContext: false },
        mcpCapabilities: { http: true, sse: false },
      },
      agentInfo: { name: 'fountain-demo', title: 'Fountain demo agent', version: DEMO_AGENT_VERSION },
      authMethods: [],
    }))
    .onRequest(acp.methods.agent.session.new, async ({ params }) => {
      const sessionId = randomUUID();
      await store.createHistory(sessionId);
      sessions.set(sessionId, { cwd: params.cwd, mcpServers: params.mcpServers, abort: null, titled: false, used: 0 });
      return { sessionId };
    })
    .onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
      const history = await store.readHistory(params.sessionId);
      if (history === null) throw acp.RequestError.resourceNotFound(params.sessionId);
      sessions.set(params.sessionId, {
        cwd: params.cwd,
        mcpServers: params.mcpServers,
        abort: null,
        titled: true,
        used: 0,
      });
      // The protocol wants the whole history replayed before the load reply.
      for (const u of history) await update(client, params.sessionId, u);
      return {};
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params, client, signal: requestSignal }) => {
      const session = sessions.get(params.sessionId);
      if (!session) throw acp.RequestError.sessionNotFound(params.sessionId);
      const abort = new AbortController();
      session.abort = abort;
      const stopOnRequestAbort = (): void => abort.abort();
      requestSignal.addEventListener('abort', stopOnRequestAbort, { once: true });
      try {
        const text = promptText(params.prompt);
        const intent = parseIntent(text);
        await update(client, params.sessionId, {
          sessionUpdate: 'agent_thought_chunk',
          content: { type: 'text', text: `The request reads as "${intent.kind}". No model here: I follow my script.` },
        });
        if (intent.kind === 'slow') {
          // Each line is its own chunk with a pause before it, so a test can cut the connection mid-answer.
          const messageId = randomUUID();
          const lines: string[] = [];
          for (let i = 1; i <= intent.chunks; i++) {
            await pause(intent.everyMs, abort.signal);
            if (abort.signal.aborted) return { stopReason: 'cancelled' };
            const line = slowLine(i, intent.chunks, intent.stamped ? wallClockMs() : undefined);
            lines.push(line);
            await update(client, params.sessionId, {
              sessionUpdate: 'agent_message_chunk',
              messageId,
              content: { type: 'text', text: line },
            });
          }
          await store.appendHistory(params.sessionId, [
            { sessionUpdate: 'user_message_chunk', content: { type: 'text', text } },
            { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: lines.join('') } },
          ]);
          return { stopReason: 'end_turn' };
        }
        const said = await answerFor(client, params.sessionId, session, intent, abort.signal);
        const { stop } = said;
        const seen = describeImages(params.prompt);
        const answer = seen ? `${seen}\n\n${said.answer}` : said.answer;
        if (stop === 'cancelled' || abort.signal.aborted) return { stopReason: 'cancelled' };
        if (!(await say(client, params.sessionId, answer, abort.signal))) return { stopReason: 'cancelled' };
        await store.appendHistory(params.sessionId, [
          { sessionUpdate: 'user_message_chunk', content: { type: 'text', text } },
          { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: answer } },
        ]);
        if (!session.titled) {
          session.titled = true;
          await update(client, params.sessionId, {
            sessionUpdate: 'session_info_update',
            title: gist(text),
          });
        }
        // Usage as Claude reports it: the context window and cost in an update, the tokens in the reply.
        const input = words(text);
        const output = words(answer);
        session.used += input + output;
        await update(client, params.sessionId, {
          sessionUpdate: 'usage_update',
          used: session.used,
          size: DEMO_CONTEXT_SIZE,
          cost: { amount: Number((session.used * DEMO_USD_PER_WORD).toFixed(6)), currency: 'USD' },
        });
        const usage = {
          inputTokens: input,
          outputTokens: output,
          cachedReadTokens: 0,
          cachedWriteTokens: 0,
          totalTokens: input + output,
        };
        return { stopReason: 'end_turn', usage } as acp.PromptResponse;
      } catch (e) {
        if (e instanceof acp.RequestError) throw e;
        log(`demo agent: prompt failed: ${e instanceof Error ? e.message : String(e)}`);
        throw acp.RequestError.internalError(undefined, e instanceof Error ? e.message : String(e));
      } finally {
        requestSignal.removeEventListener('abort', stopOnRequestAbort);
        if (session.abort === abort) session.abort = null;
      }
    })
    .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
      sessions.get(params.sessionId)?.abort?.abort();
    });
}

/**
 * The demo agent as a process: serves one ACP connection on stdin/stdout until the client closes its end,
 * then exits. Commands it started run in their own process groups, so every way out kills them first.
 */
export async function runDemoAgent(
  opts: DemoAgentOptions & { readonly input: NodeJS.ReadableStream; readonly output: NodeJS.WritableStream },
): Promise<never> {
  for (const [sig, code] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const) {
    process.once(sig, () => {
      killAllShells();
      process.exit(code);
    });
  }
  const stream = acp.ndJsonStream(
    Writable.toWeb(opts.output as Writable) as WritableStream<Uint8Array>,
    Readable.toWeb(opts.input as Readable) as ReadableStream<Uint8Array>,
  );
  const connection = demoAgentApp(opts).connect(stream);
  await connection.closed;
  killAllShells();
  process.exit(0);
}
