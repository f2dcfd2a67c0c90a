/**
 * A local OpenAI API: the Responses API Codex uses (`POST /v1/responses`, SSE `response.created`,
 * `response.output_item.added`, `response.output_text.delta`, `response.output_item.done`,
 * `response.completed`) and Chat Completions as opencode's openai-compatible provider uses it
 * (`POST /v1/chat/completions`, chunks then `[DONE]`), plus `GET /v1/models`. A wrong key gets
 * OpenAI's 401 `invalid_api_key` with the key masked, as OpenAI does.
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { header, json, ModelApiServer, pieces, sse, type Reported } from './server.ts';
import { answered, nextStep, type Entry, type Step } from './script.ts';

const Tool = z.looseObject({
  type: z.string().optional(),
  name: z.string().optional(),
  function: z.looseObject({ name: z.string() }).optional(),
});
const ResponsesBody = z.looseObject({
  model: z.string(),
  input: z.union([
    z.string(),
    z.array(
      z.looseObject({
        type: z.string().optional(),
        role: z.string().optional(),
        content: z.unknown().optional(),
        output: z.unknown().optional(),
      }),
    ),
  ]),
  tools: z.array(Tool).optional(),
});
const ChatBody = z.looseObject({
  model: z.string(),
  messages: z.array(z.looseObject({ role: z.string(), content: z.unknown().optional() })),
  tools: z.array(Tool).optional(),
  stream: z.boolean().optional(),
});

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;
const mask = (k: string) => (k.length > 8 ? `${k.slice(0, 3)}${'*'.repeat(k.length - 7)}${k.slice(-4)}` : '****');

function text(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((c) => (typeof c === 'string' ? c : typeof c?.text === 'string' ? c.text : '')).join('\n');
  return '';
}

function toolName(t: z.infer<typeof Tool>): string {
  return t.function?.name ?? t.name ?? '';
}

/**
 * Tools offered, by the name the script sees: Codex groups each MCP server's tools under a namespace
 * entry (`{type: "namespace", name: "mcp__<server>", tools}`), seen here as `<namespace>.<tool>`; a
 * call to one names the tool and its namespace apart (`{type: "function_call", namespace, name}`).
 */
function toolNames(tools: unknown[]): string[] {
  return tools.flatMap((raw) => {
    const t = raw as z.infer<typeof Tool> & { tools?: unknown[] };
    return Array.isArray(t.tools) ? toolNames(t.tools).map((n) => `${toolName(t)}.${n}`) : [toolName(t)];
  });
}

function namespaced(name: string): { name: string; namespace?: string } {
  const dot = name.lastIndexOf('.');
  return dot < 0 ? { name } : { namespace: name.slice(0, dot), name: name.slice(dot + 1) };
}

function responsesEntries(input: z.infer<typeof ResponsesBody>['input']): Entry[] {
  if (typeof input === 'string') return [{ role: 'user', text: input }];
  const out: Entry[] = [];
  for (const item of input) {
    if (item.type === 'function_call_output' || item.type === 'custom_tool_call_output')
      out.push({ role: 'tool_result', text: text(item.output) });
    else if (item.type === 'function_call') out.push({ role: 'assistant', text: JSON.stringify(item) });
    else if (item.role === 'user') out.push({ role: 'user', text: text(item.content) });
    else if (item.role === 'assistant') out.push({ role: 'assistant', text: text(item.content) });
  }
  return out;
}

function chatEntries(messages: z.infer<typeof ChatBody>['messages']): Entry[] {
  return messages
    .filter((m) => m.role !== 'system' && m.role !== 'developer')
    .map((m): Entry => {
      if (m.role === 'tool') return { role: 'tool_result', text: text(m.content) };
      if (m.role === 'assistant')
        return {
          role: 'assistant',
          text: [text(m.content), m.tool_calls ? JSON.stringify(m.tool_calls) : ''].join('\n'),
        };
      return { role: 'user', text: text(m.content) };
    });
}

