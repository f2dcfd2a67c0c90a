/**
 * The contract's conformance suite against the E2B adapter and the loopback E2B stub
 * (real HTTP, real Connect envelopes, real processes), plus its transport and secret probes.
 */
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import { runConformanceSuite } from '../../sandbox/conformance/index.ts';
import { E2BStub } from '../../../test/stubs/e2b/server.ts';
import { E2BAdapter } from './index.ts';
import type { E2BTarget } from './index.ts';

const KEY = `e2b_conformance_${randomBytes(8).toString('hex')}`;
const DROP = '__E2B_STUB_DROP__';
let stub: E2BStub;
let adapter: E2BAdapter;

runConformanceSuite('e2b adapter conformance (stub)', {
  adapter: () => adapter,
  fixtures: {
    execOk: { cmd: 'sh', args: ['-c', 'echo conformance-ok'], expectedStdout: 'conformance-ok' },
    execFail: { cmd: 'sh', args: ['-c', 'echo failing >&2; exit 3'], nonzeroCode: 3 },
    spawnOk: { cmd: 'sh', args: ['-c', 'echo spawned'] },
    // The stub cuts the stream carrying this marker, as E2B's edge does to a dropped connection.
    spawnDrop: { cmd: 'sh', args: ['-c', `echo ${DROP}; sleep 30`] },
    spawnStay: { cmd: 'sh', args: ['-c', 'echo ready; exec cat'] },
  },
  name: () => `fountain-conform0-${randomBytes(4).toString('hex')}`,
  timeoutMs: 10_000,
  before: async () => {
    stub = await E2BStub.start({ apiKey: KEY, dropMarker: DROP });
    adapter = new E2BAdapter({
      apiKey: KEY,
      baseUrl: stub.apiUrl,
      sandboxUrl: stub.sandboxUrl,
      user: 'sprite',
      requestTimeoutMs: 10_000,
    });
  },
  after: async () => {
    adapter.close();
    await stub.stop();
  },
  readFile: async (handle, path) => {
    const r = await adapter.processes.exec(handle, 'cat', ['--', path]);
    return r.ok && r.value.exitCode === 0 ? r.value.output : null;
  },
  brokenTransport: async () => {
    // A stub that was running and is now stopped: its ports refuse connections.
    const gone = await E2BStub.start({ apiKey: KEY });
    const urls = { baseUrl: gone.apiUrl, sandboxUrl: gone.sandboxUrl };
    await gone.stop();
    const broken = new E2BAdapter({ apiKey: KEY, ...urls, requestTimeoutMs: 2_000 });
    return { adapter: broken, handle: broken.buildHandle(`fountain-conform0-${randomBytes(4).toString('hex')}`) };
  },
  secret: async () => {
    const created = await adapter.lifecycle.create(`fountain-conform0-${randomBytes(4).toString('hex')}`);
    assert.ok(created.ok);
    const target = created.value.private?.reveal() as E2BTarget;
    assert.ok(target.accessToken);
    return { handle: created.value, value: target.accessToken };
  },
});
