/**
 * How to start the demo runtime: the `fountain demo-agent` subcommand, or this installation's copy of it.
 * A sandbox with `fountain` on its PATH runs the subcommand; a process-backend sandbox on this machine runs localDemoAgentArgv().
 */
import { fileURLToPath } from 'node:url';

export const DEMO_AGENT_SUBCOMMAND = 'demo-agent';

/** argv that runs the demo agent from this installation (same Node, same bin/fountain.js). */
export function localDemoAgentArgv(): string[] {
  return [process.execPath, fileURLToPath(new URL('../../../bin/fountain.js', import.meta.url)), DEMO_AGENT_SUBCOMMAND];
}

/** A word inside double quotes in sh: `\`, `"`, `$` and a backquote escaped. */
const dq = (s: string) => s.replace(/[\\"$`]/g, (c) => `\\${c}`);

/**
 * How the engine starts the demo agent: through the runner's own install where the sandbox's runner says
 * where that is (FOUNTAIN_RUNNER_NODE / FOUNTAIN_RUNNER_SCRIPT, set by `fountain runner`), else this
 * server's own node and bin/fountain.js (a sandbox on this machine, a microVM guest, the tests' runners).
 */
export function demoAgentArgv(): string[] {
  const [node, script, sub] = localDemoAgentArgv() as [string, string, string];
  return [
    'sh',
    '-c',
    `exec "\${FOUNTAIN_RUNNER_NODE:-${dq(node)}}" "\${FOUNTAIN_RUNNER_SCRIPT:-${dq(script)}}" ${sub}`,
  ];
}
