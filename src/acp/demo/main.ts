/**
 * Entry point of the demo agent as its own process (`tsx src/acp/demo/main.ts`): ACP on stdin/stdout.
 * `fountain demo-agent` runs the same thing through the CLI.
 */
import { homedir } from 'node:os';
import { runDemoAgent } from './agent.ts';

await runDemoAgent({ home: homedir(), input: process.stdin, output: process.stdout });
