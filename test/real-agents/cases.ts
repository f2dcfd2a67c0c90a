/**
 * The four real runtimes as the real-agents tests run them: how each is set up (model, credential,
 * model API, where it works, its files) and its own checks beyond assertRealRun, on either backend.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { imagesIn, startAnthropicApi } from '../model-apis/anthropic.ts';
import { geminiImagesIn, startGeminiApi } from '../model-apis/gemini.ts';
import { chatImagesIn, responsesImagesIn, startOpenAiApi } from '../model-apis/openai.ts';
import type { SentImage } from '../model-apis/server.ts';
import { assertToolsReached, type RealAgentCase, type RealAgentRun } from './harness.ts';

export interface RuntimeCase extends RealAgentCase {
  /** The runtime's own checks of a run, beyond assertRealRun. */
  check(r: RealAgentRun): void;
}

/**
 * Claude Code (claude-agent-acp 0.66.0) through Fountain against a local Anthropic Messages API:
 * one real conversation, from the credential to a failed turn with a rotated key.
 */
export const CLAUDE: RuntimeCase = {
  runtime: 'claude',
  model: 'anthropic/claude-sonnet-4-5',
  credential: 'anthropic_api_key',
  keyPrefix: 'sk-ant-api03-',
  startApi: startAnthropicApi,
  baseUrl: (api) => api.url,
  modelAsked: 'claude-sonnet-4-5',
  workdir: (dir) => dir,
  settingsFiles: ['.claude/settings.json'],
  deliveredFiles: (dir) => [
    join(dir, '.mcp.json'),
    join(dir, '.claude', 'settings.json'),
    join(dir, '.claude', 'skills', 'fountain-probe', 'SKILL.md'),
  ],
  writesFile: true,
  sendsImage: true,
  check(r) {
    if (r.scope === 'full') checkClaudeImageAndEdit(r);
    // the project's .mcp.json in the ACP cwd, switched on by enableAllProjectMcpServers in ~/.claude/settings.json.
    const [mcpJson, settings, skill] = CLAUDE.deliveredFiles(r.sandboxDir).map((f) => r.tools.delivered[f]!);
    const servers = JSON.parse(mcpJson!).mcpServers;
    assert.deepEqual(Object.keys(servers).sort(), ['probe-http', 'probe-stdio']);
    assert.equal(
      servers['probe-http'].headers.Authorization,
      'Bearer ${PROBE_HTTP_TOKEN}',
      'the secret stays a reference Claude Code expands from its env',
    );
    assert.equal(JSON.parse(settings!).enableAllProjectMcpServers, true);
    assert.match(skill!, /name: fountain-probe/);
    assertToolsReached(r, { mcpCallsAsk: true });
    // Claude Code calls HEAD /api/hello and sends its key as x-api-key.
    assert.ok(r.api.asked.some((a) => a.path === '/v1/messages' && a.tools.includes('Bash')));
  },
};

/**
 * Codex (codex-acp 1.1.14, Codex 0.147) through Fountain against a local OpenAI Responses API: the
 * gateway is a model provider in $CODEX_HOME/config.toml, the key only in the adapter's env.
 */
export const CODEX: RuntimeCase = {
  runtime: 'codex',
  model: 'openai/gpt-5',
  credential: 'openai_api_key',
  keyPrefix: 'sk-proj-',
  startApi: startOpenAiApi,
  baseUrl: (api) => `${api.url}/v1`,
  modelAsked: 'gpt-5',
  workdir: (dir) => dir,
  settingsFiles: ['.codex/config.toml'],
  deliveredFiles: (dir) => [
    join(dir, '.mcp.json'),
    join(dir, '.codex', 'config.toml'),
    join(dir, '.codex', 'skills', 'fountain-probe', 'SKILL.md'),
  ],
  sendsImage: true,
  check(r) {
    // Codex sends the picture on as an `input_image` part with a data URL.
    if (r.scope === 'full')
      assertImageArrived(
        r,
        r.api.asked.flatMap((a) => (a.path === '/v1/responses' ? responsesImagesIn(a.body) : [])),
      );
    // the MCP servers go in ACP session/new, so no file names them.
    const [mcpJson, config, skill] = CODEX.deliveredFiles(r.sandboxDir).map((f) => r.tools.delivered[f]!);
    assert.equal(mcpJson, '(absent)');
    assert.doesNotMatch(config!, /probe/);
    assert.match(skill!, /name: fountain-probe/);
    assertToolsReached(r, { mcpCallsAsk: true });
    assert.ok(
      r.api.asked.some((a) => a.path === '/v1/responses'),
      'Codex spoke the Responses API',
    );
  },
};

/**
 * Gemini CLI (`@google/gemini-cli@0.61.0 --acp`) through Fountain against a local Gemini API
 * (streamGenerateContent over SSE): GOOGLE_GEMINI_BASE_URL selects the gateway, the key is
 * GEMINI_API_KEY in the agent's env only.
 */