/** The Codex shell call: exec_command asks to leave Codex's sandbox, which is what makes Codex ask permission. */
function codexCall(tools: string[], command: string): { name: string; arguments: string } {
  if (tools.includes('exec_command')) {
    return {
      name: 'exec_command',
      arguments: JSON.stringify({
        cmd: command,
        yield_time_ms: 10_000,
        sandbox_permissions: 'require_escalated',
        justification: 'The user asked me to run this command.',
      }),
    };
  }
  return {
    name: 'shell',
    arguments: JSON.stringify({
      command: ['bash', '-lc', command],
      with_escalated_permissions: true,
      justification: 'The user asked me to run this command.',
    }),
  };
}

function streamResponses(res: ServerResponse, model: string, step: Step, tools: string[], u: Reported): void {
  const out = sse(res);
  const responseId = id('resp');
  const base = {
    id: responseId,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    model,
    status: 'in_progress',
    output: [] as unknown[],
  };
  out.send('response.created', { type: 'response.created', sequence_number: 0, response: base });
  let seq = 1;
  let item: Record<string, unknown>;
  if (step.kind !== 'text') {
    const call =
      step.kind === 'tool'
        ? codexCall(tools, step.command)
        : { ...namespaced(step.tool), arguments: JSON.stringify(step.args) };
    item = { id: id('fc'), type: 'function_call', status: 'completed', call_id: id('call'), ...call };
    out.send('response.output_item.added', {
      type: 'response.output_item.added',
      sequence_number: seq++,
      output_index: 0,
      item: { ...item, arguments: '', status: 'in_progress' },
    });
    for (const p of pieces(call.arguments))
      out.send('response.function_call_arguments.delta', {
        type: 'response.function_call_arguments.delta',
        sequence_number: seq++,
        item_id: item.id,
        output_index: 0,
        delta: p,
      });
  } else {
    const itemId = id('msg');
    item = {
      id: itemId,
      type: 'message',
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: step.text, annotations: [] }],
    };
    out.send('response.output_item.added', {
      type: 'response.output_item.added',
      sequence_number: seq++,
      output_index: 0,
      item: { id: itemId, type: 'message', status: 'in_progress', role: 'assistant', content: [] },
    });
    for (const p of pieces(step.text))
      out.send('response.output_text.delta', {
        type: 'response.output_text.delta',
        sequence_number: seq++,
        item_id: itemId,
        output_index: 0,
        content_index: 0,
        delta: p,
      });
  }
  out.send('response.output_item.done', {
    type: 'response.output_item.done',
    sequence_number: seq++,
    output_index: 0,
    item,
  });
  const usage = {
    input_tokens: u.input + u.cacheRead,
    input_tokens_details: { cached_tokens: u.cacheRead },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.input + u.cacheRead + u.output,
  };
  out.send('response.completed', {
    type: 'response.completed',
    sequence_number: seq++,
    response: { ...base, status: 'completed', output: [item], usage },
  });
  out.end();
}

/** Chat Completions' usage: prompt tokens include the cached ones. */
const chatUsage = (u: Reported) => ({
  prompt_tokens: u.input + u.cacheRead,
  completion_tokens: u.output,
  total_tokens: u.input + u.cacheRead + u.output,
  prompt_tokens_details: { cached_tokens: u.cacheRead },
});

