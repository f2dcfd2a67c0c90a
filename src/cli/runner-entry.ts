/**
 * `fountain-runner`: the runner as the server hands it out (one bundled file, Node ≥ 20 its only need):
 * `fountain-runner [flags]` serves sandboxes as `fountain runner` does; `update` installs the server's version.
 */
import { Command } from 'commander';
import { register as registerRunner } from './runner.ts';
import { registerUpdate } from './runner-update.ts';
import { register as registerDemoAgent } from './demo-agent.ts';
import { runnerVersion } from './runner-version.ts';

const program = new Command('fountain-runner')
  .description('Run sandboxes on this machine for a Fountain server (`fountain-runner --help` lists the flags).')
  .version(runnerVersion())
  .option('--profile <name>', 'credentials profile (default: runner.<name>, then FOUNTAIN_PROFILE, then "default")')
  .showHelpAfterError();
registerRunner(program, { command: 'run', isDefault: true });
registerUpdate(program);
// Sandboxes on this machine start the built-in demo agent through this install (FOUNTAIN_RUNNER_SCRIPT).
registerDemoAgent(program);
await program.parseAsync(process.argv);
