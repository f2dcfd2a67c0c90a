/**
 * What a real agent's run on a namespace runner needs of this machine: the HTTP MCP probe on an address
 * of its own (the egress proxy never dials the host's loopback) with a name the runner resolves.
 * Tests only; needs root.
 */
import type { Socket as UdpSocket } from 'node:dgram';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startResolver } from '../../src/runner/backends/namespace/dns.ts';

export interface NamespaceHost {
  /** The probe's address: 198.18/15 is set aside for tests (RFC 2544), on a veth link of this host. */
  readonly probeAddress: string;
  /** The name the sandbox asks for; the environment's limited network allows it. */
  readonly probeName: string;
  /** `--ns-subnet` for the runner, apart from other runs on this machine. */
  readonly subnet: string;
  /** Runs the runner daemon in a private mount namespace whose /etc/resolv.conf knows the probe's name. */
  readonly wrap: readonly string[];
  close(): void;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

export async function startNamespaceHost(tmp: string, runtime: string): Promise<NamespaceHost> {
  // Apart per process and runtime: two real-agent files may run at once.
  const octet = 20 + ((process.pid * 7 + runtime.length * 31 + runtime.charCodeAt(0)) % 200);
  const probeAddress = `198.19.${octet}.1`;
  const probeName = `mcp-${octet}.fountain.test`;
  const link = `fra${octet}`;
  try {
    ip('link', 'del', `${link}a`); // left by a run that died before its cleanup
  } catch {}
  ip('link', 'add', `${link}a`, 'type', 'veth', 'peer', 'name', `${link}b`);
  let dns: UdpSocket | undefined;
  const close = () => {
    dns?.close();
    try {
      ip('link', 'del', `${link}a`);
    } catch {}
  };
  try {
    ip('addr', 'add', `${probeAddress}/32`, 'dev', `${link}a`);
    ip('link', 'set', `${link}a`, 'up');
    ip('link', 'set', `${link}b`, 'up');
    dns = await startResolver(
      probeAddress,
      53,
      (n) => (n === probeName ? { kind: 'address', ipv4: probeAddress, ttl: 5 } : { kind: 'nxdomain' }),
      () => {},
    );
    const resolvConf = join(tmp, 'resolv.conf');
    writeFileSync(resolvConf, `nameserver ${probeAddress}\noptions attempts:2 timeout:2\n`);
    return {
      probeAddress,
      probeName,
      subnet: `10.66.${octet}.0/24`,
      wrap: [
        'unshare',
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
        '-c',
        'mount --bind "$0" /etc/resolv.conf && exec "$@"',
        resolvConf,
      ],
      close,
    };
  } catch (e) {
    close();
    throw e;
  }
}
