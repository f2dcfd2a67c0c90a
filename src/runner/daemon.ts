/**
 * The runner daemon: holds one connection to Fountain, reconnecting with backoff until it is
 * stopped or refused for good; stopping ends every session the backend started.
 */
import { hostname as osHostname } from 'node:os';
import type { Logger } from 'pino';
import type { Backend } from './backend.ts';
import { connectOnce } from './connection.ts';
import type { ConnectionTimings } from './connection.ts';
import { backoffDelay, runnerSocketUrl } from './dial.ts';
import type { BackoffTimings } from './dial.ts';
import { goarch, goos } from './identity.ts';
import { DEFAULT_RUNNER_CAPABILITIES, type RunnerBackend } from '../wire/index.ts';

export type DaemonTimings = ConnectionTimings & BackoffTimings;

export const DEFAULT_TIMINGS: DaemonTimings = {
  pingIntervalMs: 10_000,
  pingTimeoutMs: 5_000,
  dialTimeoutMs: 30_000,
  writeTimeoutMs: 30_000,
  baseMs: 1_000,
  capMs: 30_000,
};

export interface DaemonOptions {
  readonly name: string;
  /** Absolute sandbox root, reported to the server. */
  readonly root: string;
  readonly backend: Backend;
  /** Reported to the server with the capabilities, so the Runners page says what a sandbox is here. */
  readonly backendKind?: RunnerBackend;
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly logger: Logger;
  readonly version: string;
  readonly hostname?: string;
  readonly timings?: Partial<DaemonTimings>;
  /** Told true when a connection is up and at each heartbeat over it, false when it ends (the status file). */
  readonly onLink?: (up: boolean) => void;
}

export type DaemonExit = { readonly kind: 'stopped' } | { readonly kind: 'gave_up'; readonly message: string };

export interface DaemonHandle {
  /** Ends every session, closes the socket, and resolves when the daemon is done. Idempotent. */
  stop(): Promise<DaemonExit>;
  readonly done: Promise<DaemonExit>;
}

export function runDaemon(opts: DaemonOptions): DaemonHandle {
  const timings = { ...DEFAULT_TIMINGS, ...opts.timings };
  const log = opts.logger;
  const abort = new AbortController();
  let stopping = false;
  let wake: (() => void) | null = null;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = null;
        resolve();
      }
      wake = done;
    });

  const loop = async (): Promise<DaemonExit> => {
    const url = runnerSocketUrl(opts.baseUrl, {
      name: opts.name,
      hostname: opts.hostname ?? osHostname(),
      os: goos(),
      arch: goarch(),
      version: opts.version,
      root: opts.root,
      capabilities: (opts.backend.capabilities?.() ?? DEFAULT_RUNNER_CAPABILITIES).join(','),
      ...(opts.backendKind ? { backend: opts.backendKind } : {}),
    });
    if (url === null)
      return { kind: 'gave_up', message: `base URL must be http:// or https://, got ${JSON.stringify(opts.baseUrl)}` };
    let attempt = 0;
    while (!stopping) {
      const outcome = await connectOnce({
        url,
        apiKey: opts.apiKey,
        backend: opts.backend,
        logger: log,
        timings,
        signal: abort.signal,
        ...(opts.onLink ? { onLink: opts.onLink } : {}),
      });
      if (outcome.kind === 'stopped' || stopping) break;
      if (outcome.kind === 'give_up') return { kind: 'gave_up', message: outcome.message };
      // A connection the server took and answered starts a new streak, so each network cut or server
      // crash costs one base delay; one dropped before its first exchange counts, and backs off.
      attempt = outcome.kind === 'clean' ? 0 : outcome.established ? 1 : attempt + 1;
      const delayMs = backoffDelay(attempt, timings);
      log.info({ reason: outcome.reason, attempt, delayMs }, 'runner: disconnected; reconnecting');
      await pause(delayMs);
    }
    return { kind: 'stopped' };
  };

  const done = loop().then(async (exit) => {
    if (exit.kind === 'gave_up') {
      log.error({ reason: exit.message }, 'runner: giving up');
      // The daemon's processes belong to it: a daemon that gives up leaves none behind.
      await opts.backend.stopAll();
    }
    return exit;
  });

  let stopped: Promise<DaemonExit> | null = null;
  const stop = (): Promise<DaemonExit> => {
    stopped ??= (async () => {
      stopping = true;
      wake?.();
      // Sessions end while the socket is still up, so their exit frames reach Fountain.
      await opts.backend.stopAll();
      abort.abort();
      return done;
    })();
    return stopped;
  };

  return { stop, done };
}
