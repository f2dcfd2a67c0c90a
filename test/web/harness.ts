/**
 * The stack the browser tests drive: the whole server in this process (startServer: PGlite store,
 * runner hub, engine, API and web UI on 127.0.0.1:0), a real `fountain runner` child, and chromium.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import type { RunnerHost } from '../../src/providers/runner/host.ts';
import { SpritesAdapter } from '../../src/providers/sprites/index.ts';
import type { EngineDb } from '../../src/server/store/engine-db.ts';
import { findOwner } from '../../src/server/account/store.ts';
import { startServer } from '../../src/server/start.ts';

export const FOUNTAIN_BIN = fileURLToPath(new URL('../../bin/fountain.js', import.meta.url));
export const RUNNER_NAME = 'mac-mini';

const CHROMIUM = '/usr/bin/chromium';
/** Screenshots land here (git-ignored): CI keeps them as artifacts. */
export const ARTIFACTS = fileURLToPath(new URL('./artifacts/', import.meta.url));
/**
 * A screenshot into ARTIFACTS. Chromium's headless compositor sometimes has no frame to give under load
 * ("Unable to capture screenshot", puppeteer#5341): the capture is asked again after a frame, up to three
 * times; any other error, or a third refusal, fails the test.
 */
export async function screenshot(page: Page, file: string, fullPage = true): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      // A loaded machine (the suite beside real agents) takes longer than playwright's 30 s for a full page.
      await page.screenshot({ path: join(ARTIFACTS, file), fullPage, timeout: 90_000 });
      return;
    } catch (e) {
      if (attempt === 3 || !/Unable to capture screenshot/.test(String(e))) throw e;
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      await new Promise((r) => setTimeout(r, 250 * attempt));
    }
  }
}

/** `describe(…, { skip })`: false when chromium is there, else the reason. */
export const skipWithoutChromium: string | false = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is not installed (.ci/run installs it)`;

export interface Browser {
  readonly ctx: BrowserContext;
  readonly page: Page;
  /** Every console error and uncaught page error so far, with the page it happened on. */
  readonly consoleErrors: string[];
  /** Collects a further page's errors too. */
  watch(page: Page): void;
  close(): Promise<void>;
}

/** Headless chromium on a throwaway profile; its first page waits up to `timeoutMs` for anything. */
export async function launchChromium(timeoutMs: number): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'fountain-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const consoleErrors: string[] = [];
  const watch = (page: Page) => {
    page.setDefaultTimeout(timeoutMs);
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(`${page.url()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => consoleErrors.push(`${page.url()}: ${e.message}`));
  };
  const page = ctx.pages()[0] ?? (await ctx.newPage());
  watch(page);
  return {
    ctx,
    page,
    consoleErrors,
    watch,
    close: async () => {
      await ctx.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface Stack {
  readonly url: string;
  readonly apiKey: string;
  readonly accountId: string;
  readonly db: EngineDb;
  readonly host: RunnerHost;
  /** The server's data directory (its blobs under `blobs/`). */
  readonly dataDir: string;
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

/** `env` adds to the server's environment (PUBLIC_URL, for one). */
export async function startStack(opts: { env?: Record<string, string> } = {}): Promise<Stack> {
  const tmp = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-web-')));
  const root = join(tmp, 'sandboxes');
  const env: Record<string, string | undefined> = { SANDBOX_IDLE_TIMEOUT_MINUTES: '0', ...opts.env };
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
    child = spawn(
      process.execPath,
      [FOUNTAIN_BIN, 'runner', '--name', RUNNER_NAME, '--root', root, '--log-level', 'warn'],
      {
        env: {
          ...process.env,
          FOUNTAIN_API_KEY: apiKey,
          FOUNTAIN_BASE_URL: srv.url,
          FOUNTAIN_PROFILE: '',
          FOUNTAIN_HOME: tmp,
          FOUNTAIN_LOG_FORMAT: 'json',
        },
        stdio: ['ignore', 'ignore', 'ignore'],
      },
    );
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
    dataDir: join(tmp, 'server'),
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
