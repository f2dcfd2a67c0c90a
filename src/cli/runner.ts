/**
 * `fountain runner`: serve sandboxes on this machine to Fountain over one outbound WebSocket.
 * Wires credentials, flags, the logger and a backend into the daemon and owns the process's signals.
 */
import { realpathSync } from 'node:fs';
import { RUNNER_SELF_ENV } from '../runner/backends/process/env.ts';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { runtimeStoreFlag, runtimeStoreOption } from './runtime-store-flag.ts';
import { z } from 'zod';
import { openNamespaceBackend } from '../runner/backends/namespace/index.ts';
import { openProcessBackend } from '../runner/backends/process/index.ts';
import { runDaemon } from '../runner/daemon.ts';
import { defaultRoot, defaultRunnerName } from '../runner/identity.ts';
import { statusFileWriter } from '../runner/status-file.ts';
import type { Backend } from '../runner/backend.ts';
import { CredentialsError, readCredentials, resolveCredentials, saveProfile } from './credentials.ts';
import { addVmOptions, openVmFromFlags } from './runner-vm.ts';
import { LOG_LEVELS } from './log.ts';
import { LOG_FORMATS, createRunnerLogger, resolveLogFormat } from './runner-log.ts';
import { RESTART_EXIT_CODE, startUpkeep } from './runner-upkeep.ts';
import { runnerVersion } from './runner-version.ts';

const flagsSchema = z.object({
  name: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, '--name must be 1-63 of a-z 0-9 . _ - and start with a letter or digit')
    .optional(),
  root: z.string().min(1).optional(),
  backend: z.enum(['process', 'namespace', 'firecracker'], {
    message: '--backend must be "process", "namespace" or "firecracker"',
  }),
  nsSubnet: z.string().optional(),
  npmCache: z.string().min(1, '--npm-cache needs a directory').optional(),
  runtimeStore: runtimeStoreFlag,
  statusFile: z.string().min(1, '--status-file needs a path').optional(),
  logLevel: z.enum(LOG_LEVELS, { message: `--log-level must be one of ${LOG_LEVELS.join(', ')}` }),
  logFormat: z.enum(LOG_FORMATS, { message: `--log-format must be one of ${LOG_FORMATS.join(', ')}` }),
  enrollOnly: z.boolean().optional(),
  autoUpdate: z.boolean().optional(),
  updateCheckMs: z.coerce.number({ message: '--update-check-ms must be a number' }).int().min(50).max(3_600_000),
  autoUpdateMinutes: z.coerce
    .number({ message: '--auto-update-minutes must be a number' })
    .int()
    .min(1)
    .max(7 * 24 * 60),
  journalCapMib: z.coerce
    .number({ message: '--journal-cap-mib must be a number' })
    .int()
    .min(1)
    .max(1024 * 1024),
  profile: z.string().optional(),
  reconnectBaseMs: z.coerce
    .number({ message: '--reconnect-base-ms must be a number' })
    .int()
    .min(10)
    .max(60_000)
    .optional(),
  reconnectCapMs: z.coerce
    .number({ message: '--reconnect-cap-ms must be a number' })
    .int()
    .min(10)
    .max(600_000)
    .optional(),
  token: z
    .string()
    .regex(/^ftr_[0-9a-f]{48}$/, '--token must be the registration token the Runners page shows (ftr_…)')
    .optional(),
  url: z.url({ protocol: /^https?$/, message: '--url must be the http(s) address of the Fountain server' }).optional(),
});

const registered = z.object({ data: z.object({ api_key: z.string().regex(/^ftn_[0-9a-f]{64}$/) }) });
const refusal = z.object({ error: z.string(), message: z.string() }).loose();

/**
 * Trades a registration token for this runner's own key and keeps it in the credentials file as the
 * profile `runner.<name>`, which later starts of the same runner use without the token.
 */
