/**
 * One-shot commands of the process backend: own process group,
 * collected output, exit codes 124 / 127 / 137, and a bounded drain after the leader exits.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { groupAlive, signalGroup } from './groups.ts';

export const TIMEOUT_EXIT = 124;
export const NOT_STARTED_EXIT = 127;
export const SIGNAL_EXIT = 137;
const DRAIN_MS = 250;
/** Keeps the reply (base64 of this) well under the 64 MiB frame limit. */
export const MAX_EXEC_OUTPUT = 40 * 1024 * 1024;

export interface ExecSpec {
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly timeoutMs: number | null;
  readonly stderrToStdout: boolean;
  /** Told the leader's pid once it runs, so a shutdown can reach the group. */
  readonly onStart?: (pid: number) => void;
  readonly onEnd?: (pid: number) => void;
}

export interface ExecOutcome {
  readonly output: Buffer;
  readonly code: number;
}

/** Runs a command to completion. Never rejects: every failure is an exit code with a note. */
export function runExec(spec: ExecSpec): Promise<ExecOutcome> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    const collect = (buf: Buffer) => {
      if (size >= MAX_EXEC_OUTPUT) {
        truncated = true;
        return;
      }
      const part = buf.length + size > MAX_EXEC_OUTPUT ? buf.subarray(0, MAX_EXEC_OUTPUT - size) : buf;
      truncated ||= part.length < buf.length;
      chunks.push(part);
      size += part.length;
    };
    const finish = (code: number, note?: string) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      if (truncated) chunks.push(Buffer.from(`\nfountain runner: output truncated at ${MAX_EXEC_OUTPUT} bytes\n`));
      if (note) chunks.push(Buffer.from(`${size > 0 && !truncated ? '\n' : ''}fountain runner: ${note}\n`));
      if (child.pid !== undefined) spec.onEnd?.(child.pid);
      resolve({ output: Buffer.concat(chunks), code });
    };
    let settled = false;
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;

    let child: ChildProcess;
    try {
      child = spawn(spec.file, [...spec.args], {
        cwd: spec.cwd,
        env: spec.env,
        detached: true,
        stdio: ['ignore', 'pipe', spec.stderrToStdout ? 'pipe' : 'ignore'],
      });
    } catch (e) {
      resolve({
        output: Buffer.from(`fountain runner: ${e instanceof Error ? e.message : String(e)}\n`),
        code: NOT_STARTED_EXIT,
      });
      return;
    }
    const pipes = [child.stdout, child.stderr].filter((s) => s !== null);
    const closed = Promise.all(pipes.map((s) => new Promise<void>((r) => s.once('close', () => r()))));
    for (const s of pipes) {
      s.on('data', collect);
      s.on('error', () => {});
    }

    child.once('error', (e) => {
      // 'error' without a pid is a start failure; with one it is a late wait error.
      if (child.pid === undefined) finish(NOT_STARTED_EXIT, e.message);
    });
    child.once('spawn', () => {
      if (child.pid !== undefined) spec.onStart?.(child.pid);
      if (spec.timeoutMs !== null && spec.timeoutMs > 0) {
        timer = setTimeout(() => {
          timedOut = true;
          if (child.pid !== undefined) signalGroup(child.pid, 'SIGKILL');
        }, spec.timeoutMs);
      }
    });
    child.once('exit', (code, signal) => {
      const pid = child.pid!;
      // The leader is gone; whatever it left in its group goes too.
      if (groupAlive(pid)) signalGroup(pid, 'SIGKILL');
      let drained = false;
      const drainTimer = setTimeout(() => {
        if (drained) return;
        for (const s of pipes) s.destroy();
        finish(TIMEOUT_EXIT, 'command output did not close');
      }, DRAIN_MS);
      void closed.then(() => {
        drained = true;
        clearTimeout(drainTimer);
        if (signal !== null) finish(SIGNAL_EXIT);
        else if (timedOut) finish(TIMEOUT_EXIT, 'command timed out');
        else finish(code ?? 1);
      });
    });
  });
}
