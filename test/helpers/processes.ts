/**
 * The processes of one conversation's agent, found from the host by the conversation id in their
 * environment: where they work and what HOME they were given, as the kernel reports it.
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';

export interface AgentProc {
  readonly pid: number;
  readonly argv: string;
  /** The working directory as the process's own mount namespace names it (or its host path, see below). */
  readonly cwd: string;
  readonly home: string;
  readonly tmpdir: string;
  /** What its environment holds that lets it act as the conversation: the sandbox token and model API keys. */
  readonly credentials: readonly string[];
}

/** The agent's variables holding a credential: Fountain's sandbox token, a vendor's key or token. */
const CREDENTIAL_VAR = /^(FOUNTAIN_TOKEN|[A-Z_]*_API_KEY|[A-Z_]*_AUTH_TOKEN|[A-Z_]*_OAUTH_TOKEN)=(.+)$/;

/** Where a namespace sandbox sees its directory. */
const INSIDE = '/home/sprite';

const sameFile = (a: string, b: string): boolean => {
  try {
    const x = statSync(a);
    const y = statSync(b);
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
};

/**
 * A path the process names inside its own mount namespace, as the host names it: `inside` under
 * /home/sprite is the same path under `sandboxDir` when the kernel shows the very same directory
 * through the process (`seen`: its /proc view of it); otherwise unchanged, so a check against the
 * sandbox directory fails.
 */
function onHost(inside: string, seen: string, sandboxDir: string): string {
  if (inside.startsWith(`${sandboxDir}/`) || inside === sandboxDir) return inside;
  if (inside !== INSIDE && !inside.startsWith(`${INSIDE}/`)) return inside;
  const host = join(sandboxDir, posix.relative(INSIDE, inside));
  return sameFile(seen, host) ? host : inside;
}

/**
 * The processes whose environment names the conversation (the agent and what it started): cwd and
 * HOME from /proc. With `sandboxDir`, paths a namespace sandbox names at /home/sprite are given as
 * their host paths once the kernel shows they are that directory (same device and inode).
 */
export function agentProcessesOf(conversationId: string, sandboxDir?: string): AgentProc[] {
  const out: AgentProc[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, 'utf8').split('\0');
      if (!env.includes(`FOUNTAIN_CONVERSATION_ID=${conversationId}`)) continue;
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      const home = env.find((e) => e.startsWith('HOME='))?.slice(5) ?? '';
      out.push({
        pid: Number(name),
        argv: readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 200),
        cwd: sandboxDir ? onHost(cwd, `/proc/${name}/cwd`, sandboxDir) : cwd,
        home: sandboxDir ? onHost(home, `/proc/${name}/root${home}`, sandboxDir) : home,
        tmpdir: env.find((e) => e.startsWith('TMPDIR='))?.slice(7) ?? '',
        credentials: env.flatMap((e) => CREDENTIAL_VAR.exec(e)?.[2] ?? []),
      });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
