/**
 * The sandbox conformance suite against the runner adapter, over a real loopback WebSocket, to a
 * real daemon serving the microVM backend with the QEMU driver: one real VM per sandbox (TCG).
 */
import { describe } from 'node:test';
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import { runConformanceSuite } from '../src/sandbox/conformance/index.ts';
import { mintRunnerName } from '../src/sandbox/index.ts';
import type { Handle } from '../src/sandbox/index.ts';
import { RunnerAdapter } from '../src/providers/runner/index.ts';
import { startRunnerTestHub } from '../src/providers/runner/test-hub.ts';
import type { RunnerTestHub } from '../src/providers/runner/test-hub.ts';
import { VmBackend } from '../src/runner/backends/firecracker/index.ts';
import { parseSubnet } from '../src/runner/backends/firecracker/network.ts';
import { QemuDriver } from '../src/runner/backends/firecracker/qemu-driver.ts';
import { runDaemon } from '../src/runner/daemon.ts';
import type { DaemonHandle } from '../src/runner/daemon.ts';
import { captureLogger, until } from '../src/runner/testing.ts';

const RUNNER_ID = '0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d';
const STAY = 'echo ready; while IFS= read -r line; do echo "$line"; done';
const repo = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const images = process.env.FOUNTAIN_MICROVM_IMAGE_DIR ?? join(repo, '.cache/microvm');
const kernel = join(images, 'vmlinux');
const initrd = join(images, 'initrd.cpio');
const rootfs = join(images, 'rootfs.ext4');
const qemuBin = process.env.FOUNTAIN_QEMU_BIN ?? 'qemu-system-x86_64';
// The suite makes about twenty sandboxes, each a VM booted under software emulation: minutes of
// CPU, so it runs only when asked (FOUNTAIN_MICROVM_CONFORMANCE=1), and then the image and QEMU
// must be there. Not yet switched on in .ci/run: no green run was seen on a loaded build machine.
const required = process.env.FOUNTAIN_MICROVM_CONFORMANCE === '1';
const haveImage = [kernel, initrd, rootfs].every((f) => existsSync(f));
const haveQemu = spawnSync(qemuBin, ['--version'], { stdio: 'ignore' }).status === 0;
const skip = required
  ? false
  : !haveQemu
    ? `${qemuBin} not found (apt-get install qemu-system-x86)`
    : !haveImage
      ? `no guest image in ${images}: run scripts/microvm/build-guest-image.sh`
      : 'boots one VM per sandbox under software emulation (minutes): set FOUNTAIN_MICROVM_CONFORMANCE=1 to run';
// Hang guards only. A boot under TCG on a loaded 2-core machine can take tens of seconds.
const HANG_GUARD = 300_000;
const machine = process.env.FOUNTAIN_QEMU_MACHINE === 'microvm' ? 'microvm' : 'q35';

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
    before: async () => {
      if (!haveQemu) throw new Error(`FOUNTAIN_MICROVM_CONFORMANCE=1 but ${qemuBin} is not runnable`);
      if (!haveImage) throw new Error(`FOUNTAIN_MICROVM_CONFORMANCE=1 but the guest image is missing in ${images}`);
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
        driver: new QemuDriver(qemuBin, machine),
        kernel,
        initrd,
        rootfs,
        vcpus: 1,
        // Every sandbox of the run stays up until the suite's final cleanup: keep each one small.
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
        if (started) process.stderr.write(`microVM conformance: ${Math.round((Date.now() - started) / 1000)} s with ${machine}\n`);
      }
    },
    fixtures: {
      execOk: { cmd: 'sh', args: ['-c', 'echo conformance-ok'], expectedStdout: 'conformance-ok' },
      execFail: { cmd: 'sh', args: ['-c', 'echo failing >&2; exit 3'], nonzeroCode: 3 },
      spawnOk: { cmd: 'sh', args: ['-c', 'echo spawned-ok'] },
      spawnStay: { cmd: 'sh', args: ['-c', STAY] },
    },
    readFile: async (handle: Handle, path: string) => {
      const r = await adapter.exec(handle, 'sh', ['-c', 'cat -- "$1" 2>/dev/null || exit 44', 'read', path]);
      if (!r.ok || r.value.exitCode === 44) return null;
      return r.value.output;
    },
  });
}
