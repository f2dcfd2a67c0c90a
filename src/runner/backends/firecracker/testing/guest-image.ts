/**
 * Where the real-VM tests find QEMU and the guest image (scripts/microvm/build-guest-image.sh), and
 * whether they run: when both are present, or always with FOUNTAIN_MICROVM_TESTS=1 (then absence fails).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { QemuMachine } from '../qemu-driver.ts';

const repo = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../../..');
export const IMAGE_DIR = process.env.FOUNTAIN_MICROVM_IMAGE_DIR ?? join(repo, '.cache/microvm');
export const KERNEL = join(IMAGE_DIR, 'vmlinux');
export const INITRD = join(IMAGE_DIR, 'initrd.cpio');
export const ROOTFS = join(IMAGE_DIR, 'rootfs.ext4');
export const QEMU_BIN = process.env.FOUNTAIN_QEMU_BIN ?? 'qemu-system-x86_64';
// `-M microvm` stalls at TSC calibration under TCG on QEMU 7.2; q35 boots (docs/runners/microvm.md).
export const QEMU_MACHINE: QemuMachine = process.env.FOUNTAIN_QEMU_MACHINE === 'microvm' ? 'microvm' : 'q35';

const haveImage = (): boolean => [KERNEL, INITRD, ROOTFS].every((f) => existsSync(f));
const haveQemu = (): boolean => spawnSync(QEMU_BIN, ['--version'], { stdio: 'ignore' }).status === 0;

/** `skip` for the test's describe: false when the tests run. */
export function realVmSkip(): string | false {
  if (process.env.FOUNTAIN_MICROVM_TESTS === '1') return false;
  if (!haveQemu()) return `${QEMU_BIN} not found (apt-get install qemu-system-x86)`;
  if (!haveImage()) return `no guest image in ${IMAGE_DIR}: run scripts/microvm/build-guest-image.sh`;
  return false;
}

/** Throws, in a test's `before`, when a demanded run lacks QEMU or the image. */
export function assertRealVmsAvailable(): void {
  if (!haveQemu()) throw new Error(`${QEMU_BIN} is not runnable (apt-get install qemu-system-x86)`);
  if (!haveImage())
    throw new Error(`the guest image is missing in ${IMAGE_DIR}: run scripts/microvm/build-guest-image.sh`);
}
