/**
 * A local OpenAI API: the Responses API Codex uses (`POST /v1/responses`, SSE `response.created`,
 * `response.output_item.added`, `response.output_text.delta`, `response.output_item.done`,
 * `response.completed`) and Chat Completions as opencode's openai-compatible provider uses it
 * (`POST /v1/chat/completions`, chunks then `[DONE]`), plus `GET /v1/models`. A wrong key gets
 * OpenAI's 401 `invalid_api_key` with the key masked, as OpenAI does; an image part that is not a
 * base64 data URL of an image gets OpenAI's 400 naming the field.
 */
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { base64Bytes, header, json, ModelApiServer, pieces, sse, type Reported, type SentImage } from './server.ts';
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

const Detail = z.enum(['low', 'high', 'auto']).optional();
/** The Responses API's image part: a URL (here a data URL) or an uploaded file's id. */
const ResponsesImage = z.looseObject({
  type: z.literal('input_image'),
  image_url: z.string().nullish(),
  file_id: z.string().nullish(),
  detail: Detail,
});
/** Chat Completions' image part. */
const ChatImage = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({ url: z.string(), detail: Detail }),
});
const Parts = z.array(z.looseObject({ type: z.string().optional() }));

/** What a body's image parts came to: each image inline, or OpenAI's words and field for the first it refuses. */
interface ImageParts {
  readonly images: SentImage[];
  readonly refused: { readonly message: string; readonly param: string } | null;
}

/**
 * An image URL as OpenAI reads one: a base64 data URL of PNG, JPEG, GIF or WebP is the image; an http(s)
 * URL OpenAI would fetch (none is fetched here, so it is no image of the record); anything else is refused.
 */
function urlImage(url: string, param: string, into: SentImage[]): ImageParts['refused'] {
  if (/^https?:\/\//.test(url)) return null;
  const expected = `Invalid '${param}'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got`;
  const m = /^data:([^;,]*);base64,(.*)$/s.exec(url);
  if (!m) return { message: `${expected} a value that is not one.`, param };
  const [, type, data] = m as unknown as [string, string, string];
  if (!/^image\/(png|jpeg|gif|webp)$/.test(type))
    return { message: `${expected} an unsupported MIME type '${type}'.`, param };
  const bytes = base64Bytes(data);
  if (!bytes)
    return {
      message: `${expected} ${data ? 'an invalid base64-encoded value' : 'empty base64-encoded bytes'}.`,
      param,
    };
  into.push({ media_type: type, bytes });
  return null;
}

/** The image parts of the user messages, by the API's own part shape and the field path its errors name. */
function imageParts(
  messages: ReadonlyArray<{ role?: string; content?: unknown }>,
  list: string,
  kind: 'input_image' | 'image_url',
): ImageParts {
  const images: SentImage[] = [];
  for (const [i, m] of messages.entries()) {
    const parts = Parts.safeParse(m.content);
    if (!parts.success) continue;
    for (const [j, part] of parts.data.entries()) {
      if (part.type !== kind) continue;
      const at = `${list}[${i}].content[${j}]`;
      let refused: ImageParts['refused'];
      if (kind === 'input_image') {
        const p = ResponsesImage.safeParse(part);
        if (!p.success) refused = { message: `Invalid '${at}': ${p.error.issues[0]?.message}`, param: at };
        else if (p.data.image_url) refused = urlImage(p.data.image_url, `${at}.image_url`, images);
        else if (p.data.file_id) refused = null;
        else refused = { message: `Invalid '${at}': one of image_url or file_id is required.`, param: at };
      } else {
        const p = ChatImage.safeParse(part);
        refused = p.success
          ? urlImage(p.data.image_url.url, `${at}.image_url.url`, images)
          : { message: `Invalid '${at}': ${p.error.issues[0]?.message}`, param: at };
      }
      if (refused) return { images, refused };
      if (m.role !== 'user')
        return { images, refused: { message: `Image content is only allowed in user messages.`, param: at } };
    }
  }
  return { images, refused: null };
}

const responsesImages = (b: z.infer<typeof ResponsesBody>): ImageParts =>
  typeof b.input === 'string' ? { images: [], refused: null } : imageParts(b.input, 'input', 'input_image');
const chatImages = (b: z.infer<typeof ChatBody>): ImageParts => imageParts(b.messages, 'messages', 'image_url');

/** The images of a recorded Responses API request (`input_image` parts with a data URL), decoded. */
export function responsesImagesIn(body: unknown): SentImage[] {
  const b = ResponsesBody.safeParse(body);
  return b.success ? responsesImages(b.data).images : [];
}

/** The images of a recorded Chat Completions request (`image_url` parts with a data URL), decoded. */
export function chatImagesIn(body: unknown): SentImage[] {
  const b = ChatBody.safeParse(body);
  return b.success ? chatImages(b.data).images : [];
}

/** OpenAI's 400 for a request it cannot take. */
const badRequest = (res: ServerResponse, message: string, param: string | null = null, code: string | null = null) =>
  json(res, 400, { error: { message, type: 'invalid_request_error', param, code } });

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
      if (!b.success) return badRequest(res, b.error.issues[0]?.message ?? 'invalid body');
      const refused = responsesImages(b.data).refused;
      if (refused) return badRequest(res, refused.message, refused.param, 'invalid_value');
      const step: Step = tools.length
        ? nextStep(responsesEntries(b.data.input), tools)
        : { kind: 'text', text: 'Shell session' };
      if (tools.length) asked.answered = answered(step);
      return streamResponses(res, b.data.model, step, tools, api.report(asked));
    }
    if (req.method === 'POST' && path === '/v1/chat/completions') {
      const b = ChatBody.safeParse(body);
      if (!b.success) return badRequest(res, b.error.issues[0]?.message ?? 'invalid body');
      const refused = chatImages(b.data).refused;
      if (refused) return badRequest(res, refused.message, refused.param, 'invalid_value');
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
