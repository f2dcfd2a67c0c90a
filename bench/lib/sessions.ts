/**
 * Helpers for a spawned or attached command: a FrameSink that counts bytes and resolves on the
 * terminal frame, and a raw-pipe floor that reads the same command's stdout in this process.
 */
import { spawn } from 'node:child_process';
import type { FrameSink, SandboxError } from '../../src/sandbox/index.ts';

export interface Counter {
  readonly sink: FrameSink;
  /** Resolves with the stdout byte count on `exit`; rejects on an `error` frame. */
  readonly done: Promise<{ bytes: number; code: number }>;
  bytes(): number;
}

export function countingSink(): Counter {
  let bytes = 0;
  let resolve!: (v: { bytes: number; code: number }) => void;
  let reject!: (e: Error) => void;
  const done = new Promise<{ bytes: number; code: number }>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const sink: FrameSink = (f) => {
    if (f.type === 'stdout') bytes += f.data.length;
    else if (f.type === 'exit') resolve({ bytes, code: f.code });
    else if (f.type === 'error') reject(new Error(`stream error: ${(f.error as SandboxError).code} ${(f.error as SandboxError).detail ?? ''}`));
  };
  return { sink, done, bytes: () => bytes };
}

/** The floor: the same command's stdout over a raw pipe into this process, counted. */
export function rawPipe(cmd: string, args: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, [...args], { stdio: ['ignore', 'pipe', 'ignore'] });
    let bytes = 0;
    child.stdout.on('data', (b: Buffer) => (bytes += b.length));
    child.once('error', reject);
    child.once('close', () => resolve(bytes));
  });
}
