/**
 * `fountain runners [list]|delete`: the account's runners as the Runners page shows them (status,
 * backend, capabilities, version, last seen), and deleting one (its daemon may register again).
 */
import type { Command } from 'commander';
import { z } from 'zod';
import { data } from './schemas.ts';
import { CliError, action, apiFor, printJson, printTable } from './session.ts';

const runnerSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    hostname: z.string().nullable(),
    version: z.string().nullable(),
    // Optional: a server from before backends were reported answers without them.
    backend: z.string().nullable().optional(),
    capabilities: z.array(z.string()).optional(),
    online: z.boolean(),
    last_seen_at: z.string().nullable(),
  })
  .loose();
type Runner = z.infer<typeof runnerSchema>;

const mintedSchema = z.object({
  token: z.string(),
  expires_at: z.string(),
  server_url: z.string(),
  command: z.string(),
  loopback_only: z.boolean(),
});

/** "now" while online, else how long ago it was last seen, in the largest whole unit. */
export function lastSeen(r: Pick<Runner, 'online' | 'last_seen_at'>, now = Date.now()): string {
  if (r.online) return 'now';
  if (!r.last_seen_at) return 'never';
  const s = Math.max(0, Math.round((now - Date.parse(r.last_seen_at)) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

export function register(program: Command): void {
  const runners = program
    .command('runners')
    .description('list, add and delete your runners (`fountain runners add` prints the command for a new machine)');

  runners
    .command('list', { isDefault: true })
    .description('list your runners, most recently connected first (the default)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const { data: list } = await apiFor(cmd).request('GET', '/api/runners', data(z.array(runnerSchema)));
        if (opts.json) return printJson(list);
        if (list.length === 0) {
          process.stdout.write(
            'no runners yet: `fountain runners add` prints the command that makes a machine a runner\n',
          );
          return;
        }
        printTable(
          ['NAME', 'STATUS', 'BACKEND', 'CAPABILITIES', 'VERSION', 'HOSTNAME', 'LAST SEEN', 'ID'],
          list.map((r) => [
            r.name,
            r.online ? 'online' : 'offline',
            r.backend ?? 'not reported',
            (r.capabilities ?? []).join(','),
            r.version ?? '',
            r.hostname ?? '',
            lastSeen(r),
            r.id,
          ]),
        );
      }),
    );

  runners
    .command('add')
    .description('print the one command that makes another machine a runner (it carries a single-use token)')
    .option('--json', 'print JSON')
    .action(
      action(async (opts: { json?: boolean }, cmd: Command) => {
        const { data: minted } = await apiFor(cmd).request('POST', '/api/runners/registrations', data(mintedSchema));
        if (opts.json) return printJson(minted);
        process.stdout.write(
          `Run this on the machine that should run your agents (it needs Node.js 20 or newer; the token works once, until ${minted.expires_at}):\n\n  ${minted.command}\n\n`,
        );
        if (minted.loopback_only)
          process.stdout.write(
            `Note: ${minted.server_url} is a loopback address, so other machines cannot reach it: this command works on this machine only. Set PUBLIC_URL on the server to an address other machines reach.\n`,
          );
        process.stdout.write(
          'Add --name <name> to name it, --service to keep it running as a systemd service (docs: /docs/runners).\n',
        );
      }),
    );

  runners
    .command('delete <runner>')
    .description('delete a runner by name or id; a connected daemon is disconnected and may register again')
    .action(
      action(async (ref: string, _opts: unknown, cmd: Command) => {
        const api = apiFor(cmd);
        const { data: list } = await api.request('GET', '/api/runners', data(z.array(runnerSchema)));
        const found = list.find((r) => r.id === ref || r.name === ref);
        if (!found) throw new CliError(`no runner "${ref}" (see \`fountain runners\`)`);
        await api.request('DELETE', `/api/runners/${found.id}`, z.unknown());
        process.stdout.write(`deleted runner ${found.name}\n`);
      }),
    );
}
