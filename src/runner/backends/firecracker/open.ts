/**
 * Opens the microVM backend: runs the startup checks for the chosen VMM and builds its driver.
 * The one entry point the CLI uses; a refusal is a message naming what is absent.
 */
import type { Logger } from 'pino';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';
import { FirecrackerDriver } from './firecracker-driver.ts';
import { checkHost } from './host-checks.ts';
import { VmBackend } from './index.ts';
import { parseSubnet } from './network.ts';
import { QemuDriver } from './qemu-driver.ts';

export interface OpenVmOptions {
  readonly root: string;
  readonly logger: Logger;
  readonly vmm: 'firecracker' | 'qemu';
  readonly bridge: string | null;
  readonly subnet: string;
  readonly kernel: string | undefined;
  readonly rootfs: string | undefined;
  readonly initrd: string | undefined;
  readonly firecrackerBin: string;
  readonly qemuBin: string;
  readonly qemuMachine?: 'microvm' | 'q35';
  readonly vcpus: number;
  readonly memoryMib: number;
  readonly bootTimeoutMs: number;
}

export async function openVmBackend(o: OpenVmOptions): Promise<Result<VmBackend, string>> {
  const subnet = parseSubnet(o.subnet);
  const ip = { argv: ['ip'] };
  const bin = o.vmm === 'firecracker' ? o.firecrackerBin : o.qemuBin;
  const checked = await checkHost({
    vmm: o.vmm,
    bridge: o.bridge,
    subnetError: subnet.ok ? null : subnet.error,
    kernel: o.kernel,
    rootfs: o.rootfs,
    initrd: o.initrd,
    bin,
    root: o.root,
    ip,
  });
  if (!checked.ok) return checked;
  if (!subnet.ok || !o.kernel || !o.rootfs) return err('unreachable: checks passed without a subnet, kernel or rootfs');
  const driver = o.vmm === 'firecracker' ? new FirecrackerDriver(bin) : new QemuDriver(bin, o.qemuMachine ?? 'q35');
  return ok(
    new VmBackend({
      root: o.root,
      logger: o.logger,
      driver,
      kernel: o.kernel,
      rootfs: o.rootfs,
      ...(o.initrd ? { initrd: o.initrd } : {}),
      vcpus: o.vcpus,
      memoryMib: o.memoryMib,
      bridge: o.bridge,
      subnet: subnet.value,
      ip,
      timings: { bootTimeoutMs: o.bootTimeoutMs },
    }),
  );
}
