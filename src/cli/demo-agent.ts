/**
 * `fountain demo-agent`: the built-in `demo` runtime, an ACP agent on stdin/stdout with no model and no network.
 * Hidden from help: sandboxes launch it, people rarely do.
 */
import type { Command } from 'commander';
import { homedir } from 'node:os';
import { runDemoAgent } from '../acp/demo/agent.ts';
import { DEMO_AGENT_SUBCOMMAND } from '../acp/demo/launch.ts';

export function register(program: Command): void {
  program
    .command(DEMO_AGENT_SUBCOMMAND, { hidden: true })
    .description('run the demo ACP agent on stdin/stdout (memory in $HOME/.fountain-demo)')
    .action(async () => {
      await runDemoAgent({ home: homedir(), input: process.stdin, output: process.stdout });
    });
}
