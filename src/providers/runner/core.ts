/**
 * What every part of the runner adapter shares: routing a sandbox name to the connection of the
 * runner that holds it, one request over it, what that runner offers, and the total guard.
 */

import { posix } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Capability, Command, Handle, Result, SandboxError, SandboxResult } from '../../sandbox/index.ts';
import { Private, SANDBOX_HOME, err, fail, isCapability, ok, parseRunnerName } from '../../sandbox/index.ts';
import { DEFAULT_RUNNER_CAPABILITIES, decodeBase64 } from '../../wire/index.ts';
import { RUNNER_OFFLINE, providerError } from './errors.ts';
import type { OutgoingRequest, RunnerConnection, RunnerHost, RunnerInfo, SessionListener } from './host.ts';

/** The contract capabilities among what a runner advertises (its list also names wire features, stdin_write_id). */
const contractOnes = (advertised: readonly string[]): Set<Capability> => new Set(advertised.filter(isCapability));

/** What the adapter assumes of a runner it cannot see (offline, or no handle): the upstream set. */
export const CAPS: ReadonlySet<Capability> = contractOnes(DEFAULT_RUNNER_CAPABILITIES);
/** The daemon gets the exec's own budget; the server waits this much longer for the reply. */
export const EXEC_GRACE_MS = 10_000;

/** What `Command.private` holds for a runner command. */
export interface RunnerCommandPrivate {
  readonly runnerId: string;
  readonly name: string;
  readonly sessionId: string;
  /** The daemon that served the spawn or attach writes a repeated stdin write id once (stdin_write_id). */
  readonly stdinOnce?: boolean;
}

export const commandPrivateSchema = z.object({
  runnerId: z.string(),
  name: z.string(),
  sessionId: z.string(),
  stdinOnce: z.boolean().optional(),
});

/** Placement: the most recently connected online runner of the account. */
export function pickRunner(host: RunnerHost, accountId: string): Result<RunnerInfo, 'no_runner_online'> {
  const first = host.online(accountId)[0];
  return first ? ok(first) : err('no_runner_online');
}

/** Maps a sandbox path onto the sandbox's real directory the way the process backend does. */
export function mapSandboxPath(dir: string, path: string): string {
  if (path === '' || path === '~' || path === SANDBOX_HOME) return dir;
  if (path.startsWith(`${SANDBOX_HOME}/`)) return posix.join(dir, path.slice(SANDBOX_HOME.length + 1));
  if (path.startsWith('~/')) return posix.join(dir, path.slice(2));
  if (path.startsWith('/')) return path;
  return posix.join(dir, path);
}

/** Output bytes from a base64 field, leniently: text that is not base64 is taken as is. */
export const lenientBytes = (text: string): Buffer => decodeBase64(text) ?? Buffer.from(text, 'utf8');

export interface LiveCommand {
  readonly conn: RunnerConnection;
  readonly listener: SessionListener;
  sessionId: string | undefined;
  ended: boolean;
}

export interface RunnerAdapterOptions {
  readonly logger?: Logger;
}

export class RunnerCore {
  readonly provider = 'runner' as const;

  readonly host: RunnerHost;

  readonly log: Logger | undefined;

  /** Local subscriptions by command ref, so stop_command can drop exactly its own listener. */
  readonly live = new Map<string, LiveCommand>();

  constructor(host: RunnerHost, opts: RunnerAdapterOptions = {}) {
    this.host = host;
    this.log = opts.logger;
  }

  /**
   * With a handle, what the runner holding that sandbox advertised when it connected (a namespace
   * runner has network_policy, a process runner does not); without one, or offline, the upstream set.
   */
  offered(handle?: Handle): ReadonlySet<Capability> {
    if (handle === undefined) return CAPS;
    const id = parseRunnerName(handle.name);
    const info = id.ok ? this.host.whereis(id.value)?.info : undefined;
    return info?.capabilities ? contractOnes(info.capabilities) : CAPS;
  }

  buildHandle(name: string, priv?: Private<unknown>): Handle {
    return priv === undefined ? { provider: 'runner', name } : { provider: 'runner', name, private: priv };
  }

  target(command: Command): SandboxResult<RunnerCommandPrivate> {
    const parsed = commandPrivateSchema.safeParse(
      command.private instanceof Private ? command.private.reveal() : undefined,
    );
    return parsed.success ? ok(parsed.data) : fail('invalid', 'not_a_runner_command');
  }

  route(name: string): SandboxResult<{ conn: RunnerConnection; runnerId: string }> {
    const id = parseRunnerName(name);
    if (!id.ok) return fail('invalid', `not_a_runner_sandbox_name: ${name}`);
    const conn = this.host.whereis(id.value);
    // Offline is transient: a parked directory on a switched-off machine is not gone.
    return conn ? ok({ conn, runnerId: id.value }) : fail('unavailable', RUNNER_OFFLINE);
  }

  async call(
    name: string,
    req: OutgoingRequest,
    opts?: { timeoutMs?: number | null },
  ): Promise<SandboxResult<Record<string, unknown>>> {
    const route = this.route(name);
    if (!route.ok) return route;
    return route.value.conn.call(req, opts);
  }

  /** The adapter's last line of defence: a bug becomes a `provider` error, never a rejection. */
  async total<T>(op: string, fn: () => Promise<SandboxResult<T>>): Promise<SandboxResult<T>> {
    try {
      return await fn();
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      this.log?.error({ err: message, op }, 'runner adapter operation failed unexpectedly');
      return err(providerError(`internal: ${op}: ${message}`) as SandboxError);
    }
  }
}
