/**
 * Codex (codex-acp 1.1.14, Codex 0.147) through Fountain against a local OpenAI Responses API: the
 * gateway is a model provider in $CODEX_HOME/config.toml, the key only in the adapter's env.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startOpenAiApi } from '../model-apis/openai.ts';
import { join } from 'node:path';
import { assertRealRun, assertToolsReached, realAgentConversation, type RealAgentCase } from './harness.ts';

const CODEX: RealAgentCase = {
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
};

describe('codex: a real turn through the public API', { timeout: 600_000 }, () => {
  it('runs, asks, reaches its skill and MCP servers, remembers across a park, fails with words on a refused key, and leaks nothing', async () => {
    const r = await realAgentConversation(CODEX);
    assertRealRun(CODEX, r);
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
  });
});