async function exchangeToken(baseUrl: string, token: string, name: string): Promise<string> {
  let res: Response;
  try {
    res = await fetch(`${baseUrl}/api/runners/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token, name }),
    });
  } catch (e) {
    usage(`cannot reach ${baseUrl}: ${(e as Error).message}`);
  }
  const body: unknown = await res.json().catch(() => null);
  const kept = readCredentials()[runnerProfile(name)];
  if (res.status === 401 && kept?.api_key && kept.base_url?.replace(/\/+$/, '') === baseUrl) {
    // Running the same install command again (an upgrade) finds the token spent and the runner enrolled.
    process.stderr.write(`fountain runner: already enrolled as ${name}; keeping its key\n`);
    return kept.api_key;
  }
  if (res.status !== 201) {
    const why = refusal.safeParse(body);
    usage(`registration refused: ${why.success ? why.data.message : `the server answered ${res.status}`}`);
  }
  const parsed = registered.safeParse(body);
  if (!parsed.success) usage('registration: the server sent no key');
  saveProfile(runnerProfile(name), { base_url: baseUrl, api_key: parsed.data.data.api_key });
  return parsed.data.data.api_key;
}

const runnerProfile = (name: string): string => `runner.${name}`;

/** A plain message and exit code 2: the invocation is wrong, not the world. */
function usage(message: string): never {
  process.stderr.write(`fountain runner: ${message}\n`);
  process.exit(2);
}

export interface RegisterOptions {
  /** The command's name: `runner` under `fountain`, `run` (the default) under `fountain-runner`. */
  readonly command?: string;
  readonly isDefault?: boolean;
}

export function register(program: Command, ro: RegisterOptions = {}): void {
  const runner = program
    .command(ro.command ?? 'runner', { isDefault: ro.isDefault ?? false })
    .description(
      'Run sandboxes on this machine for Fountain; stays in the foreground, Ctrl-C stops it and its sessions',
    )
    .option('--name <name>', "runner name (default: this machine's hostname, sanitised)")
    .option('--root <dir>', 'sandbox directory (default: ~/.fountain/runners/<name>/sandboxes)')
    .option(
      '--backend <backend>',
      'what a sandbox is: process (a directory), namespace (bubblewrap, cgroups, egress policy; root) or firecracker (a microVM)',
      'process',
    )
    .option('--ns-subnet <cidr>', 'namespace backend: IPv4 range for the per-sandbox links (default 10.62.0.0/16)')
    .option(
      '--npm-cache <dir>',
      "the npm cache sandboxes install agents and packages through (process backend: used directly, default ~/.npm; namespace backend: each new sandbox's own cache starts from it, offline-first)",
    )
    .option(
      '--runtime-store <dir>',
      'process backend: where sandboxes share one install of each agent adapter version (default ~/.fountain/runtimes)',
    )
    .option('--no-runtime-store', 'process backend: install the agent adapter into each sandbox instead')
    .option(
      '--status-file <path>',
      'keep the connection state in this JSON file (connected or not, last heartbeat), for health checks',
    )
    .option('--log-level <level>', `log level: ${LOG_LEVELS.join(', ')}`, 'info')
    .option(
      '--log-format <format>',
      'auto (short lines on a terminal, JSON otherwise), human or json; FOUNTAIN_LOG_FORMAT=json also picks JSON',
      'auto',
    )
    .option(
      '--enroll-only',
      "trade --token for this runner's key, print the runner's name and exit (the installer uses it)",
    )
    .option(
      '--auto-update',
      "installed runners: install the server's runner version when it changes (checked at each connection and hourly) and restart into it once no session runs",
    )
    .option('--journal-cap-mib <n>', 'output bytes kept on disk per session, in MiB; older output is dropped', '256')
    .option(
      '--token <token>',
      'registration token from "Add runner" on the Runners page: exchanged once for this runner\'s own key',
    )
    .option('--url <url>', "the Fountain server (with --token; default: the profile's base_url)")
    // Tests shorten the reconnect backoff (1 s doubling to 30 s) so a cut connection returns quickly.
    .addOption(new Option('--reconnect-base-ms <ms>', 'first reconnect delay').hideHelp())
    .addOption(new Option('--reconnect-cap-ms <ms>', 'longest reconnect delay').hideHelp())
    .addOption(
      new Option('--update-check-ms <ms>', 'how often an installed update is looked for').default('2000').hideHelp(),
    )
    .addOption(
      new Option('--auto-update-minutes <n>', 'how often --auto-update asks the server').default('60').hideHelp(),
    );
  addVmOptions(runner).action(async (_opts: unknown, cmd: Command) => {
    // How this daemon runs itself (its node and its script: bin/fountain.js, or the installed bundle), so a
    // sandbox starts the built-in demo agent from this machine's install, not from the server's paths.
    if (process.argv[1])
      process.env[RUNNER_SELF_ENV] = JSON.stringify([process.execPath, realpathSync(process.argv[1])]);
    const parsed = flagsSchema.safeParse(cmd.optsWithGlobals());
    if (!parsed.success) usage(parsed.error.issues[0]?.message ?? 'invalid flags');
    const flags = parsed.data;
    if (typeof flags.runtimeStore === 'string' && flags.backend !== 'process')
      usage(`--runtime-store applies to the process backend; the ${flags.backend} backend installs into each sandbox`);

    const name = flags.name ?? defaultRunnerName(hostname());
    let creds;
    try {
      // A runner added with a token keeps its own key in the profile runner.<name>; --profile or the environment override it.
      const own =
        !flags.profile && !process.env.FOUNTAIN_API_KEY?.trim() && readCredentials()[runnerProfile(name)]?.api_key;
      creds = resolveCredentials({ profile: flags.profile ?? (own ? runnerProfile(name) : undefined) });
    } catch (e) {
      usage(e instanceof CredentialsError ? e.message : String(e));
    }
    if (flags.token) {
      const baseUrl = (flags.url ?? creds.baseUrl).replace(/\/+$/, '');
      creds = { ...creds, baseUrl, apiKey: await exchangeToken(baseUrl, flags.token, name) };
    }
    if (flags.enrollOnly) {
      if (!flags.token) usage('--enroll-only needs --token');
      process.stdout.write(`${name}\n`);
      process.exit(0);
    }
    if (!creds.apiKey) {
      usage(
        `no API key for profile "${creds.profile}": add the runner on the Runners page (it gives a one-line command), run \`fountain auth login\`, or set FOUNTAIN_API_KEY`,
      );
    }

    const root = flags.root ? resolve(flags.root) : defaultRoot(name);
    const logger = createRunnerLogger(flags.logLevel, resolveLogFormat(flags.logFormat));
    const common = { root, logger, journalCapBytes: flags.journalCapMib * 1024 * 1024 };
    const npmCache = flags.npmCache ? resolve(flags.npmCache) : undefined;
    const opened: { ok: true; value: Backend } | { ok: false; error: string } =
      flags.backend === 'firecracker'
        ? await openVmFromFlags(cmd.opts(), root, logger)
        : flags.backend === 'namespace'
          ? openNamespaceBackend({ ...common, subnet: flags.nsSubnet, npmCache, serverUrl: creds.baseUrl })
          : openProcessBackend({ ...common, npmCache, runtimeStore: runtimeStoreOption(flags.runtimeStore) });
    if (!opened.ok) {
      process.stderr.write(`fountain runner: ${opened.error}\n`);
      process.exit(1);
    }
    // `name` is pino's own key (the logger's name); a second one would repeat it in every JSON line.
    logger.info({ runner: name, root, backend: flags.backend, baseUrl: creds.baseUrl }, 'runner: starting');

    let restartInto = null as string | null;
    const upkeep = startUpkeep({
      backend: opened.value,
      logger,
      baseUrl: creds.baseUrl,
      autoUpdate: flags.autoUpdate ?? false,
      checkMs: flags.updateCheckMs,
      autoUpdateMs: flags.autoUpdateMinutes * 60_000,
      restart: (into) => {
        restartInto = into;
        void daemon.stop();
      },
    });
    const daemon = runDaemon({
      name,
      root,
      backend: opened.value,
      backendKind: flags.backend === 'firecracker' ? 'microvm' : flags.backend,
      baseUrl: creds.baseUrl,
      apiKey: creds.apiKey,
      logger,
      version: runnerVersion(),
      onConnected: upkeep.connected,
      ...(flags.statusFile ? { onLink: statusFileWriter(resolve(flags.statusFile), logger) } : {}),
      timings: {
        ...(flags.reconnectBaseMs === undefined ? {} : { baseMs: flags.reconnectBaseMs }),
        ...(flags.reconnectCapMs === undefined ? {} : { capMs: flags.reconnectCapMs }),
      },
    });
    let signalled = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (signalled) {
        // A second Ctrl-C does not wait for the grace period.
        process.exit(130);
      }
      signalled = true;
      logger.info({ signal }, 'runner: stopping sessions');
      void daemon.stop();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);

    const exit = await daemon.done;
    await daemon.stop();
    upkeep.stop();
    logger.flush();
    if (exit.kind === 'gave_up') {
      process.stderr.write(`fountain runner: ${exit.message}\n`);
      process.exit(1);
    }
    if (restartInto !== null) {
      logger.info({ version: restartInto }, `runner: restarting into ${restartInto}`);
      logger.flush();
      // The launcher starts `current` again on this code; under systemd, Restart=always does.
      process.exit(RESTART_EXIT_CODE);
    }
    logger.info('runner: stopped');
    logger.flush();
    process.exit(0);
  });
}
