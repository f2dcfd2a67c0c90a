/**
 * The namespace confinement: each command runs under bubblewrap in the sandbox's network
 * namespace and control groups, with the sandbox directory at /home/sprite and a private /tmp.
 *
 * Over 400 lines because the bubblewrap arguments, control groups and network namespace of a command
 * are one set-up sequence; it has not been split by concern yet.
 */
import { createHash } from 'node:crypto';
import type { Socket as UdpSocket } from 'node:dgram';
import { mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { chmod, lchown, lstat, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, posix, relative, sep } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Result } from '../../../sandbox/result.ts';
import { err, ok } from '../../../sandbox/result.ts';
import type { WireError } from '../../backend.ts';
import type { CommandRequest, Confinement, LaunchSpec } from '../process/confinement.ts';
import { userNamespaceFilter } from './userns-filter.ts';
import { childEnv } from '../process/env.ts';
import { SANDBOX_HOME } from '../process/paths.ts';
import type { BeneathTarget } from '../process/write-beneath.ts';
import { SandboxCgroup } from './cgroups.ts';
import type { CgroupLimits } from './cgroups.ts';
import { startResolver } from './dns.ts';
import { nsPath, setEgressPorts, setUpNetwork, slotAddresses, tearDownNetwork } from './netns.ts';
import type { SandboxNet, Tools } from './netns.ts';
import { allows, parseAllowList } from './policy.ts';
import { EgressProxy } from './proxy.ts';
import type { Lookup } from './proxy.ts';
import { seedNpmCache } from './npm-seed.ts';
import { loopbackServer, openServerLink } from './server-link.ts';
import type { ServerLink } from './server-link.ts';

/** Per-sandbox state beside the sandboxes (dot-directories are neither listed nor valid names). */
export const STATE_DIR = '.fountain-ns';
const DNS_TTL_S = 5;
/** USER inside a namespace sandbox (its HOME is /home/sprite). */
const SANDBOX_USER = 'sprite';

/** Joins the cgroups named before `--`, then execs the rest: the command never runs outside them. */
const JOIN_CGROUPS =
  'f="$1"; shift; while [ "$#" -gt 0 ] && [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@" 3<"$f"';
/** The user-namespace filter, handed to bwrap as fd 3 (null on an architecture it does not know). */
const USERNS_FILTER = userNamespaceFilter();
/**
 * The last step inside the sandbox, as the sandbox's uid: enter the working directory (bwrap, no
 * longer able to override permissions, cannot), then exec; a missing command gives 127 as on the process backend.
 */
const EXEC_COMMAND = 'cd "$1" || exit 126; shift; unset OLDPWD; exec "$@"';

const stateSchema = z.object({ slot: z.number().int().nonnegative(), allow: z.array(z.string()) });
type SandboxState = z.infer<typeof stateSchema>;

export interface NamespaceConfinementOptions {
  readonly root: string;
  readonly logger: Logger;
  readonly tools: Tools & { readonly bwrap: string; readonly sh: string; readonly setpriv: string };
  /** Sandbox commands run as uid (and gid) `uidBase + slot`: unprivileged, one per sandbox. */
  readonly uidBase: number;
  readonly subnet: { readonly base: number; readonly prefix: number };
  readonly limits: CgroupLimits;
  /** The ports the egress proxy serves (each sniffs TLS SNI or the HTTP Host header). */
  readonly ports: readonly number[];
  readonly lookup: Lookup;
  readonly cgroupMount: string;
  readonly cgroupParent: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Host directories the sandbox must not see (the daemon user's home, with its credentials). */
  readonly hidden: readonly string[];
  /**
   * Directories an agent's own program lives in (this Fountain installation, the Node running it):
   * bound read-only at the same path wherever they are, even under /tmp, /home or a hidden directory.
   */
  readonly programs: readonly string[];
  /**
   * The Fountain server this runner serves: when it listens on this machine's loopback, its address
   * and port answer inside each sandbox too (the model gateway, the platform MCP server), and only those.
   */
  readonly serverUrl?: string | undefined;
  /** A warm npm cache each new sandbox's own cache starts from (hard links; npm then prefers it offline). */
  readonly npmCache?: string | undefined;
}

interface Live {
  readonly uid: number;
  readonly net: SandboxNet;
  readonly cgroup: SandboxCgroup;
  readonly resolver: UdpSocket;
  readonly proxy: EgressProxy;
  readonly link: ServerLink | null;
  /** Read by the resolver and the proxy on every query and connection. */
  readonly policy: { allow: readonly string[] };
}

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const under = (parent: string, child: string): boolean => {
  const rel = relative(parent, child);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
};

export class NamespaceConfinement implements Confinement {
  readonly extraCapabilities: readonly string[] = ['network_policy'];
  /** Commands see the sandbox at /home/sprite, never at its host directory. */
  readonly insidePath = SANDBOX_HOME;
  readonly #o: NamespaceConfinementOptions;
  readonly #live = new Map<string, Live>();
  /** One setup or teardown at a time per sandbox. */
  readonly #locks = new Map<string, Promise<unknown>>();
  readonly #slots = new Set<number>();

