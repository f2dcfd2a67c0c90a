/**
 * Codex (codex-acp 1.1.14, Codex 0.147) through Fountain against a local OpenAI Responses API: the
 * gateway is a model provider in $CODEX_HOME/config.toml, the key only in the adapter's env.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startOpenAiApi } from '../model-apis/openai.ts';
import { assertRealRun, realAgentConversation, type RealAgentCase } from './harness.ts';

const CODEX: RealAgentCase = {
  runtime: 'codex',
  model: 'openai/gpt-5',
  credential: 'openai_api_key',
  keyPrefix: 'sk-proj-',
  startApi: startOpenAiApi,
  baseUrl: (api) => `${api.url}/v1`,
  modelAsked: 'gpt-5',
  workdir: (dir) => dir,
};

describe('codex: a real turn through the public API', { timeout: 600_000 }, () => {
  it('runs, asks, remembers across a park, fails with words on a refused key, and leaks nothing', async () => {
    const r = await realAgentConversation(CODEX);
    assertRealRun(CODEX, r);
    assert.ok(r.api.asked.some((a) => a.path === '/v1/responses'), 'Codex spoke the Responses API');
  });
});
