/**
 * Startup checks for the microVM backend: each refusal names what is
 * absent, in the order an operator fixes them: flags, files, the machine, then privileges.
 */
import { accessSync, constants, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';
import type { IpCommand } from './network.ts';
import { linkExists } from './network.ts';

/** Bit 12 of the effective capability set. */
const CAP_NET_ADMIN = 12n;

export interface HostCheckInput {
  readonly vmm: 'firecracker' | 'qemu';
  readonly bridge: string | null;
  readonly subnetError: string | null;
  readonly kernel: string | undefined;
  readonly rootfs: string | undefined;
  readonly initrd: string | undefined;
  /** The VMM executable: a path, or a name looked up on PATH. */
  readonly bin: string;
  readonly root: string;
  readonly ip: IpCommand;
  readonly kvmDevice?: string;
  readonly tunDevice?: string;
  /** `/proc/self/status`, replaceable so a test can show the refusal without dropping privileges. */
  readonly procStatus?: string;
  readonly path?: string;
}

export function findExecutable(bin: string, path = process.env.PATH ?? ''): string | null {
  const candidates = bin.includes('/')
    ? [bin]
    : path
        .split(delimiter)
        .filter(Boolean)
        .map((d) => join(d, bin));
  for (const c of candidates) {
    try {
      if (statSync(c).isFile()) {
        accessSync(c, constants.X_OK);
        return c;
      }
    } catch {
      // not here
    }
  }
  return null;
}

export function hasNetAdmin(procStatus = '/proc/self/status'): boolean {
  try {
    const line = readFileSync(procStatus, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('CapEff:'));
    if (!line) return false;
    return ((BigInt(`0x${line.slice(7).trim()}`) >> CAP_NET_ADMIN) & 1n) === 1n;
  } catch {
    return false;
  }
}

function file(flag: string, path: string | undefined): string | null {
  if (!path) return `${flag} is required`;
  if (!isAbsolute(path)) return `${flag} must be an absolute path, got ${path}`;
  try {
    if (!statSync(path).isFile()) return `${flag} ${path} is not a file`;
    accessSync(path, constants.R_OK);
  } catch {
    return `${flag} ${path} does not exist or is not readable`;
  }
  return null;
}

export async function checkHost(c: HostCheckInput): Promise<Result<void, string>> {
  if (c.vmm === 'firecracker' && !c.bridge)
    return err(
      '--bridge is required with --backend firecracker: make a bridge and give it the first address of --subnet',
    );
  if (c.subnetError) return err(c.subnetError);
  if (c.bridge && !(await linkExists(c.ip, c.bridge)))
    return err(
      `bridge ${c.bridge} does not exist: create it (ip link add ${c.bridge} type bridge) and give it the first address of --subnet`,
    );

  const files = [
    file('--fc-kernel', c.kernel),
    file('--fc-rootfs', c.rootfs),
    c.initrd === undefined ? null : file('--fc-initrd', c.initrd),
  ];
  const missing = files.find((f) => f !== null);
  if (missing) return err(missing);

  if (c.vmm === 'firecracker') {
    const kvm = c.kvmDevice ?? '/dev/kvm';
    try {
      accessSync(kvm, constants.R_OK | constants.W_OK);
    } catch {
      return err(`${kvm} is missing or not readable and writable by this user: Firecracker needs KVM`);
    }
  }
  if (findExecutable(c.bin, c.path) === null) {
    return err(
      c.vmm === 'firecracker'
        ? `the firecracker executable was not found (${c.bin}): put it on PATH or pass --fc-bin`
        : `the QEMU executable was not found (${c.bin}): install qemu-system-x86 or pass --qemu-bin`,
    );
  }
  if (c.bridge) {
    if (!hasNetAdmin(c.procStatus))
      return err('this user lacks CAP_NET_ADMIN, which the daemon needs to create a tap device per microVM');
    if (!existsSync(c.tunDevice ?? '/dev/net/tun'))
      return err(`${c.tunDevice ?? '/dev/net/tun'} is missing: tap devices cannot be created`);
  }
  try {
    mkdirSync(c.root, { recursive: true, mode: 0o700 });
  } catch (e) {
    return err(`cannot create root ${c.root}: ${e instanceof Error ? e.message : String(e)}`);
  }
  return ok(undefined);
}
