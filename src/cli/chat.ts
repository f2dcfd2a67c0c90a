/**
 * `fountain chat <agent>`: open (or continue) a conversation and talk to it from the terminal. Shows
 * the sandbox starting, streams the answer, and asks permission questions inline.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { ApiError } from './api.ts';
import type { FountainApi } from './api.ts';
import { findAgent } from './agents.ts';
import { follow } from './follow.ts';
import { EventRenderer } from './render.ts';
import { conversationSchema, data, logEventSchema, requestStartedSchema, turnSchema } from './schemas.ts';
import type { Conversation, LogEvent } from './schemas.ts';
import { CliError, LineReader, action, apiFor } from './session.ts';
import { fountainCommand } from './invocation.ts';
import { readFileSync } from 'node:fs';
import { MAX_IMAGE_BYTES, MAX_IMAGES, sniffImage } from '../wire/images.ts';
import { checkModel } from './chat-model.ts';

const TERMINAL_TURN_STATES = new Set(['done', 'failed', 'interrupted']);

interface ChatOptions {
  message?: string[];
  image?: string[];
  conversation?: string;
  continue?: boolean;
  /** A branch of the environment's repository for a new conversation's sandbox to clone. */
  branch?: string;
  repository?: string;
  /** A new conversation's model instead of the agent's. */
  model?: string;
}

const ENDED = new Set(['terminated', 'failed']);

const oneLine = (s: string): string => {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > 60 ? `${flat.slice(0, 59)}…` : flat;
};

const requestIdOf = (ev: LogEvent): string | null => {
  const r = requestStartedSchema.safeParse(JSON.parse(ev.data ?? '{}'));
  return r.success ? r.data.request_id : null;
};

const collect = (value: string, prev: string[] = []) => [...prev, value];

/**
 * Where a re-attached chat starts replaying: just before the latest turn began, so whatever that turn
 * said while nobody watched (or is still saying) is shown again; null replays the whole conversation.
 */
async function resumePoint(
  api: FountainApi,
  conversationId: string,
): Promise<{ since: string | null; historyUntil: number }> {
  let after = 0;
  let beforeLastTurn: number | null = null;
  let previous = 0;
  for (;;) {
    const page = await api.request(
      'GET',
      `/api/conversations/${conversationId}/events?after=${after}&limit=1000`,
      z.object({
        data: z.array(logEventSchema.extend({ id: z.number() })),
        meta: z.object({ next_cursor: z.number().nullable(), has_more: z.boolean().optional() }).loose(),
      }),
    );
    for (const ev of page.data) {
      if (ev.kind === 'stage' && ev.stage === 'turn' && ev.state === 'started') beforeLastTurn = previous;
      previous = ev.id;
    }
    if (page.data.length > 0) after = page.data.at(-1)!.id;
    if (!page.meta.has_more)
      return {
        since: beforeLastTurn !== null && beforeLastTurn > 0 ? String(beforeLastTurn) : null,
        historyUntil: previous,
      };
  }
}

/** The conversation `--continue` picks: the agent's most recent one that has not ended. */
async function latestOpen(api: FountainApi, agentId: string): Promise<Conversation | null> {
  const { data: list } = await api.request(
    'GET',
    `/api/conversations?agent_id=${encodeURIComponent(agentId)}`,
    data(z.array(conversationSchema)),
  );
  return list.find((c) => !ENDED.has(c.status)) ?? null;
}

