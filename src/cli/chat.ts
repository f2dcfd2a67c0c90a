/**
 * `fountain chat <agent>`: open a conversation and talk to it from the terminal. Shows
 * provisioning stage by stage, streams the answer, and asks permission questions inline.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { ApiError } from './api.ts';
import type { FountainApi } from './api.ts';
import { findAgent } from './agents.ts';
import { follow } from './follow.ts';
import { EventRenderer } from './render.ts';
import { conversationSchema, data, requestStartedSchema } from './schemas.ts';
import type { LogEvent } from './schemas.ts';
import { CliError, LineReader, action, apiFor } from './session.ts';

const TERMINAL_TURN_STATES = new Set(['done', 'failed', 'interrupted']);

interface ChatOptions {
  message?: string[];
  conversation?: string;
}

const collect = (value: string, prev: string[] = []) => [...prev, value];

async function lastEventId(api: FountainApi, conversationId: string): Promise<string | null> {
  let after = 0;
  for (;;) {
    const page = await api.request(
      'GET',
      `/api/conversations/${conversationId}/events?after=${after}&limit=1000`,
      z.object({ data: z.array(z.object({ id: z.number() }).loose()), meta: z.object({ next_cursor: z.number().nullable(), has_more: z.boolean().optional() }).loose() }),
    );
    const last = page.data.at(-1);
    if (last) after = last.id;
    if (!page.meta.has_more) return after > 0 ? String(after) : null;
  }
}

export async function chat(api: FountainApi, agentRef: string, opts: ChatOptions, lines: LineReader): Promise<number> {
  const out = (s: string) => process.stdout.write(s);
  const renderer = new EventRenderer(out);
  const agent = await findAgent(api, agentRef);
  let conversationId = opts.conversation;
  if (conversationId) {
    await api.request('GET', `/api/conversations/${encodeURIComponent(conversationId)}`, data(conversationSchema));
  } else {
    const created = await api.request('POST', '/api/conversations', data(conversationSchema), { agent_id: agent.id });
    conversationId = created.data.id;
    renderer.status(`conversation ${conversationId} with ${agent.name}`);
  }

  const abort = new AbortController();
  let turnId: string | null = null;
  let turnEnd: ((state: string) => void) | null = null;
  const endedTurns = new Map<string, string>();
  let provisionFailed: string | null = null;
  let questions = Promise.resolve();

  const ask = async (ev: LogEvent): Promise<void> => {
    const req = requestStartedSchema.safeParse(JSON.parse(ev.data ?? '{}'));
    if (!req.success) return;
    const { request_id, tool, options } = req.data;
    renderer.status(`permission requested${tool ? ` for ${tool}` : ''}:`);
    options.forEach((o, i) => renderer.write(`  [${i + 1}] ${o.name}\n`));
    for (;;) {
      renderer.write('  choose: ');
      const line = await lines.next();
      if (line === null) return;
      if (!process.stdin.isTTY) renderer.write(`${line}\n`);
      const n = Number(line.trim());
      const choice = options[n - 1] ?? options.find((o) => o.optionId === line.trim());
      if (!choice) {
        renderer.write(`  type a number from 1 to ${options.length}\n`);
        continue;
      }
      try {
        await api.request('POST', `/api/conversations/${conversationId}/requests/${encodeURIComponent(request_id)}`, z.unknown(), { option_id: choice.optionId });
      } catch (e) {
        if (e instanceof ApiError && e.code === 'permission_request_resolved') renderer.status('that request was already resolved');
        else throw e;
      }
      return;
    }
  };

  const onEvent = (ev: LogEvent & { id: string | null }): void => {
    renderer.render(ev);
    if (ev.kind !== 'stage') return;
    if (ev.stage === 'provision' && ev.state === 'failed') {
      provisionFailed = ev.data ?? 'provisioning failed';
      turnEnd?.('failed');
    }
    if ((ev.stage === 'permission' || ev.stage === 'request') && ev.state === 'started') questions = questions.then(() => ask(ev));
    if ((ev.stage === 'turn' || ev.stage === 'terminate') && ev.state && TERMINAL_TURN_STATES.has(ev.state)) {
      const id = ev.turn_id ?? '';
      endedTurns.set(id, ev.state);
      if (ev.stage === 'terminate' || id === turnId) turnEnd?.(ev.state);
    }
  };

  const since = opts.conversation ? await lastEventId(api, conversationId) : null;
  const streaming = follow({ api, conversationId, onEvent, signal: abort.signal, since }).catch((e: Error) => {
    renderer.status(`event stream ended: ${e.message}`);
  });

  const send = async (prompt: string): Promise<string> => {
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await api.request('POST', `/api/conversations/${conversationId}/prompts`, z.object({ turn_id: z.string().optional() }).loose(), { prompt });
        if (!res.turn_id) throw new CliError('the server did not return a turn id');
        return res.turn_id;
      } catch (e) {
        const retryable = e instanceof ApiError && e.status === 503 && attempt < 60;
        if (!retryable) throw e;
        const wait = Math.min(Number(e.retryAfter ?? 2), 5);
        renderer.status(`${e.code}; retrying in ${wait} s`);
        await new Promise((r) => setTimeout(r, wait * 1000));
      }
    }
  };

  let failures = 0;
  const prompts = opts.message ?? null;
  try {
    for (let i = 0; ; i++) {
      let prompt: string | null;
      if (prompts) prompt = prompts[i] ?? null;
      else {
        renderer.newline();
        if (process.stdin.isTTY) out('> ');
        prompt = await lines.next();
      }
      if (prompt === null) break;
      if (prompt.trim() === '') continue;
      if (provisionFailed) throw new CliError(`provisioning failed: ${provisionFailed}`);
      const id = await send(prompt);
      turnId = id;
      const state = await new Promise<string>((resolve) => {
        const already = endedTurns.get(id);
        if (already) return resolve(already);
        turnEnd = resolve;
      });
      turnEnd = null;
      await questions;
      if (state !== 'done') failures++;
      if (provisionFailed) throw new CliError(`provisioning failed: ${provisionFailed}`);
    }
  } finally {
    abort.abort();
    await streaming;
    renderer.newline();
  }
  return failures > 0 ? 1 : 0;
}

export function register(program: Command): void {
  program
    .command('chat <agent>')
    .description('talk to an agent: each line you type is a prompt')
    .option('-m, --message <text>', 'send this prompt instead of reading stdin (repeatable)', collect)
    .option('--conversation <id>', 'continue an existing conversation')
    .action(
      action(async (agentRef: string, opts: ChatOptions, cmd: Command) => {
        const lines = new LineReader();
        try {
          process.exitCode = await chat(apiFor(cmd), agentRef, opts, lines);
        } finally {
          lines.close();
        }
      }),
    );
}
