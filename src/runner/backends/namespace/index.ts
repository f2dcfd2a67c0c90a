/**
 * The namespace backend (`fountain runner --backend namespace`): the process backend's sandboxes,
 * sessions and journals, with every command confined by bubblewrap, cgroups and an egress policy.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Result } from '../../../sandbox/result.ts';
import { err, ok } from '../../../sandbox/result.ts';
import { findExecutable } from '../process/env.ts';
import { ProcessBackend, prepareRoot } from '../process/index.ts';
import type { ProcessBackendOptions } from '../process/index.ts';
import { cgroupV1Problem } from './cgroups.ts';
import { NamespaceConfinement } from './confinement.ts';
import { parseSubnet } from './netns.ts';
import type { Lookup } from './proxy.ts';

export { NamespaceConfinement, STATE_DIR } from './confinement.ts';
export type { Lookup } from './proxy.ts';

export const DEFAULT_SUBNET = '10.62.0.0/16';
export const DEFAULT_PORTS: readonly number[] = [80, 443];
/** Sandbox uids are this plus the sandbox's slot: above every ordinary account and subordinate-id range start. */
export const DEFAULT_UID_BASE = 990_000;

export interface NamespaceBackendOptions extends Omit<ProcessBackendOptions, 'confinement'> {
  /** IPv4 range the per-sandbox /30 links are cut from. */
  readonly subnet?: string;
  readonly memoryMib?: number;
  readonly maxPids?: number;
  readonly ports?: readonly number[];
  /** How the proxy finds an allowed name's addresses; default the host's resolver. */
  readonly lookup?: Lookup;
  readonly cgroupMount?: string;
  readonly cgroupParent?: string;
  /** Where the required tools are looked up; default the daemon's PATH plus the sbin directories. */
  readonly path?: string;
  /** First sandbox uid; default DEFAULT_UID_BASE. */
  readonly uidBase?: number;
  /** Directories bound read-only so an agent's own program runs inside; default defaultProgramDirs(). */
  readonly programDirs?: readonly string[];
  /** The Fountain server the runner serves: reachable from each sandbox when it listens on loopback. */
  readonly serverUrl?: string | undefined;
}

/** This Fountain installation (the package root) and the Node installation running it. */
export function defaultProgramDirs(): string[] {
  const pkg = fileURLToPath(new URL('../../../../', import.meta.url)).replace(/\/+$/, '');
  const node = dirname(dirname(realpathSync(process.execPath)));
  return [...new Set([pkg, node])].filter((d) => d !== '/' && d !== '');
}

const defaultLookup: Lookup = async (name) => (await dnsLookup(name, { all: true, family: 4 })).map((a) => a.address);

const findTool = findExecutable;

/** Why this machine cannot run the namespace backend, or null when it can. Shared by the daemon and the tests' skip reason. */
export function namespaceSupportProblem(opts: { path?: string; cgroupMount?: string } = {}): string | null {
  if (process.platform !== 'linux') return 'the namespace backend needs Linux';
  if (process.getuid?.() !== 0)
    return 'the namespace backend must run as root (network namespaces, veth pairs and cgroups)';
  const path = opts.path ?? `${process.env.PATH ?? ''}${delimiter}/usr/sbin${delimiter}/sbin`;
  for (const [tool, pkg] of [
    ['bwrap', 'bubblewrap'],
    ['nsenter', 'util-linux'],
    ['ip', 'iproute2'],
    ['nft', 'nftables'],
    ['sh', 'a POSIX shell'],
    ['setpriv', 'util-linux'],
  ] as const) {
    if (findTool(tool, path) === null) return `${tool} not found on PATH (install ${pkg})`;
  }
  return cgroupV1Problem(opts.cgroupMount ?? '/sys/fs/cgroup');
}

export function openNamespaceBackend(opts: NamespaceBackendOptions): Result<ProcessBackend, string> {
  const path = opts.path ?? `${process.env.PATH ?? ''}${delimiter}/usr/sbin${delimiter}/sbin`;
  const problem = namespaceSupportProblem({ path, cgroupMount: opts.cgroupMount });
  if (problem) return err(problem);
  const subnetText = opts.subnet ?? DEFAULT_SUBNET;
  const subnet = parseSubnet(subnetText);
  if (!subnet) return err(`--ns-subnet must be an IPv4 CIDR between /8 and /30, got ${JSON.stringify(subnetText)}`);
  const made = prepareRoot(opts.root);
  if (!made.ok) return made;
  const tool = (t: string) => findTool(t, path)!;
  const realHome = opts.realHome ?? homedir();
  try {
    const confinement = new NamespaceConfinement({
      root: opts.root,
      logger: opts.logger,
      tools: {
        ip: tool('ip'),
        nft: tool('nft'),
        nsenter: tool('nsenter'),
        bwrap: tool('bwrap'),
        sh: tool('sh'),
        setpriv: tool('setpriv'),
      },
      uidBase: opts.uidBase ?? DEFAULT_UID_BASE,
      subnet,
      limits: { memoryBytes: (opts.memoryMib ?? 2048) * 1024 * 1024, pids: opts.maxPids ?? 4096 },
      ports: opts.ports ?? DEFAULT_PORTS,
      lookup: opts.lookup ?? defaultLookup,
      cgroupMount: opts.cgroupMount ?? '/sys/fs/cgroup',
      cgroupParent: opts.cgroupParent ?? 'fountain',
      env: opts.env ?? process.env,
      hidden: [realHome],
      programs: opts.programDirs ?? defaultProgramDirs(),
      serverUrl: opts.serverUrl,
      npmCache: opts.npmCache,
    });
    return ok(new ProcessBackend({ ...opts, confinement }));
  } catch (e) {
    return err(`cannot use root ${opts.root}: ${e instanceof Error ? e.message : String(e)}`);
  }
}