export const GEMINI: RuntimeCase = {
  runtime: 'gemini',
  model: 'google/gemini-2.5-flash',
  credential: 'gemini_api_key',
  keyPrefix: 'AIza',
  startApi: startGeminiApi,
  baseUrl: (api) => api.url,
  modelAsked: 'gemini-2.5-flash',
  workdir: (dir) => join(dir, 'gemini-workspace'),
  settingsFiles: ['.gemini/settings.json'],
  deliveredFiles: (dir) => [
    join(dir, '.gemini', 'settings.json'),
    join(dir, '.gemini', 'skills', 'fountain-probe', 'SKILL.md'),
  ],
  sendsImage: true,
  check(r) {
    // gemini-cli sends the picture on as an `inlineData` part.
    if (r.scope === 'full')
      assertImageArrived(
        r,
        r.api.asked.flatMap((a) => (/:(stream)?[gG]enerateContent$/.test(a.path) ? geminiImagesIn(a.body) : [])),
      );
    // the MCP servers in $HOME/.gemini/settings.json, beside the settings the credential's delivery writes there.
    const [settingsJson, skill] = GEMINI.deliveredFiles(r.sandboxDir).map((f) => r.tools.delivered[f]!);
    const settings = JSON.parse(settingsJson!);
    assert.deepEqual(Object.keys(settings.mcpServers ?? {}).sort(), ['probe-http', 'probe-stdio'], settingsJson);
    assert.equal(
      settings.mcpServers['probe-http'].headers.Authorization,
      'Bearer ${PROBE_HTTP_TOKEN}',
      'the secret stays a reference gemini expands from its env',
    );
    assert.equal(settings.privacy?.usageStatisticsEnabled, false, settingsJson);
    assert.match(skill!, /name: fountain-probe/);
    assertToolsReached(r, { mcpCallsAsk: true });
    assert.ok(r.api.asked.some((a) => a.path.endsWith(':streamGenerateContent')));
  },
};

/**
 * opencode (`opencode-ai@1.18.33`, `opencode acp`) through Fountain against a local OpenAI Chat
 * Completions API: its openai-compatible provider in opencode.json, the key referenced as
 * `{env:OPENAI_API_KEY}`, and `ask` for bash so the permission reaches Fountain.
 */
export const OPENCODE: RuntimeCase = {
  runtime: 'opencode',
  model: 'openai/gpt-5',
  credential: 'openai_api_key',
  keyPrefix: 'sk-proj-',
  startApi: startOpenAiApi,
  baseUrl: (api) => `${api.url}/v1`,
  modelAsked: 'gpt-5',
  workdir: (dir) => join(dir, 'opencode-workspace'),
  settingsFiles: ['.config/opencode/opencode.json'],
  deliveredFiles: (dir) => [
    join(dir, 'opencode-workspace', '.mcp.json'),
    join(dir, '.config', 'opencode', 'opencode.json'),
    join(dir, '.config', 'opencode', 'skills', 'fountain-probe', 'SKILL.md'),
  ],
  sendsImage: true,
  check(r) {
    // opencode sends the picture on as an `image_url` part with a data URL.
    if (r.scope === 'full')
      assertImageArrived(
        r,
        r.api.asked.flatMap((a) => (a.path === '/v1/chat/completions' ? chatImagesIn(a.body) : [])),
      );
    // the MCP servers go in ACP session/new, so no file names them.
    const [mcpJson, config, skill] = OPENCODE.deliveredFiles(r.sandboxDir).map((f) => r.tools.delivered[f]!);
    assert.equal(mcpJson, '(absent)');
    // Only the `ask` for the MCP servers' tools (`<server>_*`), so they reach Fountain's policy as bash does.
    assert.deepEqual(
      Object.keys(JSON.parse(config!).permission)
        .filter((k) => k.includes('probe'))
        .sort(),
      ['probe-http_*', 'probe-stdio_*'],
      config,
    );
    assert.match(skill!, /name: fountain-probe/);
    assertToolsReached(r, { mcpCallsAsk: true });
    assert.ok(
      r.api.asked.some((a) => a.path === '/v1/chat/completions'),
      'opencode spoke Chat Completions',
    );
  },
};

/** Claude Code's image turn and its Write tool call (the full scope's extra turns). */
function checkClaudeImageAndEdit(r: RealAgentRun): void {
  // The image turn: Claude Code sent the picture on to the model as an image block.
  assertImageArrived(
    r,
    r.api.asked.flatMap((a) => (a.path === '/v1/messages' ? imagesIn(a.body) : [])),
  );
  // Claude Code's Write tool call, as the conversation page's files panel reads it: one file, +1 −0, its diff.
  const edit = r.edit!;
  assert.equal(edit.turn?.status, 'completed', JSON.stringify(edit.turn));
  const written = edit.files.find((f) => f.path === edit.file);
  assert.ok(written, `the files panel lists ${edit.file}: ${JSON.stringify(edit.files)}`);
  assert.deepEqual([written.added, written.removed], [1, 0]);
  assert.match(JSON.stringify(written.edits), /written by the agent/);
}

/**
 * The image turn completed and the model API received the harness's PNG whole: its 48×32 size in the
 * IHDR and its IEND chunk last. Read, not compared byte for byte: an adapter may re-encode the picture.
 */
function assertImageArrived(r: RealAgentRun, sent: readonly SentImage[]): void {
  assert.equal(r.imageTurn?.status, 'completed', JSON.stringify(r.imageTurn));
  assert.ok(sent.length > 0, 'the model API received an image');
  const png = sent.find((i) => i.media_type === 'image/png');
  assert.ok(png, `a PNG among ${JSON.stringify(sent.map((i) => i.media_type))}`);
  assert.equal(png.bytes.subarray(12, 16).toString('latin1'), 'IHDR', 'its header chunk first');
  assert.deepEqual([png.bytes.readUInt32BE(16), png.bytes.readUInt32BE(20)], [48, 32], 'its 48×32 pixels');
  assert.equal(png.bytes.subarray(-8, -4).toString('latin1'), 'IEND', 'its end chunk last: not cut short');
}
