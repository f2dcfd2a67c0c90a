/**
 * Gemini CLI (`@google/gemini-cli@0.61.0 --acp`) through Fountain against a local Gemini API
 * (streamGenerateContent over SSE): GOOGLE_GEMINI_BASE_URL selects the gateway, the key is
 * GEMINI_API_KEY in the agent's env only.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startGeminiApi } from '../model-apis/gemini.ts';
import { assertRealRun, realAgentConversation, type RealAgentCase } from './harness.ts';

const GEMINI: RealAgentCase = {
  runtime: 'gemini',
  model: 'google/gemini-2.5-flash',
  credential: 'gemini_api_key',
  keyPrefix: 'AIza',
  startApi: startGeminiApi,
  baseUrl: (api) => api.url,
  modelAsked: 'gemini-2.5-flash',
  // HOME is the machine's temporary directory on the process backend (platform-api.md §13).
  workdir: () => `/${'tmp'}/gemini-workspace`,
};

describe('gemini: a real turn through the public API', { timeout: 600_000 }, () => {
  it('runs, asks, remembers across a park, fails with words on a refused key, and leaks nothing', async () => {
    const r = await realAgentConversation(GEMINI);
    assertRealRun(GEMINI, r);
    assert.ok(r.api.asked.some((a) => a.path.endsWith(':streamGenerateContent')));
  });
});
