/**
 * The conformance suite: the executable sandbox contract any adapter plugs into from a `*.test.ts`
 * file. Uses only the SandboxAdapter interface; the groups of optional parts run where a part exists.
 */
import { after, before, describe } from 'node:test';
import { SuiteContext } from './context.ts';
import { execGroup } from './exec.ts';
import { identityGroup } from './identity.ts';
import { lifecycleGroup } from './lifecycle.ts';
import type { ConformanceOptions } from './options.ts';
import { checkpointsGroup, networkGroup } from './optional-parts.ts';
import { robustnessGroup } from './robustness.ts';
import { sessionsGroup } from './sessions.ts';
import { streamingGroup } from './streaming.ts';

export type { CommandFixture, ConformanceFixtures, ConformanceOptions } from './options.ts';
export { SHELL_FIXTURES } from './options.ts';
export { FrameCollector, isTerminal, SETTLE_MS } from './frames.ts';
export type { FramePredicate, TerminalFrame } from './frames.ts';
export { DEFAULT_TIMEOUT_MS } from './context.ts';

/**
 * Registers `describe(label)` with every contract test. Tests run serially; handles and
 * commands the suite created are stopped and destroyed before `opts.after` runs.
 */
export function runConformanceSuite(label: string, opts: ConformanceOptions): void {
  describe(label, () => {
    const ctx = new SuiteContext(opts);
    before(async () => {
      await opts.before?.();
    });
    after(async () => {
      try {
        await ctx.cleanup();
      } finally {
        await opts.after?.();
      }
    });
    identityGroup(ctx);
    lifecycleGroup(ctx);
    execGroup(ctx);
    streamingGroup(ctx);
    sessionsGroup(ctx);
    networkGroup(ctx);
    checkpointsGroup(ctx);
    robustnessGroup(ctx);
  });
}
