/**
 * Runs one shell command for the demo agent: in the session's cwd, output captured with a cap, killable as a group.
 * The command's own process group is killed on abort so `sh -c` children die with it.
 */
import { spawn } from 'node:child_process';

export const OUTPUT_CAP = 64 * 1024;

/** Process groups of commands still running: they live in their own group, so the agent's exit must end them. */
const running = new Set<number>();

const killGroup = (pid: number): void => {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
};

/** Kills every command still running; called when the agent shuts down. */
export function killAllShells(): void {
  for (const pid of running) killGroup(pid);
  running.clear();
}

export interface ShellResult {
  /** Exit code, or null when the command was killed or could not start. */
  readonly exitCode: number | null;
  readonly output: string;
  readonly truncated: boolean;
  readonly aborted: boolean;
}

export function runShell(command: string, cwd: string, signal: AbortSignal): Promise<ShellResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    const take = (b: Buffer): void => {
      if (size >= OUTPUT_CAP) {
        truncated = true;
        return;
      }
      const part = b.subarray(0, OUTPUT_CAP - size);
      if (part.length < b.length) truncated = true;
      chunks.push(part);
      size += part.length;
    };
    const child = spawn('/bin/sh', ['-c', command], { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const pid = child.pid;
    if (pid !== undefined) running.add(pid);
    const kill = (): void => {
      if (pid !== undefined) killGroup(pid);
    };
    if (signal.aborted) kill();
    signal.addEventListener('abort', kill, { once: true });
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (e) => {
      signal.removeEventListener('abort', kill);
      resolve({
        exitCode: null,
        output: `could not start the command: ${e.message}`,
        truncated: false,
        aborted: signal.aborted,
      });
    });
    child.on('close', (code) => {
      if (pid !== undefined) running.delete(pid);
      signal.removeEventListener('abort', kill);
      resolve({ exitCode: code, output: Buffer.concat(chunks).toString('utf8'), truncated, aborted: signal.aborted });
    });
  });
}
