/**
 * The table of `fountain` subcommands and the modules that register them, and how main picks the one
 * module a command line needs, so a command runs only its own imports.
 */
import type { Command } from 'commander';
import { DEMO_AGENT_SUBCOMMAND } from '../acp/demo/launch.ts';

export interface SubcommandModule {
  /** The names and aliases the module registers; main loads the module when argv names one. */
  readonly commands: readonly string[];
  readonly load: () => Promise<{ register: (p: Command) => void }>;
  /** Work main starts before loading the module, to overlap with it. */
  readonly preload?: () => void;
}

/**
 * `server` and `up` on the embedded database: its thread starts (and loads PGlite) while the command's
 * modules load; the open itself waits for the data directory the flags name.
 */
const preloadEmbeddedDatabase = (): void => {
  if (process.env.FOUNTAIN_DATABASE_URL) return;
  void import('../server/store/pglite-thread.ts').then((m) => m.prestartPgliteThread()).catch(() => undefined);
};

// Each subcommand module exports register(program); add new ones here.
export const SUBCOMMANDS: readonly SubcommandModule[] = [
  { commands: ['auth'], load: () => import('./auth.ts') },
  { commands: ['server'], load: () => import('./server.ts'), preload: preloadEmbeddedDatabase },
  { commands: ['agents', 'agent'], load: () => import('./agents.ts') },
  { commands: ['environments', 'env'], load: () => import('./environments.ts') },
  { commands: ['credentials'], load: () => import('./model-credentials.ts') },
  { commands: ['usage'], load: () => import('./usage.ts') },
  { commands: ['chat'], load: () => import('./chat.ts') },
  { commands: ['conversations', 'conv'], load: () => import('./conversations.ts') },
  { commands: ['runner'], load: () => import('./runner.ts') },
  { commands: ['runners'], load: () => import('./runners.ts') },
  { commands: ['webhooks'], load: () => import('./webhooks.ts') },
  { commands: ['up'], load: () => import('./up.ts'), preload: preloadEmbeddedDatabase },
  { commands: [DEMO_AGENT_SUBCOMMAND], load: () => import('./demo-agent.ts') },
  { commands: ['runner-guest'], load: () => import('./runner-guest.ts') },
];

/** Global options that take a value, so the word after them is not a command name. */
const VALUE_OPTIONS = new Set(['--profile']);

/**
 * The modules argv needs: the one whose command it names, none for the version, or all of them
 * (help, an unknown word).
 * Loading every module runs every import's load-time work (the web UI, the ACP SDK's schemas): it
 * slows each start and breaks one-file bundles such as the microVM guest's `fountain runner-guest`.
 */
export function modulesFor(args: readonly string[]): readonly SubcommandModule[] {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (VALUE_OPTIONS.has(a)) i++;
    else if (a === '-V' || a === '--version') return [];
    else if (a === '--') return SUBCOMMANDS;
    else if (!a.startsWith('-')) {
      const m = SUBCOMMANDS.find((s) => s.commands.includes(a));
      return m ? [m] : SUBCOMMANDS;
    }
  }
  return SUBCOMMANDS;
}
