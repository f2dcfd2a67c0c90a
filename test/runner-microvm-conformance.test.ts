/**
 * The sandbox conformance suite against the runner adapter, over a real loopback WebSocket, to a
 * real daemon serving the microVM backend with the QEMU driver: one real VM per sandbox (TCG), and
 * one sandbox shared by the checks that need only somewhere to run.
 */
import { describe } from 'node:test';
import { mkdtempSync, realpathSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runConformanceSuite, SHELL_FIXTURES } from '../src/sandbox/conformance/index.ts';
import { Private, mintRunnerName } from '../src/sandbox/index.ts';
import type { Handle } from '../src/sandbox/index.ts';
import { RunnerAdapter } from '../src/providers/runner/index.ts';
import { startRunnerTestHub } from '../src/providers/runner/test-hub.ts';
import type { RunnerTestHub } from '../src/providers/runner/test-hub.ts';
import { VmBackend } from '../src/runner/backends/firecracker/index.ts';
import { parseSubnet } from '../src/runner/backends/firecracker/network.ts';
import { QMP_SOCKET, QemuDriver } from '../src/runner/backends/firecracker/qemu-driver.ts';
import {
  INITRD,
  KERNEL,
  QEMU_BIN,
  QEMU_MACHINE,
  ROOTFS,
  assertRealVmsAvailable,
  realVmSkip,
} from '../src/runner/backends/firecracker/testing/guest-image.ts';
import { runDaemon } from '../src/runner/daemon.ts';
import type { DaemonHandle } from '../src/runner/daemon.ts';
import { captureLogger, until } from '../src/runner/testing.ts';

const RUNNER_ID = '0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d';
// Six boots: the shared sandbox, the checks that create, destroy or count sessions, the broken transport.
const skip = realVmSkip();
// Hang guards only. A boot under TCG on a loaded 2-core machine can take tens of seconds.
const HANG_GUARD = 300_000;

let hub: RunnerTestHub;
let daemon: DaemonHandle;
let backend: VmBackend;
let adapter: RunnerAdapter;
let scratch: string;
let started = 0;

const mint = (): string => {
  const n = mintRunnerName(RUNNER_ID);
  if (!n.ok) throw new Error(n.error);
  return n.value;
};

if (skip) {
  describe('microVM runner conformance (QEMU, real VMs)', { skip }, () => {});
} else {
  runConformanceSuite('microVM runner (QEMU driver, real VMs) over a real daemon and socket', {
    adapter: () => adapter,
    name: mint,
    timeoutMs: HANG_GUARD,
    shareSandbox: true,
    before: async () => {
      assertRealVmsAvailable();
      started = Date.now();
      const { logger } = captureLogger();
      scratch = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-vm-conf-')));
      hub = await startRunnerTestHub({ logger, callTimeoutMs: HANG_GUARD });
      hub.enroll('vm-conformance', RUNNER_ID);
      const subnet = parseSubnet('10.61.0.0/24');
      if (!subnet.ok) throw new Error(subnet.error);
      backend = new VmBackend({
        root: join(scratch, 'sandboxes'),
        logger,
        driver: new QemuDriver(QEMU_BIN, QEMU_MACHINE),
        kernel: KERNEL,
        initrd: INITRD,
        rootfs: ROOTFS,
        vcpus: 1,
        // The suite's sandboxes stay up until its final cleanup: keep each one small.
        memoryMib: 512,
        bridge: null,
        subnet: subnet.value,
        timings: { bootTimeoutMs: 240_000 },
      });
      const base = new URL(hub.url);
      daemon = runDaemon({
        name: 'vm-conformance',
        root: join(scratch, 'sandboxes'),
        backend,
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
      try {
        await daemon?.stop();
        await backend?.stopAll();
        await hub?.close();
      } finally {
        if (scratch) rmSync(scratch, { recursive: true, force: true });
        // A figure for whoever tunes CI, not an assertion.
        if (started)
          process.stderr.write(
            `microVM conformance: ${Math.round((Date.now() - started) / 1000)} s with ${QEMU_MACHINE}\n`,
          );
      }
    },
    fixtures: SHELL_FIXTURES,
    // A live VM whose VMM cannot be asked (its QMP socket gone): unavailable, never not_found.
    brokenTransport: async () => {
      const created = await adapter.lifecycle.create(mint());
      if (!created.ok) throw new Error(`create failed: ${created.error.code}`);
      const handle = created.value;
      const qmp = join(scratch, 'sandboxes', handle.name, QMP_SOCKET);
      renameSync(qmp, `${qmp}.away`);
      return {
        adapter,
        handle,
        cleanup: async () => {
          renameSync(`${qmp}.away`, qmp);
          await adapter.lifecycle.destroy(handle);
        },
      };
    },
    // Runner handles carry no credential of their own: the secret rides on a handle for a sandbox
    // this run already made (no extra boot), and the adapter must never render it.
    secret: async () => {
      const names = await adapter.lifecycle.listAllNames();
      const name = names.ok ? names.value[0] : undefined;
      if (!name) throw new Error(`no sandbox to borrow: ${JSON.stringify(names)}`);
      const value = 'ftn_conformance_secret_0123456789abcdef';
      return { handle: adapter.buildHandle(name, new Private(value)), value };
    },
    readFile: async (handle: Handle, path: string) => {
      const r = await adapter.processes.exec(handle, 'sh', ['-c', 'cat -- "$1" 2>/dev/null || exit 44', 'read', path]);
      if (!r.ok || r.value.exitCode === 44) return null;
      return r.value.output;
    },
  });
}