export async function chat(api: FountainApi, agentRef: string, opts: ChatOptions, lines: LineReader): Promise<number> {
  const out = (s: string) => process.stdout.write(s);
  const renderer = new EventRenderer(out);
  const agent = await findAgent(api, agentRef);
  let existing: Conversation | null = null;
  if (opts.conversation) {
    existing = (
      await api.request('GET', `/api/conversations/${encodeURIComponent(opts.conversation)}`, data(conversationSchema))
    ).data;
  } else if (opts.continue) {
    existing = await latestOpen(api, agent.id);
    if (!existing) renderer.status(`${agent.name} has no conversation to continue; starting a new one`);
  }
  if (existing && ENDED.has(existing.status)) {
    throw new CliError(
      `conversation ${existing.id} has ended (${existing.status}); \`${fountainCommand()} chat ${agentRef}\` starts a new one`,
    );
  }
  if (opts.model !== undefined) checkModel(agent, opts.model, existing);
  let conversationId: string;
  let running: string | null = null;
  const images = readImages(opts.image ?? []);
  const prompts = opts.message ?? null;
  let given = 0;
  /** The next prompt that is not blank, from --message or stdin; null once they run out. */
  const nextPrompt = async (): Promise<string | null> => {
    for (;;) {
      let prompt: string | null;
      if (prompts) prompt = prompts[given++] ?? null;
      else {
        renderer.newline();
        if (process.stdin.isTTY) out('> ');
        prompt = await lines.next();
      }
      if (prompt === null || prompt.trim() !== '') return prompt;
    }
  };
  /** A prompt read before the conversation was created (a new chat creates it only once there is one). */
  let first: string | null | undefined;
  let pendingRequest: string | null = null;
  if (existing) {
    conversationId = existing.id;
    const { data: turns } = await api.request(
      'GET',
      `/api/conversations/${conversationId}/turns`,
      data(z.array(turnSchema)),
    );
    const last = turns.at(-1);
    if (last && ['queued', 'pending', 'running'].includes(last.status)) running = last.id;
    pendingRequest = last?.pending_permission?.request_id ?? null;
    const title = existing.title ?? existing.first_prompt ?? '';
    renderer.status(
      `continuing conversation ${conversationId} with ${agent.name} · ${turns.length === 1 ? '1 turn' : `${turns.length} turns`}${title ? ` · "${oneLine(title)}"` : ''}`,
    );
    if (last)
      renderer.status(
        running ? 'the latest turn is still running; its output so far:' : 'the latest turn, in case you missed it:',
      );
  } else {
    // Nothing to say (stdin closed empty, no --message): no conversation, so no sandbox is started for nothing.
    // Ctrl-C before the first message leaves nothing behind.
    const quit = () => {
      renderer.newline();
      process.stdout.write('· left before the first message: no conversation was started\n');
      process.exit(130);
    };
    process.on('SIGINT', quit);
    first = await nextPrompt().finally(() => process.off('SIGINT', quit));
    if (first === null) {
      renderer.status(`no message: no conversation started with ${agent.name}`);
      return 0;
    }
    const created = await api.request('POST', '/api/conversations', data(conversationSchema), {
      agent_id: agent.id,
      ...(opts.branch !== undefined ? { branch: opts.branch } : {}),
      ...(opts.repository !== undefined ? { repository: opts.repository } : {}),
      ...(opts.model !== undefined ? { model: opts.model } : {}),
    });
    conversationId = created.data.id;
    renderer.status(
      `new conversation ${conversationId} with ${agent.name}${opts.model !== undefined ? ` on ${opts.model}` : ''} (each chat starts one; --continue picks up the latest)`,
    );
  }
  // Ctrl-C leaves the conversation running on the server; say how to come back to it.
  const onInterrupt = () => {
    renderer.newline();
    process.stdout.write(
      `· left the conversation; come back with: ${fountainCommand()} chat ${agentRef} --conversation ${conversationId}\n`,
    );
    process.exit(130);
  };
  process.on('SIGINT', onInterrupt);

  const abort = new AbortController();
  let turnId: string | null = null;
  let turnEnd: ((state: string) => void) | null = null;
  const endedTurns = new Map<string, string>();
  let provisionFailed: string | null = null;
  let questions = Promise.resolve();

  const answer = async (requestId: string, optionId: string): Promise<void> => {
    try {
      await api.request(
        'POST',
        `/api/conversations/${conversationId}/requests/${encodeURIComponent(requestId)}`,
        z.unknown(),
        { option_id: optionId },
      );
    } catch (e) {
      if (e instanceof ApiError && e.code === 'permission_request_resolved')
        renderer.status('that request was already resolved');
      else throw e;
    }
  };

  // Input ended with a question open: nobody is left to answer it, so the agent hears "no" now rather
  // than the turn waiting out the ask timeout.
  const refuseUnanswered = async (
    requestId: string,
    options: Array<{ optionId: string; name: string; kind?: string | undefined }>,
  ): Promise<void> => {
    const reject = options.find((o) => o.kind === 'reject_once') ?? options.find((o) => o.kind?.startsWith('reject'));
    renderer.newline();
    if (reject) {
      renderer.status(`no more input: answered "${reject.name}"`);
      return answer(requestId, reject.optionId);
    }
    renderer.status('no more input and no way to refuse: interrupting the turn');
    await api.request('POST', `/api/conversations/${conversationId}/interrupt`, z.unknown());
  };

  const ask = async (ev: LogEvent): Promise<void> => {
    const req = requestStartedSchema.safeParse(JSON.parse(ev.data ?? '{}'));
    if (!req.success) return;
    const { request_id, tool, options } = req.data;
    renderer.status(`permission requested${tool ? ` for ${tool}` : ''}:`);
    options.forEach((o, i) => renderer.write(`  [${i + 1}] ${o.name}\n`));
    for (;;) {
      renderer.write('  choose: ');
      const line = await lines.next();
      if (line === null) return refuseUnanswered(request_id, options);
      if (!process.stdin.isTTY) renderer.write(`${line}\n`);
      const n = Number(line.trim());
      const choice = options[n - 1] ?? options.find((o) => o.optionId === line.trim());
      if (!choice) {
        renderer.write(`  type a number from 1 to ${options.length}\n`);
        continue;
      }
      return answer(request_id, choice.optionId);
    }
  };

  const onEvent = (ev: LogEvent & { id: string | null }): void => {
    renderer.render(ev);
    if (ev.kind !== 'stage') return;
    if (ev.stage === 'provision' && ev.state === 'failed') {
      provisionFailed = ev.data ?? 'provisioning failed';
      turnEnd?.('failed');
    }
    if ((ev.stage === 'permission' || ev.stage === 'request') && ev.state === 'started') {
      // A replayed question is asked again only if it is still open.
      const replayed = Number(ev.id ?? 0) <= historyUntil;
      if (!replayed || requestIdOf(ev) === pendingRequest) questions = questions.then(() => ask(ev));
    }
    if ((ev.stage === 'turn' || ev.stage === 'terminate') && ev.state && TERMINAL_TURN_STATES.has(ev.state)) {
      const id = ev.turn_id ?? '';
      endedTurns.set(id, ev.state);
      if (ev.stage === 'terminate' || id === turnId) turnEnd?.(ev.state);
    }
  };

  const { since, historyUntil } = existing ? await resumePoint(api, conversationId) : { since: null, historyUntil: 0 };
  const streaming = follow({ api, conversationId, onEvent, signal: abort.signal, since }).catch((e: Error) => {
    renderer.status(`event stream ended: ${e.message}`);
  });

  // A 503 names a code; the runner it waits for is on the conversation's sandbox.
  const whyWaiting = async (e: ApiError): Promise<string> => {
    if (e.code !== 'runner_offline') return e.message;
    const conv = await api
      .request('GET', `/api/conversations/${conversationId}`, data(conversationSchema))
      .catch(() => null);
    const runner = conv?.data.sandbox?.runner?.name;
    return runner ? `the runner "${runner}" is offline` : 'no runner is connected';
  };

  const send = async (prompt: string): Promise<string> => {
    // The images go with the first message only.
    const withImages = images.length > 0 ? { prompt, images: images.splice(0) } : { prompt };
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await api.request(
          'POST',
          `/api/conversations/${conversationId}/prompts`,
          z.object({ turn_id: z.string().optional() }).loose(),
          withImages,
        );
        if (!res.turn_id) throw new CliError('the server did not return a turn id');
        return res.turn_id;
      } catch (e) {
        const retryable = e instanceof ApiError && e.status === 503 && attempt < 60;
        if (!retryable) throw e;
        const wait = Math.min(Number(e.retryAfter ?? 2), 5);
        renderer.status(`${await whyWaiting(e)}; retrying in ${wait} s (Ctrl-C to stop)`);
        await new Promise((r) => setTimeout(r, wait * 1000));
      }
    }
  };

  const waitFor = (id: string): Promise<string> =>
    new Promise<string>((resolve) => {
      const already = endedTurns.get(id);
      if (already) return resolve(already);
      turnEnd = resolve;
    });

  let failures = 0;
  try {
    if (running) {
      turnId = running;
      await waitFor(running);
      turnEnd = null;
      await questions;
    }
    for (;;) {
      const prompt = first ?? (await nextPrompt());
      first = undefined;
      if (prompt === null) break;
      if (provisionFailed) throw new CliError(`provisioning failed: ${provisionFailed}`);
      const id = await send(prompt);
      turnId = id;
      const state = await waitFor(id);
      turnEnd = null;
      await questions;
      if (state !== 'done') failures++;
      if (provisionFailed) throw new CliError(`provisioning failed: ${provisionFailed}`);
    }
  } finally {
    process.off('SIGINT', onInterrupt);
    abort.abort();
    await streaming;
    renderer.newline();
  }
  return failures > 0 ? 1 : 0;
}

