/**
 * The `--backend firecracker` flags of `fountain runner`: declared here, validated with zod, and
 * turned into an opened microVM backend (startup checks included). Kept apart from runner.ts.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { Logger } from 'pino';
import { z } from 'zod';
import { err } from '../sandbox/result.ts';
import type { Result } from '../sandbox/result.ts';
import type { VmBackend } from '../runner/backends/firecracker/index.ts';
import { openVmBackend } from '../runner/backends/firecracker/open.ts';

export function addVmOptions(cmd: Command): Command {
  return (
    cmd
      .option('--vmm <vmm>', 'with --backend firecracker: firecracker, or qemu (software emulation)', 'firecracker')
      .option('--bridge <name>', 'with --backend firecracker: the bridge each microVM tap joins (yours to make)')
      .option(
        '--subnet <cidr>',
        'with --backend firecracker: IPv4 subnet of the bridge; its first address is the gateway',
        '10.61.0.0/24',
      )
      .option('--fc-kernel <path>', 'with --backend firecracker: uncompressed guest kernel (vmlinux)')
      .option(
        '--fc-rootfs <path>',
        'with --backend firecracker: base ext4 image; each sandbox starts as a private copy',
      )
      .option(
        '--fc-initrd <path>',
        'with --backend firecracker: initramfs the kernel needs to mount the ext4 root, if any',
      )
      .option('--fc-bin <path>', 'with --backend firecracker: the firecracker executable', 'firecracker')
      .option('--qemu-bin <path>', 'with --vmm qemu: the QEMU executable', 'qemu-system-x86_64')
      // q35 by default: under TCG (QEMU 7.2, Debian 6.1 kernel) `-M microvm` stalls in timer
      // calibration ("tsc: Marking TSC unstable", jiffies never advance): it has no PIT ticks, HPET or
      // PM timer to calibrate against. It got as far as /init only with the host's TSC rate passed in
      // (tsc_early_khz=, lpj=, lapic_timer_period=, no_timer_check), host-specific and slower than q35.
      .option(
        '--qemu-machine <type>',
        'with --vmm qemu: q35 (virtio-pci) or microvm (virtio-mmio; stalls at boot under software emulation)',
        'q35',
      )
      .option('--fc-vcpus <n>', 'with --backend firecracker: vCPUs per microVM', '2')
      .option('--fc-memory-mib <n>', 'with --backend firecracker: memory per microVM in MiB', '2048')
      .option(
        '--fc-boot-timeout <seconds>',
        'with --backend firecracker: how long a booted microVM has for its agent to answer',
        '60',
      )
  );
}

const absolute = (flag: string) =>
  z
    .string()
    .min(1)
    .transform((p) => resolve(p))
    .optional()
    .describe(flag);

const vmFlagsSchema = z.object({
  vmm: z.enum(['firecracker', 'qemu'], { message: '--vmm must be "firecracker" or "qemu"' }),
  bridge: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,15}$/, '--bridge must be a network device name (1-15 characters)')
    .optional(),
  subnet: z.string(),
  fcKernel: absolute('--fc-kernel'),
  fcRootfs: absolute('--fc-rootfs'),
  fcInitrd: absolute('--fc-initrd'),
  fcBin: z.string().min(1),
  qemuBin: z.string().min(1),
  qemuMachine: z.enum(['microvm', 'q35'], { message: '--qemu-machine must be "microvm" or "q35"' }),
  fcVcpus: z.coerce.number({ message: '--fc-vcpus must be a number' }).int().min(1).max(32),
  fcMemoryMib: z.coerce
    .number({ message: '--fc-memory-mib must be a number' })
    .int()
    .min(128)
    .max(1024 * 1024),
  fcBootTimeout: z.coerce.number({ message: '--fc-boot-timeout must be a number of seconds' }).positive().max(3600),
});

export async function openVmFromFlags(opts: unknown, root: string, logger: Logger): Promise<Result<VmBackend, string>> {
  const parsed = vmFlagsSchema.safeParse(opts);
  if (!parsed.success) return err(parsed.error.issues[0]?.message ?? 'invalid flags');
  const f = parsed.data;
  return openVmBackend({
    root,
    logger,
    vmm: f.vmm,
    bridge: f.bridge ?? null,
    subnet: f.subnet,
    kernel: f.fcKernel,
    rootfs: f.fcRootfs,
    initrd: f.fcInitrd,
    firecrackerBin: f.fcBin,
    qemuBin: f.qemuBin,
    qemuMachine: f.qemuMachine,
    vcpus: f.fcVcpus,
    memoryMib: f.fcMemoryMib,
    bootTimeoutMs: f.fcBootTimeout * 1000,
  });
}
