/**
 * Claude Code (claude-agent-acp 0.66.0) through Fountain against a local Anthropic Messages API:
 * one real conversation, from the credential to a failed turn with a rotated key.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startAnthropicApi } from '../model-apis/anthropic.ts';
import { join } from 'node:path';
import { assertRealRun, assertToolsReached, realAgentConversation, type RealAgentCase } from './harness.ts';

const CLAUDE: RealAgentCase = {
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
};

describe('claude: a real turn through the public API', { timeout: 600_000 }, () => {
  it('runs, asks, reaches its skill and MCP servers, remembers across a park, fails with words on a refused key, and leaks nothing', async () => {
    const r = await realAgentConversation(CLAUDE);
    assertRealRun(CLAUDE, r);
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
  });
});
