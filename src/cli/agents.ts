/**
 * `fountain agents list|create|delete`: manage agents through the public API.
 * An agent is addressed by id or by its unique name.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { z } from 'zod';
import type { FountainApi } from './api.ts';
import { agentSchema, data, savedAgentSchema } from './schemas.ts';
import type { Agent } from './schemas.ts';
import { CliError, action, apiFor, printJson, printTable } from './session.ts';
import { findEnvironment } from './environments.ts';

/** The demo runtime has exactly one model, so `--model` is optional for it. */
const DEMO_MODEL = 'fountain/demo';

export async function findAgent(api: FountainApi, ref: string): Promise<Agent> {
  const { data: agents } = await api.request('GET', '/api/agents', data(z.array(agentSchema)));
  const found = agents.find((a) => a.id === ref) ?? agents.filter((a) => a.name === ref);
  if (!Array.isArray(found)) return found;
  if (found.length === 1) return found[0]!;
  if (found.length > 1) throw new CliError(`more than one agent is named "${ref}": use its id`);
  throw new CliError(`no agent "${ref}" (see \`fountain agents list\`)`);
}

/** Runner id → name, to show a pin by name. */
async function runnerNames(api: FountainApi): Promise<Map<string, string>> {
  const { data: runners } = await api.request(
    'GET',
    '/api/runners',
    data(z.array(z.object({ id: z.string(), name: z.string() }).loose())),
  );
  return new Map(runners.map((r) => [r.id, r.name]));
}

const policyEntry = (value: string, prev: Record<string, string> = {}): Record<string, string> => {
  const m = /^([A-Za-z0-9_ .-]+)=(auto_allow|ask|auto_deny)$/.exec(value);
  if (!m) throw new CliError(`--policy takes tool=auto_allow|ask|auto_deny, not "${value}"`, 2);
  return { ...prev, [m[1]!]: m[2]! };
};

const optionEntry = (value: string, prev: Record<string, string> = {}): Record<string, string> => {
  const m = /^([^=\s]{1,100})=(\S{1,200})$/.exec(value);
  if (!m) throw new CliError(`--session-option takes id=value, not "${value}"`, 2);
  return { ...prev, [m[1]!]: m[2]! };
};

/** `--custom-runtime` is the API's custom_runtime object as JSON (command, install, env, credentials). */
const customRuntime = (value: string): unknown => {
  try {
    return JSON.parse(value);
  } catch {
    throw new CliError('--custom-runtime takes JSON, e.g. \'{"command":["my-agent","--acp"]}\'', 2);
  }
};

/** `--warm-pool` is a whole number; the server says the bounds (422 warm_pool_invalid). */
const warmPool = (value: string): number => {
  // Commander prints this as a usage error (exit 1), not a stack.
  if (!/^\d{1,6}$/.test(value.trim())) throw new InvalidArgumentError('a whole number, e.g. 1');
  return Number(value.trim());
};

/** The launch options create and update share: a custom runtime, the credential set, session settings. */
function launchBody(opts: LaunchOpts, body: Record<string, unknown>): void {
  if (opts.customRuntime !== undefined) body.custom_runtime = opts.customRuntime;
  if (opts.credentialSet !== undefined) body.credential_set = opts.credentialSet;
  if (opts.warmPool !== undefined) body.warm_pool = opts.warmPool;
  if (opts.sessionOption !== undefined || opts.sessionMode !== undefined)
    body.session_settings = {
      ...(opts.sessionOption ? { options: opts.sessionOption } : {}),
      ...(opts.sessionMode ? { mode: opts.sessionMode } : {}),
    };
}

interface LaunchOpts {
  customRuntime?: unknown;
  warmPool?: number;
  credentialSet?: string;
  sessionOption?: Record<string, string>;
  sessionMode?: string;
}

function launchOptions(c: Command): Command {
  return c
    .option(
      '--custom-runtime <json>',
      'for --runtime custom: {"command": [...], "install": {"npm": "name@version"}, "env": {...}, "credentials": [{"provider": ..., "env": ..., "base_url_env": ...}]}',
      customRuntime,
    )
    .option('--credential-set <name>', 'the credential set its model credential comes from (default: default)')
    .option(
      '--warm-pool <n>',
      'sandboxes kept ready for its next conversations (0 = none; they count toward your sandbox limit)',
      warmPool,
    )
    .option(
      '--session-option <id=value>',
      "ACP session config option, repeatable (replaces the agent's settings)",
      optionEntry,
    )
    .option('--session-mode <mode>', "ACP session mode, e.g. plan (replaces the agent's settings)");
}

/** The server saved the agent but says its conversations would be refused at launch: said on stderr, the exit stays 0. */
function warn(warnings: ReadonlyArray<{ message: string }> | undefined): void {
  for (const w of warnings ?? []) process.stderr.write(`warning: ${w.message}\n`);
}

