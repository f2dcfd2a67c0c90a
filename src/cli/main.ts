/**
 * The `fountain` command: one executable whose subcommands each live in their own module.
 * This folder is the only place that wires the other parts of src/ together.
 */
import { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { modulesFor } from './commands.ts';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

export const FOUNTAIN_VERSION = pkg.version;

const program = new Command('fountain')
  .description('Run AI coding-agent conversations in sandboxes.')
  .version(pkg.version)
  .option('--profile <name>', 'credentials profile (default: FOUNTAIN_PROFILE, then "default")')
  .showHelpAfterError();

const modules = modulesFor(process.argv.slice(2));
// Only a command line naming one module preloads (help and unknown words load them all).
if (modules.length === 1) modules[0]!.preload?.();
for (const m of modules) (await m.load()).register(program);

await program.parseAsync(process.argv);