/**
 * The files of `--image`, read and checked here (type by their bytes, size, count) so a bad one is named
 * before any conversation is created; sent with the first message.
 */
export function readImages(paths: readonly string[]): Array<{ data: string; media_type: string }> {
  if (paths.length > MAX_IMAGES) throw new CliError(`at most ${MAX_IMAGES} images go with one message`);
  return paths.map((p) => {
    let bytes: Buffer;
    try {
      bytes = readFileSync(p);
    } catch (e) {
      throw new CliError(`cannot read the image ${p}: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (bytes.length > MAX_IMAGE_BYTES)
      throw new CliError(`${p} is ${(bytes.length / 1024 / 1024).toFixed(1)} MB; an image may be at most 10 MB`);
    const type = sniffImage(bytes);
    if (!type) throw new CliError(`${p} is not a PNG, JPEG, GIF or WebP image`);
    return { data: bytes.toString('base64'), media_type: type };
  });
}

export function register(program: Command): void {
  program
    .command('chat <agent>')
    .description(
      'talk to an agent: each line you type is a prompt; each chat starts a new conversation unless --continue or --conversation',
    )
    .option('-m, --message <text>', 'send this prompt instead of reading stdin (repeatable)', collect)
    .option(
      '-i, --image <file>',
      'send this image (PNG, JPEG, GIF, WebP; up to 10 MB) with the first message (repeatable)',
      collect,
    )
    .option('-c, --continue', "continue the agent's latest conversation that has not ended")
    .option('--conversation <id>', 'continue this conversation')
    .option('--branch <name>', "a new conversation's sandbox checks out this branch of the environment's repository")
    .option('--repository <url>', "which of the environment's repositories --branch is of (default: its first)")
    .option(
      '--model <provider/id>',
      "a new conversation's model instead of the agent's (it must fit the agent's runtime; its vendor's credential must be set)",
    )
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
