/**
 * Test helpers for the runner: a StreamOut that keeps what it was sent, a silent or capturing
 * pino logger, and a wait-until with a hang guard. Used only by *.test.ts files.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import type { Logger } from 'pino';
import type { StreamFrame } from '../wire/index.ts';
import type { StreamOut } from './backend.ts';

export class CollectingOut implements StreamOut {
  readonly frames: StreamFrame[] = [];
  open = true;
  send(frame: StreamFrame): void {
    if (this.open) this.frames.push(frame);
  }
  drained(): Promise<void> {
    return Promise.resolve();
  }
  /** Concatenated stdout (and stderr) bytes of one session, replay and live alike. */
  bytes(sessionId: string, streams: readonly string[] = ['stdout']): Buffer {
    return Buffer.concat(
      this.frames
        .filter((f) => f.session_id === sessionId && streams.includes(f.stream) && f.stream !== 'exit')
        .map((f) => Buffer.from((f as { data: string }).data, 'base64')),
    );
  }
  exitCode(sessionId: string): number | undefined {
    const f = this.frames.find((x) => x.session_id === sessionId && x.stream === 'exit');
    return f && f.stream === 'exit' ? f.code : undefined;
  }
}

export interface CapturedLogger {
  logger: Logger;
  lines: Array<Record<string, unknown>>;
}

export function captureLogger(): CapturedLogger {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), lines };
}

/** Polls `check` until it returns a truthy value; the timeout only guards against a hang. */
export async function until<T>(check: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
