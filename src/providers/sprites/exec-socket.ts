/**
 * One Sprites exec WebSocket: bearer-authenticated upgrade, binary frames with a one-byte stream
 * prefix (0 stdin, 1 stdout, 2 stderr, 3 exit, 4 stdin EOF) and JSON text control frames.
 */
import WebSocket from 'ws';
import type { RawData } from 'ws';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { err, ok, sandboxError, type Private, type SandboxError, type SandboxResult } from '../../sandbox/index.ts';
import { badReply, fromHttpStatus, fromTransport } from './errors.ts';

export const STREAM_STDIN = 0;
export const STREAM_STDOUT = 1;
export const STREAM_STDERR = 2;
export const STREAM_EXIT = 3;
export const STREAM_STDIN_EOF = 4;

const sessionInfoSchema = z.object({
  type: z.literal('session_info'),
  session_id: z.union([z.number().int(), z.string().min(1)]),
  command: z.string().optional(),
  created: z.union([z.number(), z.string()]).optional(),
  is_owner: z.boolean().optional(),
  tty: z.boolean().optional(),
});
const exitSchema = z.object({ type: z.literal('exit'), exit_code: z.number().int() });
const textFrameSchema = z.object({ type: z.string() }).loose();

export interface SessionInfo {
  readonly sessionId: string;
  readonly command: string | undefined;
}

/** What a socket reports after its acknowledgment: output, then exactly one terminal event. */
export type ExecEvent =
  | { readonly type: 'stdout'; readonly data: Uint8Array }
  | { readonly type: 'stderr'; readonly data: Uint8Array }
  | { readonly type: 'exit'; readonly code: number }
  /** The socket ended without an exit frame, or the transport broke, or a frame was malformed. */
  | { readonly type: 'lost'; readonly error: SandboxError };

export interface OpenOptions {
  readonly url: URL;
  readonly token: Private<string>;
  readonly tty: boolean;
  /** Bounds the upgrade plus, when `awaitInfo`, the wait for `session_info`. */
  readonly ackTimeoutMs: number;
  /**
   * Resolve only once `session_info` arrived. Neither official SDK waits for it and its order
   * relative to output is undocumented, so by default the socket is ready once the upgrade is done.
   */
  readonly awaitInfo?: boolean;
  readonly onEvent: (ev: ExecEvent) => void;
}

const toBytes = (data: RawData): Uint8Array => {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return new Uint8Array(data);
};

const readBody = (res: IncomingMessage, limit = 8192): Promise<unknown> =>
  new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      if (size < limit) chunks.push(c);
      size += c.length;
    });
    const done = () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        resolve(undefined);
      }
    };
    res.on('end', done);
    res.on('error', done);
    res.on('aborted', done);
  });

/**
 * A live exec socket. Output is delivered from the first frame, whether or not `session_info`
 * came first; `info` is filled in whenever it arrives (it may never come).
 */
export class ExecSocket {
  #info: SessionInfo | null = null;
  readonly #infoWaiters: Array<(i: SessionInfo) => void> = [];
  readonly #ws: WebSocket;
  readonly #tty: boolean;
  #terminal = false;

  private constructor(ws: WebSocket, tty: boolean) {
    this.#ws = ws;
    this.#tty = tty;
  }

  get ended(): boolean {
    return this.#terminal;
  }

  /** The process's session, once Sprites said which it is. */
  get info(): SessionInfo | null {
    return this.#info;
  }

