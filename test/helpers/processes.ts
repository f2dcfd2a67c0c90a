/**
 * The processes of one conversation's agent, found from the host by the conversation id in their
 * environment: where they work and what HOME they were given, as the kernel reports it.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

export interface AgentProc {
  readonly pid: number;
  readonly argv: string;
  /** The working directory as the process's own mount namespace names it. */
  readonly cwd: string;
  readonly home: string;
  readonly tmpdir: string;
}

/** The processes whose environment names the conversation (the agent and what it started): cwd and HOME from /proc. */
export function agentProcessesOf(conversationId: string): AgentProc[] {
  const out: AgentProc[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, 'utf8').split('\0');
      if (!env.includes(`FOUNTAIN_CONVERSATION_ID=${conversationId}`)) continue;
      out.push({
        pid: Number(name),
        argv: readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 200),
        cwd: readlinkSync(`/proc/${name}/cwd`),
        home: env.find((e) => e.startsWith('HOME='))?.slice(5) ?? '',
        tmpdir: env.find((e) => e.startsWith('TMPDIR='))?.slice(7) ?? '',
      });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
