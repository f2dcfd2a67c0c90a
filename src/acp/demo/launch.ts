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
