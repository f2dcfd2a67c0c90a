/**
 * Test support: the demo agent as a real child process over stdio, driven by an AcpClient, with everything recorded.
 * Used by the ACP tests and by engine tests that want a real agent without a sandbox.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import type { PromptResponse, RequestPermissionRequest, SessionNotification } from '@agentclientprotocol/sdk';
import { ok, type Result } from '../../sandbox/index.ts';
import {
  AcpClient,
  type AcpClientHandler,
  type AttachOptions,
  type HeldPermission,
  type LineContext,
} from '../client.ts';
import type { AcpError, AcpProblem } from '../errors.ts';
import { localDemoAgentArgv } from '../demo/launch.ts';
import type { AcpMessage } from '../message.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface Recorder {
  readonly messages: Array<{ raw: string; message: AcpMessage; ctx: LineContext }>;
  readonly notifications: Array<{ n: SessionNotification; ctx: LineContext }>;
  readonly permissions: HeldPermission[];
  readonly problems: AcpProblem[];
  /** Resolves with the first recorded permission request at index >= `from`. */
  nextPermission(from?: number): Promise<HeldPermission & { params: RequestPermissionRequest }>;
  /** Resolves once a notification satisfies `pred`. */
  waitForUpdate(pred: (n: SessionNotification) => boolean): Promise<SessionNotification>;
  handler: AcpClientHandler;
}

export function recorder(): Recorder {
  const waiters: Array<() => void> = [];
  const poke = (): void => {
    for (const w of waiters.splice(0)) w();
  };
  const until = <T>(probe: () => T | undefined): Promise<T> =>
    new Promise((resolve) => {
      const check = (): void => {
        const v = probe();
        if (v !== undefined) resolve(v);
        else waiters.push(check);
      };
      check();
    });
  const r: Recorder = {
    messages: [],
    notifications: [],
    permissions: [],
    problems: [],
    nextPermission: (from = 0) =>
      until(() =>
        r.permissions
          .slice(from)
          .find((p): p is HeldPermission & { params: RequestPermissionRequest } => p.params !== null),
      ),
    waitForUpdate: (pred) => until(() => r.notifications.find((x) => pred(x.n))?.n),
    handler: {
      onMessage: (raw, message, ctx) => {
        r.messages.push({ raw, message, ctx });
        poke();
      },
      onNotification: (n, ctx) => {
        r.notifications.push({ n, ctx });
        poke();
      },
      onPermissionRequest: (p) => {
        r.permissions.push(p);
        poke();
      },
      onProblem: (p) => {
        r.problems.push(p);
        poke();
      },
    },
  };
  return r;
}

export interface DemoProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** Every stdout byte, in order: the byte journal a runner would keep. */
  readonly journal: Buffer[];
  stderr(): string;
  /** The client currently fed with stdout; swap it to simulate a reattach. */
  client: AcpClient;
  readonly rec: Recorder;
  readonly exited: Promise<number | null>;
  /** Replaces the live client: feeds `journal` to a fresh client (attach replay), then tails live output into it. */
  reattach(
    opts: AttachOptions,
    rec: Recorder,
    chunking?: (journal: Buffer) => Buffer[],
  ): { client: AcpClient; turn: Promise<Result<PromptResponse, AcpError>> };
  stop(): Promise<void>;
}

export const silentLogger = pino({ level: 'silent' });

export function startDemoAgent(opts: { home: string; cwd: string; via?: 'main' | 'cli' }): DemoProcess {
  const args =
    opts.via === 'cli'
      ? localDemoAgentArgv().slice(1)
      : // Resolved here: the child's cwd is a sandbox directory where `tsx` would not resolve.
        ['--import', import.meta.resolve('tsx'), `${ROOT}src/acp/demo/main.ts`];
  const child = spawn(process.execPath, args, {
    cwd: opts.cwd,
    env: { ...process.env, HOME: opts.home },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const journal: Buffer[] = [];
  let stderr = '';
  const write = (bytes: Uint8Array) =>
    new Promise<ReturnType<typeof ok<void>>>((resolve) => child.stdin.write(bytes, () => resolve(ok(undefined))));
  const rec = recorder();
  const proc: DemoProcess = {
    child,
    journal,
    stderr: () => stderr,
    client: new AcpClient({ write, handler: rec.handler, logger: silentLogger }),
    rec,
    exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
    reattach(attach, rec2, chunking = (j) => [j]) {
      const c = new AcpClient({ write, handler: rec2.handler, logger: silentLogger });
      const a = c.attachPrompt(attach);
      if (!a.ok) throw new Error(a.error.message);
      proc.client = c;
      for (const piece of chunking(Buffer.concat(journal))) c.feed(piece);
      return { client: c, turn: a.value.done };
    },
    async stop() {
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await proc.exited;
      clearTimeout(timer);
    },
  };
  child.stdout.on('data', (b: Buffer) => {
    journal.push(b);
    proc.client.feed(b);
  });
  child.stdout.on('end', () => proc.client.endOfInput());
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
  return proc;
}

/** Concatenated text of the agent_message_chunk updates recorded from `from` on. */
export function answerText(rec: Recorder, from = 0): string {
  return rec.notifications
    .slice(from)
    .map(({ n }) =>
      n.update.sessionUpdate === 'agent_message_chunk' && n.update.content.type === 'text' ? n.update.content.text : '',
    )
    .join('');
}
