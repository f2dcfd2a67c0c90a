/**
 * A real server and a real runner on loopback: startServer (embedded PGlite, the runner upgrade
 * route, the engine) in this process, and `fountain runner` (bin/fountain.js) as a child process.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Logger as QueryLogger } from 'drizzle-orm';
import { RunnerAdapter, acceptRunnerSocket } from '../../src/providers/runner/index.ts';
import type { RunnerHost } from '../../src/providers/runner/index.ts';
import { startServer } from '../../src/server/start.ts';
import type { RunningServer } from '../../src/server/start.ts';
import { mintRunnerName } from '../../src/sandbox/index.ts';
import type { Handle } from '../../src/sandbox/index.ts';

export const REPO = resolve(import.meta.dirname, '../..');
export const FOUNTAIN_BIN = join(REPO, 'bin/fountain.js');

export interface RigOptions {
  readonly logger: Logger;
  /** When set, the runner child writes a V8 CPU profile there when it exits. */
  readonly cpuProfDir?: string | null;
  readonly journalCapMib?: number;
  /** Server environment (e.g. FOUNTAIN_RUNNER_HEARTBEAT_MS, FOUNTAIN_DATABASE_URL). */
  readonly env?: Record<string, string>;
  /** With FOUNTAIN_DATABASE_URL in `env`: the schema the server uses. */
  readonly databaseSchema?: string;
  /** Told every statement the server's query builder sends. */
  readonly queryLogger?: QueryLogger;
  /** The base URL the runner dials, given the server's (e.g. a proxy in front of it); default the server's. */
  readonly runnerBaseUrl?: (serverUrl: string) => string;
  /** The runner's log level (default warn); with `onRunnerLog` its lines come here instead of to stderr. */
  readonly runnerLogLevel?: string;
  readonly onRunnerLog?: (line: string) => void;
}

export interface RunnerRig {
  readonly server: RunningServer;
  /** The owner's full-scope key. */
  readonly apiKey: string;
  readonly adapter: RunnerAdapter;
  readonly host: RunnerHost;
  readonly runnerId: string;
  /** The runner's sandbox root (journals live under `<root>/.fountain-journals`). */
  readonly root: string;
  readonly runnerPid: number;
  /** Statements the server's query builder has sent so far (a turn's count is a difference of two). */
  statements(): number;
  /** Creates a fresh sandbox on the runner. */
  sandbox(): Promise<Handle>;
  stop(): Promise<void>;
}

export const SETUP_SERVER =
  'startServer (Hono on node http, embedded PGlite, runner upgrade route, acceptRunnerSocket) in the bench process on 127.0.0.1; RunnerAdapter over its runner host';
export const SETUP_RUNNER =
  '`fountain runner --backend process` child process (bin/fountain.js), dialing the hub over one WebSocket';

async function until<T>(check: () => T | undefined | null | false, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((r) => child.once('exit', () => r()));
}

export async function startRunnerRig(opts: RigOptions): Promise<RunnerRig> {
  const home = mkdtempSync(join(tmpdir(), 'fountain-bench-'));
  let statements = 0;
  const queryLogger: QueryLogger = {
    logQuery: (query, params) => {
      statements++;
      opts.queryLogger?.logQuery(query, params);
    },
  };
  const server = await startServer({
    dataDir: join(home, 'server'),
    port: 0,
    env: { ...opts.env },
    logger: opts.logger,
    acceptRunnerSocket,
    ...(opts.databaseSchema ? { databaseSchema: opts.databaseSchema } : {}),
    queryLogger,
  });
  const apiKey = server.bootstrapKey;
  if (!apiKey) throw new Error('the server minted no bootstrap key');
  const name = `bench-${randomUUID().slice(0, 8)}`;
  const root = join(home, 'sandboxes');
  const nodeFlags = opts.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', opts.cpuProfDir] : [];
  const child = spawn(
    process.execPath,
    [
      ...nodeFlags,
      FOUNTAIN_BIN,
      'runner',
      '--name',
      name,
      '--root',
      root,
      '--log-level',
      opts.runnerLogLevel ?? 'warn',
      '--journal-cap-mib',
      String(opts.journalCapMib ?? 512),
    ],
    {
      env: {
        ...process.env,
        HOME: home,
        FOUNTAIN_API_KEY: apiKey,
        FOUNTAIN_BASE_URL: opts.runnerBaseUrl?.(server.url) ?? server.url,
        FOUNTAIN_PROFILE: '',
      },
      stdio: ['ignore', 'ignore', opts.onRunnerLog ? 'pipe' : 'inherit'],
    },
  );
  if (opts.onRunnerLog) {
    const onLine = opts.onRunnerLog;
    let partial = '';
    child.stderr!.on('data', (d: Buffer) => {
      const lines = (partial + d.toString()).split('\n');
      partial = lines.pop()!;
      for (const l of lines) onLine(l);
    });
  }
  const cleanup = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited(child);
      clearTimeout(t);
    }
    await server.stop();
    rmSync(home, { recursive: true, force: true });
  };
  let runnerId: string;
  try {
    const info = await until(
      () =>
        server.host.online().find((r) => r.name === name) ??
        (child.exitCode !== null
          ? (() => {
              throw new Error(`runner exited with ${child.exitCode}`);
            })()
          : null),
      'the runner to connect',
    );
    runnerId = info.runnerId;
  } catch (e) {
    await cleanup();
    throw e;
  }
  const adapter = new RunnerAdapter(server.host, { logger: opts.logger });
  return {
    server,
    apiKey,
    adapter,
    host: server.host,
    runnerId,
    root,
    runnerPid: child.pid!,
    statements: () => statements,
    async sandbox() {
      const minted = mintRunnerName(runnerId);
      if (!minted.ok) throw new Error(minted.error);
      const r = await adapter.lifecycle.create(minted.value);
      if (!r.ok) throw new Error(`create failed: ${r.error.code} ${r.error.detail ?? ''}`);
      return r.value;
    },
    stop: cleanup,
  };
}
