/**
 * Gemini CLI through Fountain on a runner's process backend: one real conversation, from the
 * credential to a failed turn with a rotated key (the runtime's set-up and own checks in cases.ts).
 */
import { describe, it } from 'node:test';
import { GEMINI } from './cases.ts';
import { assertRealRun, realAgentConversation } from './harness.ts';

describe('gemini: a real turn through the public API', { timeout: 600_000 }, () => {
  it('runs, asks, reaches its skill and MCP servers, remembers across a park, fails with words on a refused key, and leaks nothing', async () => {
    const r = await realAgentConversation(GEMINI);
    assertRealRun(GEMINI, r);
    GEMINI.check(r);
  });
});
