/**
 * What every part of the Daytona adapter shares: the REST client, where each sandbox's toolbox
 * is (dropped on any lifecycle change or toolbox failure), the live commands, and the guard.
 */

import type { Logger } from 'pino';
import type { Handle, NetworkPolicy, SandboxError, SandboxResult } from '../../sandbox/index.ts';
import { Private, err, fail, ok, sandboxError } from '../../sandbox/index.ts';
import type { NetworkSettingsBody, Toolbox } from './client.ts';
import { DaytonaClient } from './client.ts';
import type { DaytonaOptions, ResolvedConfig } from './config.ts';
import { resolveConfig } from './config.ts';
import type { SandboxDto } from './schemas.ts';
import { wrapForExecute } from './shell.ts';
import { JournalPoller } from './stream.ts';

/** What a Daytona handle carries privately: the key it was made with and where its toolbox is. */
export interface DaytonaHandlePrivate {
  readonly apiKey: string;
  readonly sandboxId: string;
  readonly toolboxProxyUrl: string;
}

export interface CommandPrivate {
  readonly sandboxName: string;
  readonly sessionId: string;
  readonly cmdId: string;
  readonly stateDir: string;
}

export interface LiveCommand {
  readonly priv: CommandPrivate;
  readonly poller: JournalPoller;
  readonly stdin: boolean;
  exited: boolean;
  /** Serialises stdin writes so chunks land in order. */
  chain: Promise<unknown>;
}

export interface Located {
  readonly toolbox: Toolbox;
  readonly sandboxId: string;
  readonly home: string;
}

/** Platform sandboxes carry this label so the reaper and list_all_names see only Fountain's. */
export const FOUNTAIN_LABELS: Readonly<Record<string, string>> = { fountain: '1' };