function streamChat(res: ServerResponse, model: string, step: Step, shell: string, usage: Reported | null): void {
  const out = sse(res);
  const chunkId = id('chatcmpl');
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta: unknown, finish: string | null) => ({
    id: chunkId,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  out.send(null, chunk({ role: 'assistant', content: '' }, null));
  if (step.kind !== 'text') {
    const name = step.kind === 'tool' ? shell : step.tool;
    const args =
      step.kind === 'tool'
        ? JSON.stringify({ command: step.command, description: 'Run the requested command' })
        : JSON.stringify(step.args);
    const callId = id('call');
    pieces(args).forEach((p, i) =>
      out.send(
        null,
        chunk(
          {
            tool_calls: [
              {
                index: 0,
                ...(i === 0
                  ? { id: callId, type: 'function', function: { name, arguments: p } }
                  : { function: { arguments: p } }),
              },
            ],
          },
          null,
        ),
      ),
    );
    out.send(null, chunk({}, 'tool_calls'));
  } else {
    for (const p of pieces(step.text)) out.send(null, chunk({ content: p }, null));
    out.send(null, chunk({}, 'stop'));
  }
  if (usage)
    out.send(null, {
      id: chunkId,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [],
      usage: chatUsage(usage),
    });
  out.send(null, '[DONE]');
  out.end();
}

export function startOpenAiApi(key: string): Promise<ModelApiServer> {
  return ModelApiServer.start(key, (req, res, body, api) => {
    const path = (req.url ?? '').split('?')[0]!;
    const presented = header(req, 'authorization')?.replace(/^Bearer /i, '');
    const authorized = presented === api.key;
    const model =
      body && typeof body === 'object' && typeof (body as { model?: unknown }).model === 'string'
        ? (body as { model: string }).model
        : null;
    const tools = toolNames((body as { tools?: unknown[] } | null)?.tools ?? []);
    const asked = api.record({ method: req.method ?? '', path, model, authorized, tools, body });
    if (!authorized) {
      return json(res, 401, {
        error: {
          message: `Incorrect API key provided: ${mask(presented ?? '')}. You can find your API key at https://platform.openai.com/account/api-keys.`,
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
      });
    }
    if (req.method === 'GET' && path === '/v1/models') {
      return json(res, 200, {
        object: 'list',
        data: [{ id: 'gpt-5', object: 'model', created: 1754000000, owned_by: 'openai' }],
      });
    }
    if (req.method === 'POST' && path === '/v1/responses') {
      const b = ResponsesBody.safeParse(body);
      if (!b.success)
        return json(res, 400, {
          error: {
            message: b.error.issues[0]?.message ?? 'invalid body',
            type: 'invalid_request_error',
            param: null,
            code: null,
          },
        });
      const step: Step = tools.length
        ? nextStep(responsesEntries(b.data.input), tools)
        : { kind: 'text', text: 'Shell session' };
      if (tools.length) asked.answered = answered(step);
      return streamResponses(res, b.data.model, step, tools, api.report(asked));
    }
    if (req.method === 'POST' && path === '/v1/chat/completions') {
      const b = ChatBody.safeParse(body);
      if (!b.success)
        return json(res, 400, {
          error: {
            message: b.error.issues[0]?.message ?? 'invalid body',
            type: 'invalid_request_error',
            param: null,
            code: null,
          },
        });
      const shell = tools.find((t) => t === 'bash' || t === 'shell');
      const step: Step = shell
        ? nextStep(chatEntries(b.data.messages), tools)
        : { kind: 'text', text: 'Shell session' };
      if (shell) asked.answered = answered(step);
      const includeUsage =
        (body as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage === true;
      if (b.data.stream === false) {
        const fn =
          step.kind === 'tool'
            ? {
                name: shell,
                arguments: JSON.stringify({ command: step.command, description: 'Run the requested command' }),
              }
            : step.kind === 'call'
              ? { name: step.tool, arguments: JSON.stringify(step.args) }
              : null;
        const message = fn
          ? { role: 'assistant', content: null, tool_calls: [{ id: id('call'), type: 'function', function: fn }] }
          : { role: 'assistant', content: step.kind === 'text' ? step.text : '' };
        return json(res, 200, {
          id: id('chatcmpl'),
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: b.data.model,
          choices: [{ index: 0, message, finish_reason: fn ? 'tool_calls' : 'stop' }],
          usage: chatUsage(api.report(asked)),
        });
      }
      return streamChat(res, b.data.model, step, shell ?? 'bash', includeUsage ? api.report(asked) : null);
    }
    return json(res, 404, {
      error: {
        message: `Unknown request URL: ${req.method} ${path}`,
        type: 'invalid_request_error',
        param: null,
        code: 'unknown_url',
      },
    });
  });
}