  constructor(opts: NamespaceConfinementOptions) {
    this.#o = opts;
    mkdirSync(join(opts.root, STATE_DIR), { recursive: true, mode: 0o700 });
    for (const name of readdirSync(join(opts.root, STATE_DIR))) {
      const s = this.#readState(name);
      if (s) this.#slots.add(s.slot);
    }
  }

  /** The live allow list of a prepared sandbox (tests and logs). */
  allowList(name: string): readonly string[] | undefined {
    return this.#live.get(name)?.policy.allow;
  }

  /** The gateway a prepared sandbox resolves and connects through. */
  gateway(name: string): string | undefined {
    return this.#live.get(name)?.net.gateway;
  }

  prepare(name: string, dir: string): Promise<Result<void, WireError>> {
    return this.#locked(name, async () => {
      if (this.#live.has(name)) return ok(undefined);
      const r = await this.#setUp(name);
      if (!r.ok) return err({ code: 'unavailable', detail: r.error });
      // A sandbox made (or last served) by a daemon that ran commands as root becomes its uid's.
      const uid = this.#live.get(name)!.uid;
      try {
        const seeded = this.#o.npmCache ? await seedNpmCache(this.#o.npmCache, join(dir, '.npm')) : false;
        if ((await lstat(dir)).uid !== uid) await chownTree(dir, uid);
        else if (seeded) await chownTree(join(dir, '.npm'), uid);
      } catch (e) {
        return err({ code: 'unavailable', detail: `sandbox ownership: ${message(e)}` });
      }
      return ok(undefined);
    });
  }

