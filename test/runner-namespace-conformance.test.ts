/**
 * The sandbox conformance suite, governance included, against the runner adapter talking over a
 * real loopback WebSocket to a real daemon serving the namespace backend (root only).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync, rmdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runConformanceSuite, SHELL_FIXTURES } from '../src/sandbox/conformance/index.ts';
import { capabilitiesOf, mintRunnerName } from '../src/sandbox/index.ts';
import type { Handle } from '../src/sandbox/index.ts';
import { RunnerAdapter } from '../src/providers/runner/index.ts';
import { startFakeDaemon } from '../src/providers/runner/fake-daemon.ts';
import { startRunnerTestHub } from '../src/providers/runner/test-hub.ts';
import type { RunnerTestHub } from '../src/providers/runner/test-hub.ts';
import { namespaceSupportProblem, openNamespaceBackend } from '../src/runner/backends/namespace/index.ts';
import { runDaemon } from '../src/runner/daemon.ts';
import type { DaemonHandle } from '../src/runner/daemon.ts';
import { captureLogger, until } from '../src/runner/testing.ts';

const RUNNER_ID = '0f0e0d0c-0b0a-4908-8706-050403020100';
const problem = namespaceSupportProblem();
const octet = 20 + ((process.pid + 7) % 200);

let hub: RunnerTestHub;
let daemon: DaemonHandle;
let adapter: RunnerAdapter;
let scratch: string;

const mint = (): string => {
  const n = mintRunnerName(RUNNER_ID);
  if (!n.ok) throw new Error(n.error);
  return n.value;
};

if (problem) {
  describe('namespace runner conformance', { skip: problem }, () => {});
} else {
  runConformanceSuite('namespace runner over a real daemon and socket', {
    adapter: () => adapter,
    name: mint,
    timeoutMs: 15_000,
    before: async () => {
      const { logger } = captureLogger();
      scratch = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-ns-conf-')));
      hub = await startRunnerTestHub({ logger });
      hub.enroll('ns-conformance', RUNNER_ID);
      const opened = openNamespaceBackend({
        root: join(scratch, 'sandboxes'),
        logger,
        subnet: `10.62.${octet}.0/24`,
        cgroupParent: `fountain-conf-${process.pid}`,
        lookup: async () => [],
        graceMs: { destroy: 1000, suspend: 1000, stopAll: 1000 },
      });
      if (!opened.ok) throw new Error(opened.error);
      const base = new URL(hub.url);
      daemon = runDaemon({
        name: 'ns-conformance',
        root: join(scratch, 'sandboxes'),
        backend: opened.value,
        baseUrl: `http://${base.host}`,
        apiKey: 'test-key',
        logger,
        version: 'test',
        timings: { pingIntervalMs: 60_000, pingTimeoutMs: 60_000, baseMs: 10, capMs: 50 },
      });
      adapter = new RunnerAdapter(hub.host);
      await until(() => hub.host.whereis(RUNNER_ID), 'the daemon registered');
    },
    after: async () => {
      await daemon.stop();
      await hub.close();
      rmSync(scratch, { recursive: true, force: true });
      for (const c of ['freezer', 'memory', 'pids']) {
        try {
          rmdirSync(join('/sys/fs/cgroup', c, `fountain-conf-${process.pid}`));
        } catch {
          // never made
        }
      }
    },
    fixtures: SHELL_FIXTURES,
    readFile: async (handle: Handle, path: string) => {
      const r = await adapter.processes.exec(handle, 'sh', ['-c', 'cat -- "$1" 2>/dev/null || exit 44', 'read', path]);
      if (!r.ok || r.value.exitCode === 44) return null;
      return r.value.output;
    },
  });
}

describe('per-runner capabilities through the adapter', () => {
  it('a runner answers from what it advertised: network_policy only where the daemon said so', async () => {
    const { logger } = captureLogger();
    const withPolicy = await startFakeDaemon({
      runnerId: '11111111-1111-4111-8111-111111111111',
      name: 'ns',
      logger,
      capabilities: ['suspend', 'attach', 'network_policy'],
    });
    const plain = await startFakeDaemon({
      runnerId: '22222222-2222-4222-8222-222222222222',
      name: 'proc',
      logger,
      hub: withPolicy.hub,
    });
    try {
      const a = new RunnerAdapter(withPolicy.hub.host);
      const nsName = mintRunnerName(withPolicy.runnerId);
      const procName = mintRunnerName(plain.runnerId);
      assert.ok(nsName.ok && procName.ok);
      const ns = a.buildHandle(nsName.value);
      const proc = a.buildHandle(procName.value);
      assert.ok(capabilitiesOf(a, ns).has('network_policy'));
      assert.ok(!capabilitiesOf(a, proc).has('network_policy'));
      assert.ok(!capabilitiesOf(a).has('network_policy'), 'without a handle: the upstream set');
      assert.ok((await a.lifecycle.create(ns.name)).ok);
      assert.ok((await a.lifecycle.create(proc.name)).ok);
      assert.ok((await a.network.applyNetworkPolicy(ns, { allow: [] })).ok);
      assert.deepEqual(withPolicy.policy(ns.name), [], 'allow: [] reaches the daemon verbatim');
      assert.ok((await a.network.applyNetworkPolicy(ns, { allow: ['api.example.com'] })).ok);
      assert.deepEqual(withPolicy.policy(ns.name), ['api.example.com']);
      const refused = await a.network.applyNetworkPolicy(proc, { allow: [] });
      assert.equal(!refused.ok && refused.error.code, 'not_supported');
      assert.ok(
        !plain.received.some((r) => r.op === 'apply_network_policy'),
        'never asked of a runner without the capability',
      );
      await plain.stop();
      await until(() => !withPolicy.hub.host.whereis(plain.runnerId), 'plain runner offline');
      assert.ok(!capabilitiesOf(a, proc).has('network_policy'), 'offline: the upstream set');
    } finally {
      await plain.stop();
      await withPolicy.stop();
    }
  });
});