  /** Resolves when `session_info` arrives (never, if it does not). */
  whenInfo(): Promise<SessionInfo> {
    const known = this.#info;
    return known ? Promise.resolve(known) : new Promise((resolve) => this.#infoWaiters.push(resolve));
  }

  #setInfo(i: SessionInfo): void {
    if (this.#info) return;
    this.#info = i;
    for (const w of this.#infoWaiters.splice(0)) w(i);
  }

  static open(opts: OpenOptions): Promise<SandboxResult<ExecSocket>> {
    return new Promise((resolve) => {
      let settled = false;
      let ws: WebSocket;
      const settle = (r: SandboxResult<ExecSocket>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(r);
      };
      const failEarly = (e: SandboxError) => {
        settle(err(e));
        try {
          ws.terminate();
        } catch {
          // already gone
        }
      };
      try {
        ws = new WebSocket(opts.url, {
          headers: { Authorization: `Bearer ${opts.token.reveal()}` },
          followRedirects: false,
          perMessageDeflate: false,
        });
      } catch (e) {
        resolve(err(fromTransport(e)));
        return;
      }
      const socket = new ExecSocket(ws, opts.tty);
      const timer = setTimeout(() => failEarly(sandboxError('unavailable', 'ack_timeout')), opts.ackTimeoutMs);
      // Frames that end the stream before the caller has the socket still count: they are
      // delivered in order and the caller sees them once `open` resolves.
      const terminal = (ev: ExecEvent) => {
        if (socket.#terminal) return;
        socket.#terminal = true;
        opts.onEvent(ev);
        if (ws.readyState === WebSocket.OPEN) ws.close(1000);
        settle(ok(socket));
      };

      ws.on('open', () => {
        if (!opts.awaitInfo) settle(ok(socket));
      });
      ws.on('unexpected-response', (_req, res) => {
        void readBody(res).then((body) =>
          failEarly(fromHttpStatus(res.statusCode ?? 0, body, res.headers['retry-after'] as string | undefined)),
        );
      });
      ws.on('error', (e) => {
        if (!settled) failEarly(fromTransport(e));
        else terminal({ type: 'lost', error: fromTransport(e) });
      });
      ws.on('close', () => {
        if (!settled && !socket.#terminal && socket.#info === null && opts.awaitInfo)
          failEarly(sandboxError('unavailable', 'closed_before_ack'));
        else terminal({ type: 'lost', error: sandboxError('closed_before_exit') });
      });
      ws.on('message', (data, isBinary) => {
        if (!isBinary) {
          let json: unknown;
          try {
            json = JSON.parse(toBytes(data).toString());
          } catch {
            json = undefined;
          }
          const frame = textFrameSchema.safeParse(json);
          if (!frame.success) {
            terminal({ type: 'lost', error: badReply('text_frame') });
            return;
          }
          if (frame.data.type === 'session_info') {
            const info = sessionInfoSchema.safeParse(json);
            if (!info.success) {
              if (!settled) failEarly(badReply('session_info'));
              return;
            }
            socket.#setInfo({ sessionId: String(info.data.session_id), command: info.data.command });
            settle(ok(socket));
            return;
          }
          if (frame.data.type === 'exit') {
            const ex = exitSchema.safeParse(json);
            if (!ex.success) terminal({ type: 'lost', error: badReply('exit_frame') });
            else terminal({ type: 'exit', code: ex.data.exit_code });
          }
          // Port notices and other announcements carry nothing the contract needs.
          return;
        }
        if (socket.#terminal) return;
        const bytes = toBytes(data);
        if (opts.tty) {
          if (bytes.length > 0) opts.onEvent({ type: 'stdout', data: bytes });
          return;
        }
        const stream = bytes[0];
        const payload = bytes.subarray(1);
        if (stream === STREAM_STDOUT) {
          if (payload.length > 0) opts.onEvent({ type: 'stdout', data: payload });
        } else if (stream === STREAM_STDERR) {
          if (payload.length > 0) opts.onEvent({ type: 'stderr', data: payload });
        } else if (stream === STREAM_EXIT) {
          // The exit payload is one byte, the code; anything wider was never sent by Sprites.
          const code = payload[0];
          if (code === undefined) terminal({ type: 'lost', error: badReply('exit_frame') });
          else terminal({ type: 'exit', code });
        }
      });
    });
  }

  /** Writes one stdin frame; the promise settles when the bytes reached the socket. */
  writeStdin(data: Uint8Array): Promise<SandboxResult<void>> {
    const frame = this.#tty ? Buffer.from(data) : Buffer.concat([Buffer.of(STREAM_STDIN), data]);
    return this.#send(frame);
  }

  closeStdin(): Promise<SandboxResult<void>> {
    // With a TTY there is no EOF frame: the terminal's ^D is the EOF.
    return this.#send(this.#tty ? Buffer.of(0x04) : Buffer.of(STREAM_STDIN_EOF));
  }

  sendResize(cols: number, rows: number): Promise<SandboxResult<void>> {
    return this.#send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  #send(frame: Buffer | string): Promise<SandboxResult<void>> {
    if (this.#terminal || this.#ws.readyState !== WebSocket.OPEN) {
      return Promise.resolve(err(sandboxError('command_exited')));
    }
    return new Promise((resolve) => {
      try {
        this.#ws.send(frame, { binary: typeof frame !== 'string' }, (e) => {
          if (!e) resolve(ok(undefined));
          else
            resolve(
              err(this.#terminal ? sandboxError('command_exited') : sandboxError('write_failed', 'socket_write')),
            );
        });
      } catch {
        resolve(err(sandboxError('write_failed', 'socket_write')));
      }
    });
  }

  /** Closes the local end only; whether the process survives is up to `max_run_after_disconnect`. */
  close(): void {
    this.#terminal = true;
    try {
      if (this.#ws.readyState === WebSocket.OPEN || this.#ws.readyState === WebSocket.CONNECTING) this.#ws.close(1000);
    } catch {
      // closing twice or mid-handshake is harmless
    }
    // A peer that never answers the close handshake must not hold the socket open.
    setTimeout(() => {
      if (this.#ws.readyState !== WebSocket.CLOSED) this.#ws.terminate();
    }, 2000).unref();
  }
}
