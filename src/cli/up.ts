/**
 * `fountain up`: everything on one machine in one process tree — the server on the embedded
 * database, a local runner (process backend) and a demo agent — with the URL and key printed.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { runtimeStoreFlag, runtimeStoreOption } from './runtime-store-flag.ts';
import { z } from 'zod';
import { ConfigError } from '../server/config-error.ts';
import { startServerWithEarlyDatabase } from '../server/database.ts';
import { DataDirInUseError } from '../server/store/db.ts';
import type { FountainApi } from './api.ts';
import { credentialsPath, fountainHome, readCredentials, resolveCredentials, saveProfile } from './credentials.ts';
import { LOG_LEVELS, createLogger } from './log.ts';
import { agentSchema, data } from './schemas.ts';
import { fountainCommand } from './invocation.ts';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const flagsSchema = z.object({
  host: z.string().trim().min(1, '--host must not be empty'),
  port: z.coerce
    .number({ message: '--port must be a number' })
    .int()
    .min(0, '--port must be 0-65535')
    .max(65535, '--port must be 0-65535'),
  dataDir: z.string().trim().min(1).optional(),
  runnerRoot: z.string().trim().min(1).optional(),
  npmCache: z.string().trim().min(1, '--npm-cache needs a directory').optional(),
  runtimeStore: runtimeStoreFlag,
  logLevel: z.enum(LOG_LEVELS, { message: `--log-level must be one of ${LOG_LEVELS.join(', ')}` }),
  demo: z.boolean(),
  profile: z.string().optional(),
});

function fail(message: string, code = 1): never {
  process.stderr.write(`fountain up: ${message}\n`);
  process.exit(code);
}

/** Creates the demo agent unless one named `demo` exists; returns whether it was created. */
async function ensureDemoAgent(api: FountainApi): Promise<boolean> {
  const { data: agents } = await api.request('GET', '/api/agents', data(z.array(agentSchema)));
  if (agents.some((a) => a.name === 'demo')) return false;
  await api.request('POST', '/api/agents', data(agentSchema), {
    name: 'demo',
    runtime: 'demo',
    model: 'fountain/demo',
    system: 'You are the built-in demo agent: no model, no network.',
    sandbox_provider: 'runner',
    permission_policy: { default: 'ask' },
    // One sandbox kept ready: the first conversation answers without provisioning (docs/agents.md).
    warm_pool: 1,
  });
  return true;
}

