/**
 * `fountain environments list|show|create|delete|secrets`: manage agent environments through the
 * public API. Secret values are read from stdin, never from argv, so no process listing shows them.
 */
import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { FountainApi } from './api.ts';
import { data, environmentSchema, type Environment } from './schemas.ts';
import { CliError, action, apiFor, printJson, printTable } from './session.ts';

export async function findEnvironment(api: FountainApi, ref: string): Promise<Environment> {
  const { data: list } = await api.request('GET', '/api/environments', data(z.array(environmentSchema)));
  const found = list.find((e) => e.id === ref || e.name === ref);
  if (!found) throw new CliError(`no environment "${ref}" (see \`fountain environments list\`)`);
  return found;
}

const repeat = (v: string, prev: string[] = []): string[] => [...prev, v];
const pair =
  (flag: string) =>
  (v: string, prev: Record<string, string> = {}): Record<string, string> => {
    const i = v.indexOf('=');
    if (i <= 0) throw new CliError(`${flag} takes NAME=value, not "${v}"`, 2);
    return { ...prev, [v.slice(0, i)]: v.slice(i + 1) };
  };

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

interface CreateOpts {
  name: string;
  var?: Record<string, string>;
  apt?: string[];
  npm?: string[];
  repo?: string[];
  setup?: string;
  setupFile?: string;
  limited?: string;
  json?: boolean;
}

