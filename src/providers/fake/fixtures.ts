/**
 * Conformance fixtures in the fake's script vocabulary; the runner's fake daemon speaks the
 * same vocabulary, so its conformance run can reuse them.
 */
import type { ConformanceFixtures } from '../../sandbox/conformance/options.ts';

export const FAKE_FIXTURES: ConformanceFixtures = {
  execOk: { cmd: 'fake', args: ['out:hello-conformance\n', 'exit:0'], expectedStdout: 'hello-conformance' },
  execFail: { cmd: 'fake', args: ['out:failing\n', 'err:bad\n', 'exit:3'], nonzeroCode: 3 },
  spawnOk: { cmd: 'fake', args: ['out:spawned-ok\n'] },
  spawnDrop: { cmd: 'fake', args: ['out:about-to-drop\n', 'drop'] },
  spawnStay: { cmd: 'fake', args: ['out:ready\n', 'stay'] },
};
