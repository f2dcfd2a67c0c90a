/**
 * One sandbox's network: a named network namespace joined to the host by a veth pair, and the
 * nftables ruleset inside it (default deny). Nothing is ever written to the host's own tables.
 */
import { execFile } from 'node:child_process';
import type { Result } from '../../../sandbox/result.ts';
import { err, ok } from '../../../sandbox/result.ts';

export interface Tools {
  readonly ip: string;
  readonly nft: string;
  readonly nsenter: string;
}

export interface SandboxNet {
  /** The namespace's name under /run/netns. */
  readonly ns: string;
  /** Host end of the veth pair (at most 15 bytes). */
  readonly hostIf: string;
  readonly peerIf: string;
  /** The host end's address: the sandbox's gateway, resolver and proxy. */
  readonly gateway: string;
  readonly address: string;
  readonly prefix: number;
}

export const nsPath = (ns: string): string => `/run/netns/${ns}`;

function run(file: string, args: readonly string[], input?: string): Promise<Result<string, string>> {
  return new Promise((resolve) => {
    const child = execFile(file, [...args], { timeout: 15_000, maxBuffer: 1024 * 1024 }, (e, stdout, stderr) => {
      if (e) resolve(err(`${[file, ...args].join(' ')}: ${(stderr || e.message).trim()}`));
      else resolve(ok(stdout));
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** Egress is possible only to the gateway: DNS always (so a denied name fails fast), proxied ports while the set holds them. */
export function ruleset(net: SandboxNet): string {
  return `table inet fountain {
  set egress_ports {
    type inet_service
  }
  chain output {
    type filter hook output priority 0; policy drop;
    oif "lo" accept
    ct state established,related accept
    ip daddr ${net.gateway} udp dport 53 accept
    ip daddr ${net.gateway} tcp dport 53 accept
    ip daddr ${net.gateway} tcp dport @egress_ports accept
  }
  chain input {
    type filter hook input priority 0; policy drop;
    iif "lo" accept
    ct state established,related accept
  }
}
`;
}

/** Runs a command inside the sandbox's network namespace only. */
const inNs = (t: Tools, net: SandboxNet, file: string, args: readonly string[], input?: string) =>
  run(t.nsenter, [`--net=${nsPath(net.ns)}`, '--', file, ...args], input);

/** Removes whatever an earlier daemon left, then builds the namespace, the veth pair and the ruleset. */
export async function setUpNetwork(t: Tools, net: SandboxNet): Promise<Result<void, string>> {
  await tearDownNetwork(t, net);
  const steps: Array<() => Promise<Result<string, string>>> = [
    () => run(t.ip, ['netns', 'add', net.ns]),
    () => run(t.ip, ['link', 'add', net.hostIf, 'type', 'veth', 'peer', 'name', net.peerIf, 'netns', net.ns]),
    () => run(t.ip, ['addr', 'add', `${net.gateway}/${net.prefix}`, 'dev', net.hostIf]),
    () => run(t.ip, ['link', 'set', net.hostIf, 'up']),
    () => run(t.ip, ['-n', net.ns, 'link', 'set', net.peerIf, 'name', 'eth0']),
    () => run(t.ip, ['-n', net.ns, 'addr', 'add', `${net.address}/${net.prefix}`, 'dev', 'eth0']),
    () => run(t.ip, ['-n', net.ns, 'link', 'set', 'eth0', 'up']),
    () => run(t.ip, ['-n', net.ns, 'link', 'set', 'lo', 'up']),
    () => run(t.ip, ['-n', net.ns, 'route', 'add', 'default', 'via', net.gateway]),
    () => inNs(t, net, t.nft, ['-f', '-'], ruleset(net)),
  ];
  for (const step of steps) {
    const r = await step();
    if (!r.ok) {
      await tearDownNetwork(t, net);
      return err(`network setup: ${r.error}`);
    }
  }
  return ok(undefined);
}

/** Opens the proxied ports (an allow list with names) or closes them (`allow: []`), inside the namespace. */
export async function setEgressPorts(
  t: Tools,
  net: SandboxNet,
  ports: readonly number[],
): Promise<Result<void, string>> {
  const script =
    ports.length === 0
      ? 'flush set inet fountain egress_ports\n'
      : `flush set inet fountain egress_ports\nadd element inet fountain egress_ports { ${ports.join(', ')} }\n`;
  const r = await inNs(t, net, t.nft, ['-f', '-'], script);
  return r.ok ? ok(undefined) : err(`firewall update: ${r.error}`);
}

/** Idempotent: deleting the namespace takes the peer, and with it the host end. */
export async function tearDownNetwork(t: Tools, net: SandboxNet): Promise<void> {
  await run(t.ip, ['netns', 'del', net.ns]);
  await run(t.ip, ['link', 'del', net.hostIf]);
}

/** The sandbox's /30 within `subnet`: slot n holds addresses base+4n+1 (gateway) and base+4n+2. */
export function slotAddresses(
  subnet: { base: number; prefix: number },
  slot: number,
): { gateway: string; address: string } | null {
  const size = 2 ** (32 - subnet.prefix);
  if (slot < 0 || (slot + 1) * 4 > size) return null;
  const at = (n: number) => [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.');
  return { gateway: at(subnet.base + slot * 4 + 1), address: at(subnet.base + slot * 4 + 2) };
}

/** An IPv4 CIDR with a prefix of /8 to /30, as a base address and prefix; null otherwise. */
export function parseSubnet(cidr: string): { base: number; prefix: number } | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
  if (!m) return null;
  const octets = m.slice(1, 5).map(Number);
  const prefix = Number(m[5]);
  if (octets.some((o) => o > 255) || prefix < 8 || prefix > 30) return null;
  const addr = octets.reduce((a, o) => a * 256 + o, 0);
  const size = 2 ** (32 - prefix);
  return { base: addr - (addr % size), prefix };
}
