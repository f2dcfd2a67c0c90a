/**
 * Helpers for a spawned or attached command: a FrameSink that counts bytes and resolves on the
 * terminal frame, and a raw-pipe floor that reads the same command's stdout in this process.
 */
import { spawn } from 'node:child_process';
import { z } from 'zod';
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
    else if (f.type === 'error')
      reject(new Error(`stream error: ${(f.error as SandboxError).code} ${(f.error as SandboxError).detail ?? ''}`));
  };
  return { sink, done, bytes: () => bytes };
}

/** Spawns the command, counts its stdout off a pipe, and prints `{"bytes":…,"ms":…}`. */
const RAW_PIPE_READER = `
const { spawn } = require('node:child_process');
const [cmd, ...args] = JSON.parse(process.argv[1]);
const t0 = process.hrtime.bigint();
const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] });
let bytes = 0;
child.stdout.on('data', (b) => (bytes += b.length));
child.once('close', () => process.stdout.write(JSON.stringify({ bytes, ms: Number(process.hrtime.bigint() - t0) / 1e6 })));
`;

/**
 * The floor: the same command's stdout over a raw pipe into a node process, counted. A process of
 * its own, so the gigabyte of buffers it reads does not land in the server's heap before its run.
 */
export function rawPipe(cmd: string, args: readonly string[]): Promise<{ bytes: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const reader = spawn(process.execPath, ['-e', RAW_PIPE_READER, JSON.stringify([cmd, ...args])], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    reader.stdout.setEncoding('utf8');
    reader.stdout.on('data', (s: string) => (out += s));
    reader.once('error', reject);
    reader.once('close', (code) => {
      try {
        resolve(z.object({ bytes: z.number(), ms: z.number() }).parse(JSON.parse(out)));
      } catch {
        reject(new Error(`raw pipe reader exited ${code} with ${JSON.stringify(out.slice(0, 200))}`));
      }
    });
  });
}
