/**
 * The stack the browser tests drive: the whole server in this process (startServer: PGlite store,
 * runner hub, engine, API and web UI on 127.0.0.1:0) and a real `fountain runner` child with the demo agent.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunnerHost } from '../../src/providers/runner/host.ts';
import { SpritesAdapter } from '../../src/providers/sprites/index.ts';
import type { EngineDb } from '../../src/server/store/engine-db.ts';
import { findOwner } from '../../src/server/store/accounts.ts';
import { startServer } from '../../src/server/start.ts';

const FOUNTAIN_BIN = fileURLToPath(new URL('../../bin/fountain.js', import.meta.url));
export const RUNNER_NAME = 'mac-mini';

export interface Stack {
  readonly url: string;
  readonly apiKey: string;
  readonly accountId: string;
  readonly db: EngineDb;
  readonly host: RunnerHost;
  /** The server's environment, read live by the provider registry: setting SPRITES_TOKEN turns a second provider on. */
  readonly env: Record<string, string | undefined>;
  startRunner(): Promise<void>;
  stopRunner(): Promise<void>;
  stop(): Promise<void>;
}

export async function until<T>(check: () => T | Promise<T>, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function startStack(): Promise<Stack> {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-web-')));
  const root = join(tmp, 'sandboxes');
  const env: Record<string, string | undefined> = { SANDBOX_IDLE_TIMEOUT_MINUTES: '0' };
  const srv = await startServer({
    dataDir: join(tmp, 'server'),
    port: 0,
    env,
    // Registered but off until its token is set; it is never called (its base URL is a closed loopback port).
    adapters: [new SpritesAdapter({ baseUrl: 'http://127.0.0.1:9' } as never)],
  });
  const apiKey = srv.bootstrapKey!;
  const db = srv.database.db as unknown as EngineDb;
  const accountId = (await findOwner(srv.database.db))!.id;
  const online = () => srv.host.online(accountId).some((r) => r.name === RUNNER_NAME);

  let child: ChildProcess | null = null;
  const startRunner = async () => {
    child = spawn(process.execPath, [FOUNTAIN_BIN, 'runner', '--name', RUNNER_NAME, '--root', root, '--log-level', 'warn'], {
      env: { ...process.env, FOUNTAIN_API_KEY: apiKey, FOUNTAIN_BASE_URL: srv.url, FOUNTAIN_PROFILE: '', FOUNTAIN_HOME: tmp, FOUNTAIN_LOG_FORMAT: 'json' },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    await until(online, 'the runner to connect');
  };
  const stopRunner = async () => {
    const c = child;
    child = null;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    const t = setTimeout(() => c.kill('SIGKILL'), 8000);
    await exited;
    clearTimeout(t);
    await until(() => !online(), 'the runner to drop');
  };

  return {
    url: srv.url,
    apiKey,
    accountId,
    db,
    host: srv.host,
    env,
    startRunner,
    stopRunner,
    stop: async () => {
      await stopRunner();
      await srv.stop();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
