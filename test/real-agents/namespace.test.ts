/**
 * Claude Code, Codex and Gemini CLI on a namespace runner (bubblewrap, the sandbox's own uid, a private
 * /tmp, egress only through the runner's proxy): the same conversation and checks as each runtime's own
 * file on the process backend. Needs root, bubblewrap and nftables (skipped otherwise, with the reason).
 */
import { describe, it } from 'node:test';
import { namespaceSupportProblem } from '../../src/runner/backends/namespace/index.ts';
import { CLAUDE, CODEX, GEMINI } from './cases.ts';
import { assertRealRun, realAgentConversation } from './harness.ts';

const nsProblem = namespaceSupportProblem();

describe('real agents on a namespace runner', { skip: nsProblem ?? false, concurrency: 1 }, () => {
  // opencode is not run here yet: its install (opencode-ai and its two ~150 MB platform binaries, two
  // sandboxes at once) was killed by provisioning's 180 s install timeout in both runs on a loaded machine
  // (load 25 on 2 cores); whether it fits on an idle one is not known.
  for (const c of [CLAUDE, CODEX, GEMINI]) {
    it(`${c.runtime}: the whole conversation, its tools and its checks, with the runtime confined`, {
      // A loaded machine (2 cores shared) takes up to ten minutes for one runtime: install, five turns, two parks.
      timeout: 900_000,
    }, async () => {
      const r = await realAgentConversation(c, { backend: 'namespace' });
      assertRealRun(c, r);
      c.check(r);
    });
  }
});
