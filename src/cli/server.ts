/**
 * `fountain server`: the API and the runner hub on one port, on embedded PGlite under the data
 * directory (or FOUNTAIN_DATABASE_URL). Prints the owner's key on first start; stops on SIGINT/SIGTERM.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import { ConfigError } from '../server/config-error.ts';
import { startServerWithEarlyDatabase } from '../server/database.ts';
import { DataDirInUseError } from '../server/store/db.ts';
import { fountainHome } from './credentials.ts';
import { LOG_LEVELS, createLogger } from './log.ts';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const defaultDataDir = (): string => join(fountainHome(), 'server');

const flagsSchema = z.object({
  host: z.string().trim().min(1, '--host must not be empty'),
  port: z.coerce
    .number({ message: '--port must be a number' })
    .int('--port must be a whole number')
    .min(0, '--port must be 0-65535')
    .max(65535, '--port must be 0-65535'),
  dataDir: z.string().trim().min(1, '--data-dir must not be empty').optional(),
  logLevel: z.enum(LOG_LEVELS, { message: `--log-level must be one of ${LOG_LEVELS.join(', ')}` }),
});

function fail(message: string, code = 1): never {
  process.stderr.write(`fountain server: ${message}\n`);
  process.exit(code);
}

const expandHome = (p: string): string => (p === '~' || p.startsWith('~/') ? join(homedir(), p.slice(1)) : p);

export function register(program: Command): void {
  program
    .command('server')
    .description('Run the Fountain server (API and runner hub) in the foreground; Ctrl-C stops it')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0 picks a free one)', '4000')
    .option('--data-dir <dir>', 'database files and the bootstrap key (default: ~/.fountain/server)')
    .option('--log-level <level>', `log level: ${LOG_LEVELS.join(', ')}`, 'info')
    .action(async (_opts: unknown, cmd: Command) => {
      const parsed = flagsSchema.safeParse(cmd.opts());
      if (!parsed.success) fail(parsed.error.issues[0]?.message ?? 'invalid flags', 2);
      const flags = parsed.data;
      const dataDir = resolve(expandHome(flags.dataDir ?? defaultDataDir()));
      const logger = createLogger(flags.logLevel, 'fountain-server');

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
        if (e instanceof DataDirInUseError) fail(e.message);
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EADDRINUSE') fail(`${flags.host}:${flags.port} is already in use`);
        if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') fail(`cannot listen on ${flags.host}`);
        logger.error({ err: e }, 'server failed to start');
        logger.flush();
        fail(e instanceof Error ? e.message : String(e));
      }

      if (server.bootstrapCreated && server.bootstrapKey) {
        process.stdout.write(
          `Owner API key (shown once; also saved to ${server.bootstrapKeyFile}):\n  ${server.bootstrapKey}\n` +
            `Log in with: fountain auth login --base-url ${server.url} --key <that key>\n`,
        );
      }
      logger.info(
        { url: server.url, dataDir, database: server.database.kind, runnersEnabled: server.config.runnersEnabled },
        'server started',
      );
      // The one line scripts and tests parse for the real port.
      process.stdout.write(`fountain server listening on ${server.url}\n`);

      let stopping = false;
      const onSignal = (signal: NodeJS.Signals) => {
        if (stopping) process.exit(130);
        stopping = true;
        logger.info({ signal }, 'server stopping');
        server.stop().then(
          () => {
            logger.info('server stopped');
            logger.flush();
            process.exit(0);
          },
          (err: unknown) => {
            logger.error({ err }, 'server stop failed');
            logger.flush();
            process.exit(1);
          },
        );
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    });
}