  launch(name: string, dir: string, req: CommandRequest): LaunchSpec {
    const o = this.#o;
    const env = childEnv(SANDBOX_HOME, req.env, {
      base: o.env,
      realHome: SANDBOX_HOME,
      user: SANDBOX_USER,
      tmpdir: '/tmp',
    });
    // The sandbox's cache was seeded from a warm one: use what it holds without asking the registry
    // first, which a sandbox whose policy does not allow it could not reach.
    if (o.npmCache && !req.env.some((p) => p[0] === 'npm_config_prefer_offline'))
      env.npm_config_prefer_offline = 'true';
    const live = this.#live.get(name);
    const uid = live?.uid ?? this.#uidOf(name);
    const bwrap = [
      '--ro-bind',
      '/',
      '/',
      '--dev',
      '/dev',
      '--proc',
      '/proc',
      '--tmpfs',
      '/run',
      '--tmpfs',
      '/home',
      '--bind',
      dir,
      SANDBOX_HOME,
      '--bind',
      this.#tmpDir(name),
      '/tmp',
      ...this.#hiddenMounts(),
      ...this.#programMounts(),
      '--ro-bind',
      this.#resolvConf(name),
      '/etc/resolv.conf',
      '--ro-bind',
      join(this.#stateDir(name), 'passwd'),
      '/etc/passwd',
      '--ro-bind',
      join(this.#stateDir(name), 'group'),
      '/etc/group',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      '--hostname',
      'sprite',
      '--die-with-parent',
      // No nested user namespace: kernel attack surface container runtimes close by default too.
      ...(USERNS_FILTER ? ['--seccomp', '3'] : []),
      // Only what setpriv needs to leave root; it drops these too before the command runs.
      '--cap-drop',
      'ALL',
      '--cap-add',
      'CAP_SETUID',
      '--cap-add',
      'CAP_SETGID',
      '--cap-add',
      'CAP_SETPCAP',
    ];
    // The command runs as the sandbox's own unprivileged uid, with no capabilities and no way to
    // gain any: the host's permission bits protect root-only files as they do from any user.
    const unprivileged = [
      o.tools.setpriv,
      `--reuid=${uid}`,
      `--regid=${uid}`,
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
      '--',
    ];
    const cgroups = live?.cgroup.procsFiles ?? [];
    return {
      file: o.tools.sh,
      args: [
        '-c',
        JOIN_CGROUPS,
        'fountain-cgroup',
        USERNS_FILTER ? this.#filterFile(name) : '/dev/null',
        ...cgroups,
        '--',
        o.tools.nsenter,
        `--net=${nsPath(live?.net.ns ?? this.#net(name, 0).ns)}`,
        '--',
        o.tools.bwrap,
        ...bwrap,
        '--',
        ...unprivileged,
        o.tools.sh,
        '-c',
        EXEC_COMMAND,
        'fountain-exec',
        this.#cwd(name, dir, req.dir),
        req.cmd,
        ...req.args,
      ],
      cwd: dir,
      env,
    };
  }

  /** Inside /home/sprite or the private /tmp; nothing else is writable from inside either. */
  writablePath(name: string, dir: string, path: string): BeneathTarget | null {
    const p = posix.resolve(
      SANDBOX_HOME,
      path === '~' ? SANDBOX_HOME : path.startsWith('~/') ? `${SANDBOX_HOME}/${path.slice(2)}` : path,
    );
    const uid = this.#live.get(name)?.uid ?? this.#uidOf(name);
    const owner = { uid, gid: uid };
    if (p.startsWith(`${SANDBOX_HOME}/`))
      return { base: dir, components: p.slice(SANDBOX_HOME.length + 1).split('/'), owner };
    if (p.startsWith('/tmp/')) return { base: this.#tmpDir(name), components: p.slice(5).split('/'), owner };
    return null;
  }

  async freeze(name: string): Promise<Result<void, WireError>> {
    const cg = this.#cgroup(name);
    if (cg.state() === 'absent') return ok(undefined); // nothing runs: already parked
    const r = await cg.freeze();
    return r.ok ? ok(undefined) : err({ code: 'unavailable', detail: r.error });
  }

  async thaw(name: string): Promise<Result<void, WireError>> {
    const r = await this.#cgroup(name).thaw();
    return r.ok ? ok(undefined) : err({ code: 'unavailable', detail: r.error });
  }

  release(name: string): Promise<void> {
    return this.#locked(name, async () => {
      const slot = this.#readState(name)?.slot;
      await this.#tearDown(name);
      await rm(join(this.#o.root, STATE_DIR, name), { recursive: true, force: true });
      if (slot !== undefined) this.#slots.delete(slot);
    });
  }

  async applyNetworkPolicy(name: string, allow: readonly string[]): Promise<Result<void, WireError>> {
    const parsed = parseAllowList(allow);
    if (!parsed.ok) return err({ code: 'invalid', detail: parsed.error });
    const prepared = await this.prepare(name, join(this.#o.root, name));
    if (!prepared.ok) return prepared;
    return this.#locked(name, async (): Promise<Result<void, WireError>> => {
      const live = this.#live.get(name);
      const state = this.#readState(name);
      if (!live || !state) return err({ code: 'unavailable', detail: 'sandbox network is not set up' });
      try {
        await this.#writeState(name, { slot: state.slot, allow: [...parsed.value] });
      } catch (e) {
        return err({ code: 'write_failed', detail: `policy: ${message(e)}` });
      }
      live.policy.allow = parsed.value;
      const ports = await setEgressPorts(this.#o.tools, live.net, parsed.value.length === 0 ? [] : this.#o.ports);
      // Connections to names no longer allowed end now, not at their next request.
      const revoked = live.proxy.revoke();
      this.#o.logger.info({ sandbox: name, allow: parsed.value, revoked }, 'runner: network policy applied');
      return ports.ok ? ok(undefined) : err({ code: 'unavailable', detail: ports.error });
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.#live.keys()].map((name) => this.#locked(name, () => this.#tearDown(name))));
  }

  async #setUp(name: string): Promise<Result<void, string>> {
    const o = this.#o;
    let state = this.#readState(name);
    if (!state) {
      const slot = this.#freeSlot();
      if (slot === null) return err('no free sandbox network left in the subnet');
      state = { slot, allow: [] };
    }
    this.#slots.add(state.slot);
    const net = this.#net(name, state.slot);
    try {
      await mkdir(this.#tmpDir(name), { recursive: true, mode: 0o1777 });
      // Every uid may create in /tmp, as on any host; the umask took these bits at creation.
      await chmod(this.#tmpDir(name), 0o1777);
      await writeFile(this.#resolvConf(name), `nameserver ${net.gateway}\noptions attempts:1 timeout:2\n`, {
        mode: 0o644,
      });
      await this.#writeState(name, state);
      await this.#writeAccounts(name, this.#o.uidBase + state.slot);
      if (USERNS_FILTER) await writeFile(this.#filterFile(name), USERNS_FILTER, { mode: 0o644 });
    } catch (e) {
      return err(`sandbox state: ${message(e)}`);
    }
    const cgroup = this.#cgroup(name);
    const cg = await cgroup.ensure(o.limits);
    if (!cg.ok) return cg;
    const netUp = await setUpNetwork(o.tools, net);
    if (!netUp.ok) return netUp;
    const ports = await setEgressPorts(o.tools, net, state.allow.length === 0 ? [] : o.ports);
    if (!ports.ok) {
      await tearDownNetwork(o.tools, net);
      return ports;
    }
    const log = o.logger.child({ sandbox: name });
    const policy = { allow: state.allow as readonly string[] };
    const allowed = (n: string) => allows(policy.allow, n);
    let resolver: UdpSocket | undefined;
    try {
      resolver = await startResolver(
        net.gateway,
        53,
        (n) => (allowed(n) ? { kind: 'address', ipv4: net.gateway, ttl: DNS_TTL_S } : { kind: 'nxdomain' }),
        (e) => log.warn({ err: e.message }, 'runner: sandbox resolver error'),
      );
      const proxy = await EgressProxy.start({
        address: net.gateway,
        ports: o.ports,
        allowed,
        lookup: o.lookup,
        logger: log,
      });
      const server = loopbackServer(o.serverUrl);
      let link: ServerLink | null = null;
      if (server) {
        const opened = await openServerLink(o.tools.nsenter, net.ns, server, log);
        if (!opened.ok) {
          await proxy.close();
          throw new Error(opened.error);
        }
        link = opened.value;
      }
      this.#live.set(name, { uid: o.uidBase + state.slot, net, cgroup, resolver, proxy, link, policy });
      return ok(undefined);
    } catch (e) {
      resolver?.close();
      await tearDownNetwork(o.tools, net);
      return err(`egress listeners on ${net.gateway}: ${message(e)}`);
    }
  }

  async #tearDown(name: string): Promise<void> {
    const live = this.#live.get(name);
    this.#live.delete(name);
    if (live) {
      live.resolver.close();
      await live.proxy.close();
      await live.link?.close();
    }
    const removed = await this.#cgroup(name).remove();
    if (!removed.ok) this.#o.logger.warn({ sandbox: name, err: removed.error }, 'runner: sandbox cgroups not removed');
    const slot = live?.net ?? this.#net(name, this.#readState(name)?.slot ?? 0);
    await tearDownNetwork(this.#o.tools, slot);
  }

  #locked<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#locks.get(name) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.#locks.set(name, tail);
    void tail.then(() => {
      if (this.#locks.get(name) === tail) this.#locks.delete(name);
    });
    return next;
  }

  /** Short, stable identifiers per root and sandbox: interface names have 15 bytes. */
  #id(name: string): string {
    return createHash('sha256').update(`${this.#o.root}\0${name}`).digest('hex').slice(0, 12);
  }

  #net(name: string, slot: number): SandboxNet {
    const id = this.#id(name);
    const addrs = slotAddresses(this.#o.subnet, slot) ?? { gateway: '0.0.0.0', address: '0.0.0.0' };
    return { ns: `fountain-${id}`, hostIf: `fh${id}`, peerIf: `fp${id}`, ...addrs, prefix: 30 };
  }

  #cgroup(name: string): SandboxCgroup {
    return new SandboxCgroup(this.#o.cgroupMount, `${this.#o.cgroupParent}/${this.#id(name)}`);
  }

  #freeSlot(): number | null {
    for (let slot = 0; slotAddresses(this.#o.subnet, slot) !== null; slot++) if (!this.#slots.has(slot)) return slot;
    return null;
  }

  #stateDir(name: string): string {
    return join(this.#o.root, STATE_DIR, name);
  }
  #tmpDir(name: string): string {
    return join(this.#stateDir(name), 'tmp');
  }
  #filterFile(name: string): string {
    return join(this.#stateDir(name), 'userns.bpf');
  }
  #resolvConf(name: string): string {
    return join(this.#stateDir(name), 'resolv.conf');
  }

  /** The sandbox's uid when it is not live yet: from its slot, else the base (still unprivileged). */
  #uidOf(name: string): number {
    return this.#o.uidBase + (this.#readState(name)?.slot ?? 0);
  }

  /** /etc/passwd and /etc/group as the sandbox sees them: the host's, plus its own user `sprite`. */
  async #writeAccounts(name: string, uid: number): Promise<void> {
    const host = (f: string) => {
      try {
        return readFileSync(f, 'utf8')
          .split('\n')
          .filter((l) => l !== '' && !l.startsWith(`${SANDBOX_USER}:`))
          .join('\n');
      } catch {
        return '';
      }
    };
    await writeFile(
      join(this.#stateDir(name), 'passwd'),
      `${host('/etc/passwd')}\n${SANDBOX_USER}:x:${uid}:${uid}:Fountain sandbox:${SANDBOX_HOME}:/bin/sh\n`,
      { mode: 0o644 },
    );
    await writeFile(join(this.#stateDir(name), 'group'), `${host('/etc/group')}\n${SANDBOX_USER}:x:${uid}:\n`, {
      mode: 0o644,
    });
  }

  #readState(name: string): SandboxState | null {
    try {
      const parsed = stateSchema.safeParse(JSON.parse(readFileSync(join(this.#stateDir(name), 'state.json'), 'utf8')));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  async #writeState(name: string, state: SandboxState): Promise<void> {
    await mkdir(this.#stateDir(name), { recursive: true, mode: 0o700 });
    const file = join(this.#stateDir(name), 'state.json');
    await writeFile(`${file}.partial`, JSON.stringify(state), { mode: 0o600 });
    await rename(`${file}.partial`, file);
  }

  /** The runner root (every sandbox, every journal) and the daemon user's home are hidden, unless /tmp or /home already cover them. */
  #hiddenMounts(): string[] {
    const out: string[] = [];
    for (const p of [this.#o.root, ...this.#o.hidden]) {
      if (p === '/' || p === '/tmp' || p === '/home' || under('/tmp', p) || under('/home', p) || under('/run', p))
        continue;
      out.push('--tmpfs', p);
    }
    return out;
  }

  /**
   * Program directories the mounts above would cover (under /tmp, /home, /run or a hidden directory)
   * come back read-only; anything inside the runner root (other sandboxes, journals) stays hidden.
   */
  #programMounts(): string[] {
    const covered = ['/tmp', '/home', '/run', ...this.#o.hidden];
    const out: string[] = [];
    const root = this.#o.root;
    for (const p of this.#o.programs) {
      if (p === root || under(root, p)) continue;
      const cover = covered.find((c) => p === c || under(c, p));
      if (cover === undefined) continue;
      // bwrap would make the missing parents 0700, closed to the sandbox's uid: made 0755 first.
      const parents: string[] = [];
      for (let a = dirname(p); a !== cover && under(cover, a); a = dirname(a)) parents.unshift(a);
      for (const a of parents) out.push('--perms', '0755', '--dir', a);
      out.push('--ro-bind', p, p);
    }
    // A runner root inside a bound installation is hidden again.
    if (this.#o.programs.some((p) => under(p, root))) out.push('--tmpfs', root);
    return out;
  }

  /** The working directory inside the sandbox: the requested one when it exists there, else /home/sprite. */
  #cwd(name: string, dir: string, requested: string | undefined): string {
    const r = requested ?? '';
    const p =
      r === '' || r === '~'
        ? SANDBOX_HOME
        : posix.resolve(SANDBOX_HOME, r.startsWith('~/') ? `${SANDBOX_HOME}/${r.slice(2)}` : r);
    let host: string | null;
    if (p === SANDBOX_HOME) return p;
    if (p.startsWith(`${SANDBOX_HOME}/`)) host = join(dir, p.slice(SANDBOX_HOME.length + 1));
    else if (p === '/tmp' || p.startsWith('/tmp/')) host = join(this.#tmpDir(name), p.slice(4));
    else if (p === '/home' || p.startsWith('/home/') || p === '/run' || p.startsWith('/run/')) host = null;
    else if ([this.#o.root, ...this.#o.hidden].some((h) => p === h || under(h, p))) host = null;
    else host = p;
    try {
      if (host !== null && statSync(host).isDirectory()) return p;
    } catch {
      // missing: fall back to the sandbox home
    }
    return SANDBOX_HOME;
  }
}

/**
 * lchown of a tree, never following a link. A file with other hard links (the seeded npm cache's,
 * shared with the warm cache and other sandboxes) stays root's: the sandbox may read it, never change it.
 */
async function chownTree(path: string, uid: number): Promise<void> {
  const st = await lstat(path);
  if (!st.isDirectory() && st.nlink > 1) return;
  await lchown(path, uid, uid);
  if (!st.isDirectory()) return;
  for (const e of await readdir(path, { withFileTypes: true })) await chownTree(join(path, e.name), uid);
}
