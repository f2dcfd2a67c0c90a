/**
 * `fountain credentials set|list|rm`: the account's model credentials (the keys agents use to reach
 * their model). The value is read from a hidden prompt or stdin, never from a flag `ps` would show.
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { data } from './schemas.ts';
import { promptHidden, readStdinLine } from './secret-input.ts';
import { CliError, action, apiFor, printJson, printTable } from './session.ts';

const PROVIDERS = ['anthropic_api_key', 'claude_code_oauth_token', 'openai_api_key', 'gemini_api_key'] as const;
const providerSchema = z.enum(PROVIDERS, { error: `the credential is one of ${PROVIDERS.join(', ')}` });
const credentialSchema = z
  .object({
    provider: z.string(),
    name: z.string().default('default'),
    base_url: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .loose();
const SET_NAME = /^[a-z0-9][a-z0-9_-]{0,39}$/;

/** `?name=<set>` for a named credential set; nothing for the default one. */
function setQuery(name: string | undefined): string {
  if (name === undefined || name === 'default') return '';
  if (!SET_NAME.test(name))
    throw new CliError('--name: a credential set name is 1-40 lowercase letters, digits, _ or -', 2);
  return `?name=${name}`;
}
const baseUrlFlag = z.url({ protocol: /^https?$/, message: '--base-url must be an http:// or https:// URL' });

function provider(value: string): (typeof PROVIDERS)[number] {
  const p = providerSchema.safeParse(value);
  if (!p.success) throw new CliError(p.error.issues[0]?.message ?? 'unknown credential', 2);
  return p.data;
}

export function register(program: Command): void {
  const creds = program
    .command('credentials')
    .description("manage your account's model credentials (API keys agents use)");

  creds
    .command('set <credential>')
    .description(
      `store a model credential (${PROVIDERS.join(', ')}); the value is read from a hidden prompt or one line on stdin`,
    )
    .option('--base-url <url>', 'send the runtime to this gateway instead of the vendor API')
    .option('--name <set>', 'the credential set it belongs to (default: default); agents pick a set by name')
    .option('--no-validate', 'store it without checking it against the provider first')
    .option('--json', 'print JSON')
    .action(
      action(
        async (
          name: string,
          opts: { baseUrl?: string; name?: string; validate: boolean; json?: boolean },
          cmd: Command,
        ) => {
          const p = provider(name);
          const query = setQuery(opts.name);
          let baseUrl: string | undefined;
          if (opts.baseUrl !== undefined) {
            const b = baseUrlFlag.safeParse(opts.baseUrl);
            if (!b.success) throw new CliError(b.error.issues[0]?.message ?? 'bad --base-url', 2);
            baseUrl = b.data;
          }
          const value = (process.stdin.isTTY ? await promptHidden(`${p}: `) : await readStdinLine()).trim();
          if (value === '') throw new CliError('no value given: type it at the prompt or pipe it on stdin', 2);
          const { data: stored } = await apiFor(cmd).request(
            'PUT',
            `/api/account/inference-credentials/${p}${query}`,
            data(credentialSchema),
            {
              value,
              ...(baseUrl ? { base_url: baseUrl } : {}),
              validate: opts.validate,
            },
          );
          if (opts.json) return printJson(stored);
          const set = stored.name === 'default' ? '' : ` in set ${stored.name}`;
          process.stdout.write(
            `stored ${stored.provider}${set}${stored.base_url ? ` (base URL ${stored.base_url})` : ''}\n`,
          );
        },
      ),
    );

  creds
    .command('list')
    .description('list which model credentials are set (never their values)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const { data: list } = await apiFor(cmd).request(
          'GET',
          '/api/account/inference-credentials',
          data(z.array(credentialSchema)),
        );
        if (opts.json) return printJson(list);
        printTable(
          ['CREDENTIAL', 'SET', 'BASE URL', 'UPDATED'],
          list.map((c) => [c.provider, c.name, c.base_url ?? '(vendor API)', c.updated_at]),
        );
      }),
    );

  creds
    .command('rm <credential>')
    .alias('remove')
    .description('remove a model credential (refused while agents use its set)')
    .option('--name <set>', 'the credential set (default: default)')
    .action(
      action(async (name: string, opts: { name?: string }, cmd: Command) => {
        const p = provider(name);
        await apiFor(cmd).request(
          'DELETE',
          `/api/account/inference-credentials/${p}${setQuery(opts.name)}`,
          z.undefined(),
        );
        process.stdout.write(`removed ${p}${opts.name && opts.name !== 'default' ? ` of set ${opts.name}` : ''}\n`);
      }),
    );
}
