/**
 * Gemini CLI (`@google/gemini-cli@0.61.0 --acp`) through Fountain against a local Gemini API
 * (streamGenerateContent over SSE): GOOGLE_GEMINI_BASE_URL selects the gateway, the key is
 * GEMINI_API_KEY in the agent's env only.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startGeminiApi } from '../model-apis/gemini.ts';
import { join } from 'node:path';
import { assertRealRun, assertToolsReached, realAgentConversation, type RealAgentCase } from './harness.ts';

const GEMINI: RealAgentCase = {
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
};

describe('gemini: a real turn through the public API', { timeout: 600_000 }, () => {
  it('runs, asks, reaches its skill and MCP servers, remembers across a park, fails with words on a refused key, and leaks nothing', async () => {
    const r = await realAgentConversation(GEMINI);
    assertRealRun(GEMINI, r);
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
  });
});
