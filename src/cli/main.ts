/**
 * The `fountain` command: one executable whose subcommands each live in their own module.
 * This folder is the only place that wires the other parts of src/ together.
 */
import { Command } from 'commander';
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

export const FOUNTAIN_VERSION = pkg.version;

const program = new Command('fountain')
  .description('Run AI coding-agent conversations in sandboxes.')
  .version(pkg.version)
  .option('--profile <name>', 'credentials profile (default: FOUNTAIN_PROFILE, then "default")')
  .showHelpAfterError();

// Each subcommand module exports register(program); add new ones to this list.
const modules: Array<() => Promise<{ register: (p: Command) => void }>> = [
  () => import('./auth.ts'),
  () => import('./server.ts'),
  () => import('./agents.ts'),
  () => import('./chat.ts'),
  () => import('./conversations.ts'),
  () => import('./runner.ts'),
  () => import('./demo-agent.ts'),
];
for (const load of modules) (await load()).register(program);

await program.parseAsync(process.argv);
