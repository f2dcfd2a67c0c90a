/**
 * `fountain agents list|create|delete`: manage agents through the public API.
 * An agent is addressed by id or by its unique name.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import type { FountainApi } from './api.ts';
import { agentSchema, data } from './schemas.ts';
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

const policyEntry = (value: string, prev: Record<string, string> = {}): Record<string, string> => {
  const m = /^([A-Za-z0-9_ .-]+)=(auto_allow|ask|auto_deny)$/.exec(value);
  if (!m) throw new CliError(`--policy takes tool=auto_allow|ask|auto_deny, not "${value}"`, 2);
  return { ...prev, [m[1]!]: m[2]! };
};

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
        printTable(
          ['ID', 'NAME', 'RUNTIME', 'MODEL', 'SANDBOX'],
          list.map((a) => [a.id, a.name, a.runtime, a.model ?? '', a.sandbox_provider ?? 'default']),
        );
      }),
    );

  agents
    .command('create')
    .description('create an agent')
    .requiredOption('--name <name>', 'unique name')
    .requiredOption('--runtime <runtime>', 'claude, codex, gemini, opencode or demo')
    .option('--model <model>', 'provider/model_id, e.g. anthropic/claude-sonnet-4-5 (demo: fountain/demo, its only model)')
    .option('--system <prompt>', 'system prompt', '')
    .option('--sandbox-provider <provider>', 'sandbox provider (default: the instance default)')
    .option('--environment <environment>', 'environment (id or name) its sandboxes are provisioned with')
    .option('--policy <tool=verdict>', 'permission policy entry, repeatable (default=ask, execute=auto_allow, ...)', policyEntry)
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { name: string; runtime: string; model?: string; system: string; sandboxProvider?: string; environment?: string; policy?: Record<string, string>; json?: boolean }, cmd: Command) => {
        const body: Record<string, unknown> = { name: opts.name, runtime: opts.runtime, system: opts.system };
        if (opts.environment) body.environment_id = (await findEnvironment(apiFor(cmd), opts.environment)).id;
        if (opts.model) body.model = opts.model;
        else if (opts.runtime === 'demo') body.model = DEMO_MODEL;
        if (opts.sandboxProvider) body.sandbox_provider = opts.sandboxProvider;
        if (opts.policy) body.permission_policy = opts.policy;
        const { data: agent } = await apiFor(cmd).request('POST', '/api/agents', data(agentSchema), body);
        if (opts.json) return printJson(agent);
        process.stdout.write(`created agent ${agent.name} (${agent.id})\n`);
      }),
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
