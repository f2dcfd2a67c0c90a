/**
 * `fountain-runner update`: fetch the server's runner manifest and artifact, check them, install the
 * version beside the others and switch `current` to it; a running daemon restarts into it once idle.
 */
import { hostname } from 'node:os';
import type { Command } from 'commander';
import { z } from 'zod';
import { CredentialsError, readCredentials } from './credentials.ts';
import { defaultRunnerName } from '../runner/identity.ts';
import { UpdateError, currentVersion, fetchManifest, installArtifact, planUpdate } from './runner-install.ts';
import { runnerVersion } from './runner-version.ts';

const flagsSchema = z.object({
  name: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, '--name must be 1-63 of a-z 0-9 . _ -')
    .optional(),
  url: z.url({ protocol: /^https?$/, message: '--url must be the http(s) address of the Fountain server' }).optional(),
  force: z.boolean().optional(),
});

const fail = (message: string, code = 1): never => {
  process.stderr.write(`fountain-runner update: ${message}\n`);
  process.exit(code);
};

/** --url, else the server this runner enrolled with (its `runner.<name>` profile, or the only runner profile). */
function serverOf(name: string | undefined): string {
  let profiles;
  try {
    profiles = readCredentials();
  } catch (e) {
    return fail(e instanceof CredentialsError ? e.message : String(e), 2);
  }
  const own = profiles[`runner.${name ?? defaultRunnerName(hostname())}`]?.base_url;
  if (own) return own;
  const urls = new Set(
    Object.entries(profiles)
      .filter(([p, v]) => p.startsWith('runner.') && v.base_url)
      .map(([, v]) => v.base_url!),
  );
  if (urls.size === 1) return [...urls][0]!;
  return fail(
    urls.size === 0
      ? 'this machine has no enrolled runner; pass --url <server>'
      : 'runners of several servers are enrolled here; pass --name or --url',
    2,
  );
}

export function registerUpdate(program: Command): void {
  program
    .command('update')
    .description(
      "install the server's runner version (checked by sha256); a running fountain-runner restarts into it once no session runs",
    )
    .option('--name <name>', "which enrolled runner's server to ask (default: the hostname, or the only one)")
    .option('--url <url>', 'the Fountain server to update from')
    .option('--force', "install the server's version even when it is older than this one")
    .action(async (_opts: unknown, cmd: Command) => {
      const parsed = flagsSchema.safeParse(cmd.opts());
      if (!parsed.success) return fail(parsed.error.issues[0]?.message ?? 'invalid flags', 2);
      const flags = parsed.data;
      const baseUrl = (flags.url ?? serverOf(flags.name)).replace(/\/+$/, '');
      try {
        const manifest = await fetchManifest(baseUrl);
        const running = currentVersion() ?? runnerVersion();
        const plan = planUpdate(running, manifest.version, flags.force ?? false);
        if (plan.kind === 'same') {
          process.stdout.write(`fountain-runner ${running} is the server's version; nothing to do\n`);
          return;
        }
        if (plan.kind === 'downgrade_refused') return fail(plan.message);
        const dir = await installArtifact(manifest);
        process.stdout.write(
          `fountain-runner ${running} → ${manifest.version} (in ${dir}); a running fountain-runner restarts into it once no session runs\n`,
        );
      } catch (e) {
        return fail(e instanceof UpdateError ? e.message : String(e));
      }
    });
}
