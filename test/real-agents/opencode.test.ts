/**
 * opencode (`opencode-ai@1.18.33`, `opencode acp`) through Fountain against a local OpenAI Chat
 * Completions API: its openai-compatible provider in opencode.json, the key referenced as
 * `{env:OPENAI_API_KEY}`, and `ask` for bash so the permission reaches Fountain.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startOpenAiApi } from '../model-apis/openai.ts';
import { join } from 'node:path';
import { assertRealRun, assertToolsReached, realAgentConversation, type RealAgentCase } from './harness.ts';

const OPENCODE: RealAgentCase = {
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
};

describe('opencode: a real turn through the public API', { timeout: 600_000 }, () => {
  it('runs, asks, reaches its skill and MCP servers, remembers across a park, fails with words on a refused key, and leaks nothing', async () => {
    const r = await realAgentConversation(OPENCODE);
    assertRealRun(OPENCODE, r);
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
  });
});