export function register(program: Command): void {
  program
    .command('up')
    .description('Run Fountain on this machine: server (embedded database), a local runner and the demo agent')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 picks a free one)', '4000')
    .option('--data-dir <dir>', 'server data directory (default: ~/.fountain/server)')
    .option(
      '--runner-root <dir>',
      'sandbox directory of the local runner (default: ~/.fountain/runners/local/sandboxes)',
    )
    .option('--npm-cache <dir>', 'the npm cache sandboxes install agents and packages through (default: ~/.npm)')
    .option(
      '--runtime-store <dir>',
      'where sandboxes share one install of each agent adapter version (default: ~/.fountain/runtimes)',
    )
    .option('--no-runtime-store', 'install the agent adapter into each sandbox instead')
    .option('--no-demo', 'do not create the demo agent')
    .option('--log-level <level>', `log level: ${LOG_LEVELS.join(', ')}`, 'warn')
    .action(async (_opts: unknown, cmd: Command) => {
      const parsed = flagsSchema.safeParse(cmd.optsWithGlobals());
      if (!parsed.success) fail(parsed.error.issues[0]?.message ?? 'invalid flags', 2);
      const flags = parsed.data;
      const dataDir = resolve(flags.dataDir ?? join(fountainHome(), 'server'));
      const runnerRoot = resolve(flags.runnerRoot ?? join(fountainHome(), 'runners', 'local', 'sandboxes'));
      const logger = createLogger(flags.logLevel, 'fountain');

      // The runner and the client load while the database opens (the server's own modules too, below).
      const parts = Promise.all([
        import('../runner/backends/process/index.ts'),
        import('../runner/daemon.ts'),
        import('../server/web/session.ts'),
        import('./api.ts'),
      ]);
      // Awaited once the server is up; a start that fails first must not leave it unhandled.
      parts.catch(() => undefined);
      let server;
      try {
        server = await startServerWithEarlyDatabase({
          dataDir,
          host: flags.host,
          port: flags.port,
          env: process.env,
          logger,
          version: pkg.version,
        });
      } catch (e) {
        if (e instanceof ConfigError) fail(e.message, 2);
        if (e instanceof DataDirInUseError) {
          fail(
            `Fountain is already running on ${dataDir} (pid ${e.pid}): use that one, or stop it with Ctrl-C in its terminal. A second one needs its own --data-dir and --runner-root.`,
          );
        }
        if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') {
          fail(`${flags.host}:${flags.port} is already in use, perhaps by another program; --port 0 picks a free port`);
        }
        fail(e instanceof Error ? e.message : String(e));
      }
      const key = server.bootstrapKey;
      if (!key) {
        await server.stop();
        fail(
          `the owner key is not in ${server.bootstrapKeyFile}; start with a fresh --data-dir or set FOUNTAIN_BOOTSTRAP_KEY`,
        );
      }

      const [{ openProcessBackend }, { runDaemon }, { mintSignInLink }, { FountainApi }] = await parts;
      const backend = openProcessBackend({
        root: runnerRoot,
        logger: logger.child({ part: 'runner' }),
        journalCapBytes: 256 * 1024 * 1024,
        npmCache: flags.npmCache ? resolve(flags.npmCache) : undefined,
        runtimeStore: runtimeStoreOption(flags.runtimeStore),
      });
      if (!backend.ok) {
        await server.stop();
        fail(backend.error);
      }
      const daemon = runDaemon({
        name: 'local',
        root: runnerRoot,
        backend: backend.value,
        backendKind: 'process',
        baseUrl: server.url,
        apiKey: key,
        logger: logger.child({ part: 'runner' }),
        version: pkg.version,
        hostname: hostname(),
      });

      // Its own server's API, answered in this process: no loopback connection to make first (start-up).
      const app = server.app;
      const api = new FountainApi({ baseUrl: server.url, apiKey: key, fetch: async (request) => app.fetch(request) });
      // The demo agent's check and the sign-in link are independent requests: made at once (start-up).
      const demo = flags.demo
        ? ensureDemoAgent(api).catch((e: unknown) => {
            logger.error({ err: e }, 'could not create the demo agent');
            return false;
          })
        : Promise.resolve(false);
      const link = (async () => {
        const me = await api.request('GET', '/api/auth/me', data(z.object({ id: z.string() }).loose()));
        return await mintSignInLink(server.database.db, me.data.id, server.url);
      })().catch((e: unknown) => {
        logger.warn({ err: e }, 'could not mint a sign-in link');
        return null;
      });
      const [demoCreated, signInLink] = await Promise.all([demo, link]);

      // Save the profile so `fountain chat demo` works from another terminal, unless the user
      // already keeps a different server's key under it.
      const profile = resolveCredentials({ profile: flags.profile }).profile;
      let saved = false;
      try {
        const existing = readCredentials()[profile];
        if (!existing?.api_key || existing.base_url === server.url) {
          saveProfile(profile, { base_url: server.url, api_key: key });
          saved = true;
        }
      } catch (e) {
        logger.warn({ err: e }, 'could not save the credentials profile');
      }

      // The link goes on a line of its own so a terminal can open it with one click.
      // The full key only on the start that made it; afterwards it is where it was put then.
      const keyLine = server.bootstrapKeyCreated
        ? `  owner API key: ${key}`
        : `  owner API key: ${key.slice(0, 8)}… (in full in ${server.bootstrapKeyFile})`;
      process.stdout.write(
        [
          `Fountain is up at ${server.url}`,
          '',
          ...(signInLink
            ? ['  Open this link in a browser to sign in (it works once, within 15 minutes):', `  ${signInLink}`]
            : [`  Sign in at ${server.url}/signin with the owner API key below.`]),
          '',
          flags.demo
            ? `  demo agent: ${demoCreated ? 'created' : 'ready'} — message it on the Team page, or run: ${fountainCommand()} chat demo`
            : null,
          saved
            ? `${keyLine} (saved as profile "${profile}" in ${credentialsPath()})`
            : `${keyLine} (profile "${profile}" keeps another server; use FOUNTAIN_BASE_URL/FOUNTAIN_API_KEY)`,
          `  data: ${dataDir}${server.database.kind === 'postgres' ? ' (database: FOUNTAIN_DATABASE_URL)' : ' (embedded database)'}; sandboxes: ${runnerRoot}`,
          '',
          `Ctrl-C stops everything. Your data stays; \`${fountainCommand()} up\` again carries on and prints a new sign-in link.`,
        ]
          .filter((l) => l !== null)
          .join('\n') + '\n',
      );

      let stopping = false;
      const stop = async (code: number) => {
        if (stopping) process.exit(130);
        stopping = true;
        process.stdout.write('stopping…\n');
        await daemon.stop();
        await server.stop();
        logger.flush();
        process.exit(code);
      };
      process.on('SIGINT', () => void stop(0));
      process.on('SIGTERM', () => void stop(0));
      const exit = await daemon.done;
      if (!stopping && exit.kind === 'gave_up') {
        process.stderr.write(`fountain up: the local runner gave up: ${exit.message}\n`);
        await stop(1);
      }
    });
}
