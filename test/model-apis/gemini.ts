/**
 * A local Gemini API as gemini-cli uses it: `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`
 * (SSE chunks of candidates; text parts or a `functionCall` part), `:generateContent`, and
 * `GET /v1beta/models`. The key comes as `x-goog-api-key` (or `?key=`); a wrong one gets what Google
 * really answers: 400 INVALID_ARGUMENT with reason API_KEY_INVALID, not a 401. An `inlineData` part
 * whose bytes are not base64, or whose type Gemini does not take, gets Gemini's 400 INVALID_ARGUMENT.
 */
import { z } from 'zod';
import { base64Bytes, header, json, ModelApiServer, pieces, sse, type Reported, type SentImage } from './server.ts';
import { answered, nextStep, type Entry, type Step } from './script.ts';

/** Inline bytes as the REST API takes them: camelCase as the SDKs send, or the snake_case of Google's examples. */
const InlineData = z.union([
  z.looseObject({ mimeType: z.string(), data: z.string() }),
  z
    .looseObject({ mime_type: z.string(), data: z.string() })
    .transform((d) => ({ mimeType: d.mime_type, data: d.data })),
]);
/** The image types Gemini's image understanding documents. */
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/heic', 'image/heif'];
const Part = z.looseObject({
  text: z.string().optional(),
  inlineData: InlineData.optional(),
  inline_data: InlineData.optional(),
  functionCall: z.unknown().optional(),
  functionResponse: z.looseObject({ response: z.unknown().optional() }).optional(),
});
const Body = z.looseObject({
  contents: z.array(z.looseObject({ role: z.string().optional(), parts: z.array(Part) })),
  tools: z
    .array(z.looseObject({ functionDeclarations: z.array(z.looseObject({ name: z.string() })).optional() }))
    .optional(),
});

const KEY_INVALID = {
  error: {
    code: 400,
    message: 'API key not valid. Please pass a valid API key.',
    status: 'INVALID_ARGUMENT',
    details: [
      {
        '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
        reason: 'API_KEY_INVALID',
        domain: 'googleapis.com',
        metadata: { service: 'generativelanguage.googleapis.com' },
      },
    ],
  },
};

/** A body's inline images, or Gemini's words for the first part it cannot take. */
function inlineImages(contents: z.infer<typeof Body>['contents']): { images: SentImage[]; refused: string | null } {
  const images: SentImage[] = [];
  for (const [i, c] of contents.entries())
    for (const [j, p] of c.parts.entries()) {
      const inline = p.inlineData ?? p.inline_data;
      if (!inline) continue;
      const at = `contents[${i}].parts[${j}].inline_data`;
      const bytes = base64Bytes(inline.data);
      if (!bytes) return { images, refused: `Invalid value at '${at}.data' (TYPE_BYTES), Base64 decoding failed` };
      // Gemini reads inline PDFs, audio and video too; only images are recorded.
      if (!inline.mimeType.startsWith('image/')) continue;
      if (!IMAGE_TYPES.includes(inline.mimeType))
        return { images, refused: `Unsupported MIME type: ${inline.mimeType}` };
      images.push({ media_type: inline.mimeType, bytes });
    }
  return { images, refused: null };
}

/** The images of a recorded generateContent request (`inlineData` parts), decoded. */
export function geminiImagesIn(body: unknown): SentImage[] {
  const b = Body.safeParse(body);
  return b.success ? inlineImages(b.data.contents).images : [];
}

function entries(contents: z.infer<typeof Body>['contents']): Entry[] {
  return contents.map((c): Entry => {
    const fr = c.parts.find((p) => p.functionResponse);
    if (fr) return { role: 'tool_result', text: JSON.stringify(fr.functionResponse?.response ?? '') };
    const text = c.parts.map((p) => p.text ?? (p.functionCall ? JSON.stringify(p.functionCall) : '')).join('\n');
    return { role: c.role === 'model' ? 'assistant' : 'user', text };
  });
}

function candidate(parts: unknown[], finish: string | null, model: string, u: Reported | null) {
  const usageMetadata = u && {
    promptTokenCount: u.input + u.cacheRead,
    candidatesTokenCount: u.output,
    totalTokenCount: u.input + u.cacheRead + u.output,
    ...(u.cacheRead ? { cachedContentTokenCount: u.cacheRead } : {}),
  };
  return {
    candidates: [{ content: { parts, role: 'model' }, index: 0, ...(finish ? { finishReason: finish } : {}) }],
    ...(usageMetadata ? { usageMetadata } : {}),
    modelVersion: model,
    responseId: `r${Date.now().toString(36)}`,
  };
}

export function startGeminiApi(key: string): Promise<ModelApiServer> {
  return ModelApiServer.start(key, (req, res, body, api) => {
    const url = new URL(req.url ?? '/', 'http://local');
    const path = url.pathname;
    const presented = header(req, 'x-goog-api-key') ?? url.searchParams.get('key') ?? undefined;
    const authorized = presented === api.key;
    const m = /^\/v1beta\/models\/([^:/]+):(streamGenerateContent|generateContent|countTokens)$/.exec(path);
    const parsed = Body.safeParse(body);
    const tools = parsed.success
      ? (parsed.data.tools ?? []).flatMap((t) => (t.functionDeclarations ?? []).map((f) => f.name))
      : [];
    const asked = api.record({ method: req.method ?? '', path, model: m?.[1] ?? null, authorized, tools, body });
    if (!authorized) return json(res, 400, KEY_INVALID);
    if (req.method === 'GET' && path === '/v1beta/models') {
      return json(res, 200, {
        models: [
          {
            name: 'models/gemini-2.5-flash',
            displayName: 'Gemini 2.5 Flash',
            supportedGenerationMethods: ['generateContent', 'countTokens'],
          },
        ],
      });
    }
    if (req.method !== 'POST' || !m)
      return json(res, 404, { error: { code: 404, message: `no route ${req.method} ${path}`, status: 'NOT_FOUND' } });
    // Counted or generated, a part Gemini cannot read is refused alike.
    const refused = parsed.success ? inlineImages(parsed.data.contents).refused : null;
    if (m[2] === 'countTokens' && !refused) return json(res, 200, { totalTokens: 120 });
    if (!parsed.success || refused)
      return json(res, 400, {
        error: {
          code: 400,
          message: refused ?? parsed.error?.issues[0]?.message ?? 'invalid body',
          status: 'INVALID_ARGUMENT',
        },
      });
    const shell = tools.find((t) => t === 'run_shell_command');
    const step: Step = shell
      ? nextStep(entries(parsed.data.contents), tools)
      : { kind: 'text', text: '{"next_speaker": "user", "reasoning": "The model answered."}' };
    if (shell) asked.answered = answered(step);
    const model = m[1]!;
    const parts =
      step.kind === 'tool'
        ? [
            [
              {
                functionCall: {
                  name: shell,
                  args: { command: step.command, description: 'Run the requested command' },
                },
              },
            ],
          ]
        : step.kind === 'call'
          ? [[{ functionCall: { name: step.tool, args: step.args } }]]
          : pieces(step.text).map((t) => [{ text: t }]);
    const u = api.report(asked);
    if (m[2] === 'generateContent') return json(res, 200, candidate(parts.flat(), 'STOP', model, u));
    const out = sse(res);
    parts.forEach((p, i) =>
      out.send(null, candidate(p, i === parts.length - 1 ? 'STOP' : null, model, i === parts.length - 1 ? u : null)),
    );
    out.end();
  });
}
