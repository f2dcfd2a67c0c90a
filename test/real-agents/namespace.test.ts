/**
 * Claude Code, Codex, Gemini CLI and opencode on a namespace runner (bubblewrap, the sandbox's own uid, a
 * private /tmp, egress only through the runner's proxy): what confinement changes of each runtime's own file
 * on the process backend (the `confined` scope of the conversation). Needs root, bubblewrap and nftables
 * (skipped otherwise, with the reason).
 */
import { describe, it } from 'node:test';
import { namespaceSupportProblem } from '../../src/runner/backends/namespace/index.ts';
import { CLAUDE, CODEX, GEMINI, OPENCODE } from './cases.ts';
import { assertRealRun, realAgentConversation } from './harness.ts';

const nsProblem = namespaceSupportProblem();
/**
 * FOUNTAIN_REAL_AGENTS=opencode,codex runs only those runtimes' cases here (one runtime takes minutes on a
 * loaded machine); unset, all four run.
 */
const only = process.env.FOUNTAIN_REAL_AGENTS?.split(',').map((s) => s.trim()) ?? null;

// Two at a time: each has its own server, runner, subnet and probe address, and most of a run is waiting
// (model turns, parks); one after the other the four took the longest stretch of the suite.
describe('real agents on a namespace runner', { skip: nsProblem ?? false, concurrency: 2 }, () => {
  for (const c of [CLAUDE, CODEX, GEMINI, OPENCODE]) {
    it(`${c.runtime}: a turn, its tools, a park and a wake, and no secret or file outside, with the runtime confined`, {
      skip: only && !only.includes(c.runtime) ? `FOUNTAIN_REAL_AGENTS=${only.join(',')}` : false,
      // A loaded machine (2 cores shared) takes minutes for one runtime: install, three turns, a park.
      timeout: 900_000,
    }, async () => {
      const r = await realAgentConversation(c, { backend: 'namespace', scope: 'confined' });
      assertRealRun(c, r);
      c.check(r);
    });
  }
});
