/**
 * `fountain auth login`: takes an API key (--key, a hidden prompt on a terminal, or one line on
 * stdin), verifies it with GET /api/auth/me, and stores it under the chosen profile (mode 0600).
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { ApiError, FountainApi } from './api.ts';
import { CredentialsError, credentialsPath, DEFAULT_BASE_URL, readCredentials, saveProfile } from './credentials.ts';
import { promptHidden, readStdinLine } from './secret-input.ts';

const API_KEY = /^ftn_[0-9a-f]{64}$/;

const flagsSchema = z.object({
  baseUrl: z.url({ protocol: /^https?$/, message: '--base-url must be an http:// or https:// URL' }).optional(),
  key: z.string().regex(API_KEY, '--key must be ftn_ followed by 64 lowercase hex digits').optional(),
  profile: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, '--profile may hold only letters, digits, ".", "_" and "-"')
    .optional(),
});

const meSchema = z.object({
  data: z.object({ id: z.string(), name: z.string(), email: z.string().nullable(), role: z.string() }),
});

function fail(message: string, code = 1): never {
  process.stderr.write(`fountain auth login: ${message}\n`);
  process.exit(code);
}

export function register(program: Command): void {
  const auth = program.command('auth').description('Manage the API key this machine uses');
  auth
    .command('login')
    .description('Verify an API key against a Fountain server and save it to ~/.fountain/credentials')
    .option('--base-url <url>', `server URL (default: FOUNTAIN_BASE_URL, the profile's, then ${DEFAULT_BASE_URL})`)
    .option('--key <key>', 'API key (default: a hidden prompt on a terminal, else one line on stdin)')
    .action(async (_opts: unknown, cmd: Command) => {
      const parsed = flagsSchema.safeParse(cmd.optsWithGlobals());
      if (!parsed.success) fail(parsed.error.issues[0]?.message ?? 'invalid flags', 2);
      const flags = parsed.data;
      const profile = flags.profile ?? (process.env.FOUNTAIN_PROFILE?.trim() || 'default');
      let stored;
      try {
        stored = readCredentials()[profile];
      } catch (e) {
        fail(e instanceof CredentialsError ? e.message : String(e));
      }
      const envBase = process.env.FOUNTAIN_BASE_URL?.trim() || undefined;
      const baseUrl = (flags.baseUrl ?? envBase ?? stored?.base_url ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
      if (!/^https?:\/\/[^/\s]+/.test(baseUrl))
        fail(`base URL ${JSON.stringify(baseUrl)} is not an http:// or https:// URL`, 2);

      const key = (flags.key ?? (process.stdin.isTTY ? await promptHidden('API key: ') : await readStdinLine())).trim();
      if (!API_KEY.test(key)) fail('an API key is ftn_ followed by 64 lowercase hex digits', 2);

      let me;
      try {
        me = await new FountainApi({ baseUrl, apiKey: key }).request('GET', '/api/auth/me', meSchema);
      } catch (e) {
        if (e instanceof ApiError && (e.status === 401 || e.status === 403))
          fail(`${baseUrl} refused the key (${e.code}: ${e.message})`);
        fail(e instanceof Error ? e.message : String(e));
      }
      saveProfile(profile, { base_url: baseUrl, api_key: key });
      const who = me.data.email ? `${me.data.name} <${me.data.email}>` : me.data.name;
      process.stdout.write(`Logged in to ${baseUrl} as ${who}; saved profile "${profile}" to ${credentialsPath()}\n`);
    });
}