export const SESSION_PREFIX = 'fountain-';
export const SESSION_ID = /^[A-Za-z0-9_-]{1,256}$/;
// A host name of one or more labels whose last label has a letter (so never a bare number):
// single-label hosts (localhost, an internal registry) are what an environment's allowed_hosts may name.
export const DOMAIN =
  /^(\*\.)?([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
export const IPV4_CIDR = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(\/(\d|[12]\d|3[0-2]))?$/;
/** Daytona caps each allow list at 10 entries (source v0.190). */
export const MAX_LIST = 10;
/** Stays well under the kernel's 128 KiB limit on one argument after two base64 passes. */
export const STDIN_CHUNK = 32 * 1024;
/** "No timeout" still has to be a number: the spec's default is 10 s. */
export const EXEC_NO_TIMEOUT_SEC = 24 * 3600;
export const GONE_STATES = new Set(['destroyed', 'destroying']);
export const PARKED_STATES = new Set(['stopped', 'archived', 'paused']);
export const FAILED_STATES = new Set(['error', 'build_failed']);

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class DaytonaCore {
  readonly provider = 'daytona' as const;

  readonly key: Private<string>;

  readonly cfg: ResolvedConfig;

  readonly client: DaytonaClient;

  readonly log: Logger | undefined;

  /** name → where its toolbox is; dropped on any lifecycle change or toolbox failure. */
  readonly located = new Map<string, Located>();

  readonly commands = new Map<string, LiveCommand>();

  constructor(opts: DaytonaOptions) {
    this.key = new Private(opts.apiKey.trim());
    this.cfg = resolveConfig(opts);
    this.log = opts.logger;
    this.client = new DaytonaClient({
      apiUrl: this.cfg.apiUrl,
      apiKey: this.key,
      requestTimeoutMs: this.cfg.requestTimeoutMs,
    });
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'daytona', name } : { provider: 'daytona', name, private: priv };
  }

  /** The adapter never throws: anything unexpected becomes a `provider` error without the key. */
  async guard<T>(op: string, fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (cause) {
      const text = (cause instanceof Error ? cause.message : String(cause)).split(this.key.reveal()).join('[redacted]');
      this.log?.warn({ op, err: text }, 'daytona adapter caught an unexpected exception');
      return fail('provider', `${op}: ${text.slice(0, 200)}`, { provider: 'daytona' });
    }
  }

  handleFor(name: string, s: SandboxDto): Handle {
    const priv: DaytonaHandlePrivate = {
      apiKey: this.key.reveal(),
      sandboxId: s.id,
      toolboxProxyUrl: s.toolboxProxyUrl ?? '',
    };
    return { provider: 'daytona', name, private: new Private(priv) };
  }

  forget(name: string): void {
    this.located.delete(name);
  }

  locate(handle: Handle): Promise<SandboxResult<Located>> {
    return this.locateByName(handle.name);
  }

  /**
   * Finds the sandbox's toolbox by name. Handles are rebuilt from stored rows without a private
   * part, and a start may move the proxy, so the URL always comes from a fresh Sandbox DTO.
   */
  async locateByName(name: string): Promise<SandboxResult<Located>> {
    const cached = this.located.get(name);
    if (cached) return ok(cached);
    const g = await this.client.getSandbox(name);
    if (!g.ok) return g;
    const s = g.value;
    const state = s.state ?? 'unknown';
    if (GONE_STATES.has(state)) return fail('not_found');
    if (state !== 'started') return fail('unavailable', `sandbox_not_started: ${state}`);
    if (!s.toolboxProxyUrl) return fail('provider', 'sandbox has no toolboxProxyUrl', { provider: 'daytona' });
    const toolbox = this.client.toolbox(s.toolboxProxyUrl, s.id);
    const home = await toolbox.homeDir();
    if (!home.ok) return home;
    const loc: Located = { toolbox, sandboxId: s.id, home: home.value.dir.replace(/\/+$/, '') };
    this.located.set(name, loc);
    return ok(loc);
  }

  /** A toolbox call that failed transiently may have hit a stale proxy: re-read it once and retry. */
  async retryOnStaleProxy<T>(
    handle: Handle,
    loc: Located,
    call: (l: Located) => Promise<SandboxResult<T>>,
  ): Promise<SandboxResult<T>> {
    const first = await call(loc);
    if (first.ok || first.error.code !== 'unavailable') return first;
    this.forget(handle.name);
    const again = await this.locate(handle);
    if (!again.ok) return first;
    if (again.value.toolbox.base === loc.toolbox.base) return first;
    return call(again.value);
  }

  afterToolboxFailure<T>(handle: Handle, r: { ok: false; error: SandboxError }): SandboxResult<T> {
    if (r.error.code === 'unavailable') this.forget(handle.name);
    return r;
  }

  /** Runs a shell script through `/process/execute`; exit code −1 means the daemon could not start it. */
  async shell(
    l: Located,
    script: string,
    timeoutSec: number,
    clientLimit = true,
  ): Promise<SandboxResult<{ output: string; exitCode: number }>> {
    const r = await l.toolbox.execute(wrapForExecute(script), timeoutSec, clientLimit);
    if (!r.ok) return r;
    if (r.value.exitCode < 0)
      return fail('provider', 'execute: process failed to start (exit code -1)', { provider: 'daytona' });
    return ok({ output: r.value.result, exitCode: r.value.exitCode });
  }

  /** Polls until the state matches; `error`/`build_failed` end the wait, a timeout is transient. */
  async waitState(name: string, done: (state: string) => boolean): Promise<SandboxResult<SandboxDto>> {
    const deadline = Date.now() + this.cfg.lifecycleTimeoutMs;
    let last: SandboxError | undefined;
    for (;;) {
      const g = await this.client.getSandbox(name);
      if (g.ok) {
        const state = g.value.state ?? '';
        if (done(state)) return ok(g.value);
        if (FAILED_STATES.has(state)) {
          return fail('provider', `sandbox ${state}: ${g.value.errorReason ?? ''}`.trim(), { provider: 'daytona' });
        }
        if (GONE_STATES.has(state)) return fail('not_found');
      } else if (g.error.code === 'not_found' || g.error.code === 'denied' || g.error.code === 'invalid') {
        return g;
      } else last = g.error;
      if (Date.now() >= deadline) return err(last ?? sandboxError('unavailable', 'lifecycle_timeout'));
      await sleep(this.cfg.statePollMs);
    }
  }
}

/** `fountain-<base36 ms>-<hex>`: the session id carries its creation time. */
export function sessionCreatedAt(id: string): Date | null {
  const m = /^fountain-([0-9a-z]{6,12})-[0-9a-f]{8}$/.exec(id);
  if (!m || !m[1]) return null;
  const ms = parseInt(m[1], 36);
  return Number.isFinite(ms) ? new Date(ms) : null;
}

/**
 * Translates the contract's allow list into Daytona's fields. `allow: []` is an explicit
 * block-all with both lists cleared, never an absent policy; IPv4 entries go to the CIDR list.
 * Not verified against the production runner (not public): see docs/integrations.
 */
export function networkSettingsFor(policy: NetworkPolicy): SandboxResult<NetworkSettingsBody> {
  const domains: string[] = [];
  const cidrs: string[] = [];
  for (const raw of policy.allow) {
    const entry = raw.trim().toLowerCase();
    const ip = IPV4_CIDR.exec(entry);
    if (ip) {
      if ([1, 2, 3, 4].some((i) => Number(ip[i]) > 255)) return fail('invalid', `network_policy: bad address ${entry}`);
      cidrs.push(ip[5] ? entry : `${entry}/32`);
    } else if (DOMAIN.test(entry)) domains.push(entry);
    else return fail('invalid', `network_policy: not a domain or IPv4 CIDR: ${entry.slice(0, 100)}`);
  }
  if (domains.length > MAX_LIST || cidrs.length > MAX_LIST) {
    return fail('invalid', `network_policy: Daytona allows at most ${MAX_LIST} entries per list`);
  }
  if (domains.length === 0 && cidrs.length === 0) {
    return ok({ networkBlockAll: true, networkAllowList: '', domainAllowList: '' });
  }
  // Never `networkBlockAll: false` or an empty CIDR list: the runner reads either as "restore
  // general outbound access" and the domain list is then ignored. Domains go on their own, as
  // in Daytona's SDK example; a non-empty CIDR list already implies block-all off.
  if (cidrs.length === 0) return ok({ domainAllowList: domains.join(',') });
  return ok({ networkAllowList: cidrs.join(','), domainAllowList: domains.join(',') });
}
