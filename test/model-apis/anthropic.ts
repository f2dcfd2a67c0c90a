/**
 * A local Anthropic Messages API as Claude Code and opencode use it: `POST /v1/messages` streaming
 * (message_start, content_block_start/delta/stop, message_delta, message_stop; text and tool_use
 * blocks) or not, `count_tokens`, `HEAD /api/hello`, `GET /v1/models`; a wrong key gets the 401
 * Anthropic sends. The answers come from the scripted model in script.ts.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { header, json, ModelApiServer, pieces, sse, type SentImage } from './server.ts';
import { answered, nextStep, type Entry, type Step } from './script.ts';

const Block = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  content: z.unknown().optional(),
  input: z.unknown().optional(),
  name: z.string().optional(),
});
const Message = z.looseObject({ role: z.enum(['user', 'assistant']), content: z.union([z.string(), z.array(Block)]) });
const MessagesBody = z.looseObject({
  model: z.string(),
  messages: z.array(Message),
  stream: z.boolean().optional(),
  tools: z.array(z.looseObject({ name: z.string() })).optional(),
});

const AUTH_ERROR = { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } };

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((c) => (typeof c === 'string' ? c : typeof c?.text === 'string' ? c.text : text(c?.content)))
      .join('\n');
  return '';
}

/** The conversation as script.ts reads it: a user message holding tool_result blocks is a tool result. */
function entries(messages: z.infer<typeof Message>[]): Entry[] {
  return messages.map((m): Entry => {
    if (typeof m.content !== 'string') {
      const result = m.content.find((b) => b.type === 'tool_result');
      if (result) return { role: 'tool_result', text: text(result.content) };
      if (m.role === 'assistant') {
        const uses = m.content.filter((b) => b.type === 'tool_use').map((b) => JSON.stringify(b.input));
        return { role: 'assistant', text: [text(m.content), ...uses].join('\n') };
      }
    }
    return { role: m.role, text: text(m.content) };
  });
}

/** The image blocks of a recorded Messages request's user messages: their type and decoded bytes. */
export function imagesIn(body: unknown): SentImage[] {
  const parsed = MessagesBody.safeParse(body);
  if (!parsed.success) return [];
  const Image = z.object({
    type: z.literal('image'),
    source: z.object({ type: z.literal('base64'), media_type: z.string(), data: z.string() }),
  });
  return parsed.data.messages.flatMap((m) =>
    m.role === 'user' && typeof m.content !== 'string'
      ? m.content.flatMap((b) => {
          const i = Image.safeParse(b);
          return i.success
            ? [{ media_type: i.data.source.media_type, bytes: Buffer.from(i.data.source.data, 'base64') }]
            : [];
        })
      : [],
  );
}

export function startAnthropicApi(key: string): Promise<ModelApiServer> {
  return ModelApiServer.start(key, (req, res, body, api) => {
    const path = (req.url ?? '').split('?')[0]!;
    const presented = header(req, 'x-api-key') ?? header(req, 'authorization')?.replace(/^Bearer /i, '');
    const authorized = presented === api.key;
    if (req.method === 'HEAD' && path === '/api/hello') {
      res.writeHead(200).end();
      return;
    }
    const model =
      body && typeof body === 'object' && typeof (body as { model?: unknown }).model === 'string'
        ? (body as { model: string }).model
        : null;
    const parsedForTools = MessagesBody.safeParse(body);
    const asked = api.record({
      method: req.method ?? '',
      path,
      model,
      authorized,
      tools: parsedForTools.success ? (parsedForTools.data.tools ?? []).map((t) => t.name) : [],
      body,
    });
    if (!authorized) return json(res, 401, AUTH_ERROR, { 'request-id': `req_${randomBytes(8).toString('hex')}` });
    if (req.method === 'GET' && path === '/v1/models') {
      return json(res, 200, {
        data: [
          {
            type: 'model',
            id: 'claude-sonnet-4-5',
            display_name: 'Claude Sonnet 4.5',
            created_at: '2025-09-29T00:00:00Z',
          },
        ],
        has_more: false,
        first_id: 'claude-sonnet-4-5',
        last_id: 'claude-sonnet-4-5',
      });
    }
    if (req.method === 'POST' && path === '/v1/messages/count_tokens') return json(res, 200, { input_tokens: 42 });
    if (req.method !== 'POST' || path !== '/v1/messages')
      return json(res, 404, {
        type: 'error',
        error: { type: 'not_found_error', message: `no route ${req.method} ${path}` },
      });

    const parsed = MessagesBody.safeParse(body);
    if (!parsed.success)
      return json(res, 400, {
        type: 'error',
        error: { type: 'invalid_request_error', message: parsed.error.issues[0]?.message ?? 'invalid body' },
      });
    const b = parsed.data;
    const tools = b.tools ?? [];
    const shell = tools.find((t) => t.name === 'Bash' || t.name === 'bash');
    // Tool-less calls (Claude Code's title and quota requests) get a short text; only tool calls follow the script.
    const step: Step = shell
      ? nextStep(
          entries(b.messages),
          tools.map((t) => t.name),
        )
      : { kind: 'text', text: 'Shell session' };
    if (shell) asked.answered = answered(step);
    const id = `msg_${randomBytes(12).toString('hex')}`;
    const u = api.report(asked);
    const usage = {
      input_tokens: u.input,
      output_tokens: 0,
      cache_creation_input_tokens: u.cacheWrite,
      cache_read_input_tokens: u.cacheRead,
    };
    const call =
      step.kind === 'tool'
        ? { name: shell!.name, input: { command: step.command, description: 'Run the requested command' } }
        : step.kind === 'call'
          ? { name: step.tool, input: step.args }
          : null;
    const toolId = `toolu_${randomBytes(12).toString('hex')}`;
    const stopReason = call ? 'tool_use' : 'end_turn';
    if (!b.stream) {
      const content = call
        ? [{ type: 'tool_use', id: toolId, name: call.name, input: call.input }]
        : [{ type: 'text', text: step.kind === 'text' ? step.text : '' }];
      return json(res, 200, {
        id,
        type: 'message',
        role: 'assistant',
        model: b.model,
        content,
        stop_reason: stopReason,
        stop_sequence: null,
        usage: { ...usage, output_tokens: u.output },
      });
    }
    const out = sse(res);
    out.send('message_start', {
      type: 'message_start',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model: b.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    });
    out.send('ping', { type: 'ping' });
    if (call) {
      out.send('content_block_start', {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'tool_use', id: toolId, name: call.name, input: {} },
      });
      for (const p of pieces(JSON.stringify(call.input)))
        out.send('content_block_delta', {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'input_json_delta', partial_json: p },
        });
    } else if (step.kind === 'text') {
      out.send('content_block_start', {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'text', text: '' },
      });
      for (const p of pieces(step.text))
        out.send('content_block_delta', {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'text_delta', text: p },
        });
    }
    out.send('content_block_stop', { type: 'content_block_stop', index: 0 });
    out.send('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: u.output },
    });
    out.send('message_stop', { type: 'message_stop' });
    out.end();
  });
}
