/**
 * The FakeDaemon's options and state: its sandboxes and sessions, and its script vocabulary
 * (`out:<data>`, `err:<data>`, `exit:<n>`, `stay`, `drop`; a bad exit code is 1).
 */
import type { Logger } from 'pino';
import type { RawData } from 'ws';
import type { Request, StreamFrame } from '../../wire/index.ts';
import type { RunnerTestHub } from './test-hub.ts';

export const FAKE_ROOT = '/fake/root';

export interface FakeDaemonOptions {
  readonly runnerId: string;
  /** Runner name sent in the dial; default `fake`. */
  readonly name?: string;
  /** The hub to dial; without one the daemon starts (and later stops) its own over a LocalRunnerHost. */
  readonly hub?: RunnerTestHub;
  readonly logger: Logger;
  /** Dial again after the socket drops (as the real daemon does); default true. */
  readonly reconnect?: boolean;
  /**
   * Test hook: answers a request with raw text instead of handling it (a malformed reply, a
   * stray frame); return undefined to handle it normally, or null to swallow it unanswered.
   */
  readonly intercept?: (request: Request) => string | string[] | null | undefined;
  /** Sent as `capabilities=` in the dial; without it the dial carries none (an upstream daemon). */
  readonly capabilities?: readonly string[];
  /** Extra dial headers, e.g. `authorization` to dial a real fountain server instead of a test hub. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface FakeSandbox {
  status: 'running' | 'suspended';
  /** The last applied allow list, verbatim; null until one is applied. */
  policy: string[] | null;
  readonly files: Map<string, { data: Buffer; mode: number | null }>;
}

export interface FakeSession {
  readonly id: string;
  readonly seq: number;
  readonly sandbox: string;
  readonly cmd: string;
  readonly createdAt: Date;
  lastActivityAt: Date;
  /** Every frame the session produced, exit included, in wire order. */
  readonly journal: StreamFrame[];
  attached: boolean;
  exitCode: number | null;
  /** `stay`: echoing stdin until EOF. */
  staying: boolean;
}

export type Script =
  | { kind: 'out' | 'err'; data: string }
  | { kind: 'exit'; code: number }
  | { kind: 'stay' }
  | { kind: 'drop' };

export function parseScript(args: readonly string[]): Script[] {
  const script: Script[] = [];
  for (const a of args) {
    if (a.startsWith('out:')) script.push({ kind: 'out', data: a.slice(4) });
    else if (a.startsWith('err:')) script.push({ kind: 'err', data: a.slice(4) });
    else if (a.startsWith('exit:')) {
      const code = Number.parseInt(a.slice(5), 10);
      script.push({ kind: 'exit', code: Number.isSafeInteger(code) ? code : 1 });
    } else if (a === 'stay') script.push({ kind: 'stay' });
    else if (a === 'drop') script.push({ kind: 'drop' });
  }
  return script;
}

export const rawText = (data: RawData): string =>
  Buffer.isBuffer(data)
    ? data.toString('utf8')
    : Array.isArray(data)
      ? Buffer.concat(data).toString('utf8')
      : Buffer.from(data).toString('utf8');
