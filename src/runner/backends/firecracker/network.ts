/**
 * MicroVM networking: subnet parsing, address allocation, tap names,
 * MACs and kernel arguments, plus the `ip` commands that make and remove a tap. No firewall, no NAT.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';

export interface Subnet {
  readonly cidr: string;
  /** Network address as a 32-bit unsigned integer. */
  readonly network: number;
  readonly prefix: number;
}

const toInt = (octets: number[]): number =>
  ((octets[0]! << 24) | (octets[1]! << 16) | (octets[2]! << 8) | octets[3]!) >>> 0;
export const ipToString = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

export function parseIpv4(text: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!m) return null;
  const octets = m.slice(1).map(Number);
  return octets.every((o) => o <= 255) ? toInt(octets) : null;
}

/** IPv4 CIDR only; the network must leave room for a gateway and at least one guest. */
export function parseSubnet(cidr: string): Result<Subnet, string> {
  const [addr, bits, extra] = cidr.split('/');
  const ip = addr === undefined ? null : parseIpv4(addr);
  const prefix = bits !== undefined && /^\d{1,2}$/.test(bits) ? Number(bits) : NaN;
  if (ip === null || extra !== undefined || !(prefix >= 0 && prefix <= 30)) {
    return err(
      `--subnet must be an IPv4 CIDR such as 10.61.0.0/24 with a prefix of at most /30, got ${JSON.stringify(cidr)}`,
    );
  }
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return ok({ cidr, network: (ip & mask) >>> 0, prefix });
}

export const netmask = (s: Subnet): number => (s.prefix === 0 ? 0 : (0xffffffff << (32 - s.prefix)) >>> 0);
export const gateway = (s: Subnet): number => (s.network + 1) >>> 0;
const broadcast = (s: Subnet): number => (s.network | (~netmask(s) >>> 0)) >>> 0;

/** The first host address after the gateway that no sandbox holds yet. */
export function allocateAddress(s: Subnet, taken: ReadonlySet<string>): Result<string, string> {
  for (let a = gateway(s) + 1; a < broadcast(s); a++) {
    const text = ipToString(a);
    if (!taken.has(text)) return ok(text);
  }
  return err(`no free address left in ${s.cidr}`);
}

/** `fc` + 12 hex of sha256(name): 14 bytes, under the kernel's 15-byte limit, and stable per sandbox. */
export const tapName = (sandbox: string): string =>
  `fc${createHash('sha256').update(sandbox).digest('hex').slice(0, 12)}`;

/** `02:fc:` + the address's four octets: locally administered, unique within the subnet. */
export function macFor(ip: string): string {
  return `02:fc:${ip
    .split('.')
    .map((o) => Number(o).toString(16).padStart(2, '0'))
    .join(':')}`;
}

/** Static addressing on the kernel command line: the guest needs no DHCP. */
export const ipKernelArg = (s: Subnet, guest: string): string =>
  `ip=${guest}::${ipToString(gateway(s))}:${ipToString(netmask(s))}::eth0:off`;

export interface IpCommand {
  /** argv prefix, e.g. ['ip'] or ['ip', '-n', '<netns>'] for tests that keep devices in a namespace. */
  readonly argv: readonly string[];
}

function run(argv: readonly string[], timeoutMs: number): Promise<Result<string, string>> {
  return new Promise((resolve) => {
    execFile(argv[0]!, argv.slice(1), { timeout: timeoutMs }, (e, stdout, stderr) => {
      if (e) resolve(err(`${argv.join(' ')}: ${(stderr || e.message).trim()}`));
      else resolve(ok(stdout));
    });
  });
}

/** Idempotent: an existing tap is reused, then (re)attached to the bridge and brought up. */
export async function ensureTap(
  ip: IpCommand,
  tap: string,
  bridge: string,
  timeoutMs = 10_000,
): Promise<Result<void, string>> {
  const exists = await run([...ip.argv, 'link', 'show', 'dev', tap], timeoutMs);
  if (!exists.ok) {
    const added = await run([...ip.argv, 'tuntap', 'add', 'dev', tap, 'mode', 'tap'], timeoutMs);
    if (!added.ok) return added;
  }
  const master = await run([...ip.argv, 'link', 'set', 'dev', tap, 'master', bridge], timeoutMs);
  if (!master.ok) return master;
  const up = await run([...ip.argv, 'link', 'set', 'dev', tap, 'up'], timeoutMs);
  return up.ok ? ok(undefined) : up;
}

/** Removing a tap that is already gone is success. */
export async function deleteTap(ip: IpCommand, tap: string, timeoutMs = 10_000): Promise<Result<void, string>> {
  const exists = await run([...ip.argv, 'link', 'show', 'dev', tap], timeoutMs);
  if (!exists.ok) return ok(undefined);
  const del = await run([...ip.argv, 'link', 'del', 'dev', tap], timeoutMs);
  return del.ok ? ok(undefined) : del;
}

/** Whether a network device exists (the operator's bridge). */
export async function linkExists(ip: IpCommand, dev: string): Promise<boolean> {
  return (await run([...ip.argv, 'link', 'show', 'dev', dev], 10_000)).ok;
}