export function register(program: Command): void {
  const envs = program
    .command('environments')
    .alias('env')
    .description('manage agent environments (variables, secrets, packages, repositories, setup, network)');

  envs
    .command('list')
    .description('list your environments')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const { data: list } = await apiFor(cmd).request('GET', '/api/environments', data(z.array(environmentSchema)));
        if (opts.json) return printJson(list);
        printTable(
          ['ID', 'NAME', 'NETWORK', 'VARIABLES', 'SECRETS', 'REPOSITORIES'],
          list.map((e) => [
            e.id,
            e.name,
            e.networking_type ?? '',
            String(Object.keys(e.env_vars ?? {}).length),
            String(e.secret_keys?.length ?? 0),
            String(e.repositories?.length ?? 0),
          ]),
        );
      }),
    );

  envs
    .command('show <environment>')
    .description('show one environment by id or name (secret names only)')
    .option('--json', 'print JSON')
    .action(
      action(async (ref: string, opts: { json?: boolean }, cmd: Command) => {
        const api = apiFor(cmd);
        const e = await findEnvironment(api, ref);
        const { data: full } = await api.request('GET', `/api/environments/${e.id}`, data(environmentSchema));
        if (opts.json) return printJson(full);
        const lines = [
          `${full.name} (${full.id})`,
          `network: ${full.networking_type ?? 'unrestricted'}${full.networking_config?.allowed_hosts.length ? ` (${full.networking_config.allowed_hosts.join(', ')})` : ''}`,
          `variables: ${Object.keys(full.env_vars ?? {}).join(', ') || 'none'}`,
          `secrets: ${full.secret_keys?.join(', ') || 'none'}`,
          `packages: apt ${full.packages?.apt.join(' ') || '-'}; npm ${full.packages?.npm.join(' ') || '-'}`,
          ...(full.repositories ?? []).map((r) => `repository: ${r.url} -> ${r.mount_path ?? ''}`),
        ];
        process.stdout.write(`${lines.join('\n')}\n`);
      }),
    );

  envs
    .command('branches <environment>')
    .description("list the branches of the environment's repository (the server asks the remote with its token)")
    .option('--repository <url>', "which of the environment's repositories (default: its first)")
    .option('--json', 'print JSON')
    .action(
      action(async (ref: string, opts: { repository?: string; json?: boolean }, cmd: Command) => {
        const api = apiFor(cmd);
        const e = await findEnvironment(api, ref);
        const q = opts.repository ? `?repository=${encodeURIComponent(opts.repository)}` : '';
        const { data: b } = await api.request(
          'GET',
          `/api/environments/${e.id}/branches${q}`,
          data(
            z.object({ repository: z.string(), default_branch: z.string().nullable(), branches: z.array(z.string()) }),
          ),
        );
        if (opts.json) return printJson(b);
        process.stdout.write(
          `${b.repository}\n${b.branches.map((n) => `  ${n}${n === b.default_branch ? ' (default)' : ''}`).join('\n')}\n`,
        );
      }),
    );

  envs
    .command('create')
    .description('create an environment (set secrets afterwards with `environments secrets set`)')
    .requiredOption('--name <name>', 'unique name')
    .option('--var <NAME=value>', 'environment variable, repeatable', pair('--var'))
    .option('--apt <package>', 'apt package, repeatable', repeat)
    .option('--npm <package>', 'npm package, repeatable', repeat)
    .option('--repo <url>', 'https repository cloned into /home/sprite/<name>, repeatable', repeat)
    .option('--setup <script>', 'setup script run after the clone (120 s)')
    .option('--setup-file <path>', 'read the setup script from a file')
    .option('--limited <hosts>', 'limit egress to these comma-separated hosts (needs a backend with network_policy)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: CreateOpts, cmd: Command) => {
        const body: Record<string, unknown> = { name: opts.name };
        if (opts.var) body.env_vars = opts.var;
        if (opts.apt || opts.npm) body.packages = { apt: opts.apt ?? [], npm: opts.npm ?? [] };
        if (opts.repo) body.repositories = opts.repo.map((url) => ({ url }));
        if (opts.setup !== undefined && opts.setupFile !== undefined)
          throw new CliError('give --setup or --setup-file, not both', 2);
        if (opts.setup !== undefined) body.setup_script = opts.setup;
        if (opts.setupFile !== undefined) body.setup_script = readFileSync(opts.setupFile, 'utf8');
        if (opts.limited !== undefined) {
          body.networking_type = 'limited';
          body.networking_config = {
            allowed_hosts: opts.limited
              .split(',')
              .map((h) => h.trim())
              .filter(Boolean),
          };
        }
        const { data: e } = await apiFor(cmd).request('POST', '/api/environments', data(environmentSchema), body);
        if (opts.json) return printJson(e);
        process.stdout.write(`created environment ${e.name} (${e.id})\n`);
      }),
    );

  envs
    .command('delete <environment>')
    .description('delete an environment by id or name')
    .action(
      action(async (ref: string, _opts: unknown, cmd: Command) => {
        const api = apiFor(cmd);
        const e = await findEnvironment(api, ref);
        await api.request('DELETE', `/api/environments/${e.id}`, z.undefined());
        process.stdout.write(`deleted environment ${e.name}\n`);
      }),
    );

  const secrets = envs.command('secrets').description("an environment's write-only secrets");
  secrets
    .command('list <environment>')
    .description('list secret names (values are never shown)')
    .action(
      action(async (ref: string, _opts: unknown, cmd: Command) => {
        const api = apiFor(cmd);
        const e = await findEnvironment(api, ref);
        const { data: names } = await api.request(
          'GET',
          `/api/environments/${e.id}/secrets`,
          data(z.array(z.object({ key: z.string(), updated_at: z.string() }).loose())),
        );
        printTable(
          ['KEY', 'UPDATED'],
          names.map((s) => [s.key, s.updated_at]),
        );
      }),
    );
  secrets
    .command('set <environment> <key>')
    .description('set a secret; the value is read from stdin (never from the command line)')
    .action(
      action(async (ref: string, key: string, _opts: unknown, cmd: Command) => {
        const api = apiFor(cmd);
        const e = await findEnvironment(api, ref);
        if (process.stdin.isTTY) process.stderr.write(`value for ${key} (end with Ctrl-D): `);
        const value = await readStdin();
        if (value === '') throw new CliError('no value on stdin', 2);
        await api.request(
          'PUT',
          `/api/environments/${e.id}/secrets/${encodeURIComponent(key)}`,
          data(z.object({ key: z.string() })),
          { value },
        );
        process.stdout.write(`set secret ${key} on ${e.name}\n`);
      }),
    );
  secrets
    .command('delete <environment> <key>')
    .description('delete a secret')
    .action(
      action(async (ref: string, key: string, _opts: unknown, cmd: Command) => {
        const api = apiFor(cmd);
        const e = await findEnvironment(api, ref);
        await api.request('DELETE', `/api/environments/${e.id}/secrets/${encodeURIComponent(key)}`, z.undefined());
        process.stdout.write(`deleted secret ${key} from ${e.name}\n`);
      }),
    );
}