export function register(program: Command): void {
  const agents = program.command('agents').alias('agent').description('manage agents');

  agents
    .command('list', { isDefault: true })
    .description('list your agents (the default)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const { data: list } = await apiFor(cmd).request('GET', '/api/agents', data(z.array(agentSchema)));
        if (opts.json) return printJson(list);
        const names = list.some((a) => a.runner_id) ? await runnerNames(apiFor(cmd)) : new Map<string, string>();
        printTable(
          ['ID', 'NAME', 'RUNTIME', 'MODEL', 'SANDBOX', 'RUNNER'],
          list.map((a) => [
            a.id,
            a.name,
            a.runtime,
            a.model ?? '',
            a.sandbox_provider ?? 'default',
            a.runner_id ? (names.get(a.runner_id) ?? a.runner_id) : 'any',
          ]),
        );
      }),
    );

  launchOptions(agents.command('create'))
    .description('create an agent')
    .requiredOption('--name <name>', 'unique name')
    .requiredOption('--runtime <runtime>', 'claude, codex, gemini, opencode, demo or custom (any ACP agent)')
    .option(
      '--model <model>',
      'provider/model_id, e.g. anthropic/claude-sonnet-4-5 (demo: fountain/demo, its only model)',
    )
    .option('--system <prompt>', 'system prompt', '')
    .option('--sandbox-provider <provider>', 'sandbox provider (default: the instance default)')
    .option('--environment <environment>', 'environment (id or name) its sandboxes are provisioned with')
    .option(
      '--runner <runner>',
      'pin it to this runner (name or id); default: any runner (the most recently connected one online)',
    )
    .option(
      '--policy <tool=verdict>',
      'permission policy entry, repeatable (default=ask, execute=auto_allow, ...)',
      policyEntry,
    )
    .option('--json', 'print JSON')
    .action(
      action(
        async (
          opts: {
            name: string;
            runtime: string;
            model?: string;
            system: string;
            sandboxProvider?: string;
            environment?: string;
            runner?: string;
            policy?: Record<string, string>;
            json?: boolean;
          } & LaunchOpts,
          cmd: Command,
        ) => {
          const body: Record<string, unknown> = { name: opts.name, runtime: opts.runtime, system: opts.system };
          launchBody(opts, body);
          if (opts.environment) body.environment_id = (await findEnvironment(apiFor(cmd), opts.environment)).id;
          if (opts.model) body.model = opts.model;
          else if (opts.runtime === 'demo') body.model = DEMO_MODEL;
          if (opts.sandboxProvider) body.sandbox_provider = opts.sandboxProvider;
          if (opts.runner) body.runner_id = opts.runner;
          if (opts.policy) body.permission_policy = opts.policy;
          const { data: agent } = await apiFor(cmd).request('POST', '/api/agents', data(savedAgentSchema), body);
          if (opts.json) return printJson(agent);
          process.stdout.write(`created agent ${agent.name} (${agent.id})\n`);
          warn(agent.warnings);
        },
      ),
    );

  launchOptions(agents.command('update <agent>'))
    .description('change an agent (by id or name); only the options given change')
    .option('--name <name>', 'new name')
    .option('--model <model>', 'provider/model_id')
    .option('--system <prompt>', 'system prompt')
    .option('--sandbox-provider <provider>', 'sandbox provider')
    .option('--environment <environment>', 'environment (id or name) its sandboxes are provisioned with')
    .option('--runner <runner>', 'pin it to this runner (name or id)')
    .option('--no-runner', 'unpin it: any runner (the most recently connected one online)')
    .option('--policy <tool=verdict>', 'permission policy entry, repeatable; replaces the whole policy', policyEntry)
    .option('--json', 'print JSON')
    .action(
      action(
        async (
          ref: string,
          opts: {
            name?: string;
            model?: string;
            system?: string;
            sandboxProvider?: string;
            environment?: string;
            runner?: string | boolean;
            policy?: Record<string, string>;
            json?: boolean;
          } & LaunchOpts,
          cmd: Command,
        ) => {
          const api = apiFor(cmd);
          const current = await findAgent(api, ref);
          const body: Record<string, unknown> = {};
          launchBody(opts, body);
          if (opts.name !== undefined) body.name = opts.name;
          if (opts.model !== undefined) body.model = opts.model;
          if (opts.system !== undefined) body.system = opts.system;
          if (opts.sandboxProvider !== undefined) body.sandbox_provider = opts.sandboxProvider;
          if (opts.environment !== undefined) body.environment_id = (await findEnvironment(api, opts.environment)).id;
          // Commander: --runner x gives 'x', --no-runner gives false, neither leaves the default true (no change).
          if (typeof opts.runner === 'string') body.runner_id = opts.runner;
          else if (opts.runner === false) body.runner_id = null;
          if (opts.policy) body.permission_policy = opts.policy;
          if (Object.keys(body).length === 0)
            throw new CliError('nothing to change: give at least one option (see `fountain agents update --help`)', 2);
          const { data: agent } = await api.request('PATCH', `/api/agents/${current.id}`, data(savedAgentSchema), body);
          if (opts.json) return printJson(agent);
          process.stdout.write(`updated agent ${agent.name} (${agent.id})\n`);
          warn(agent.warnings);
        },
      ),
    );

  agents
    .command('delete <agent>')
    .description('delete an agent by id or name')
    .action(
      action(async (ref: string, _opts: unknown, cmd: Command) => {
        const api = apiFor(cmd);
        const agent = await findAgent(api, ref);
        await api.request('DELETE', `/api/agents/${agent.id}`, z.undefined());
        process.stdout.write(`deleted agent ${agent.name}\n`);
      }),
    );
}
