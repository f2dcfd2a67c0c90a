/**
 * The daemon's end of the guest link: the runner protocol as newline-delimited JSON over a stream
 * to `fountain runner-guest`, with the two ordering rules of docs/runners/microvm.md.
 * Rule 1: a spawn's or attach's frames are held until the daemon's own reply is on the wire.
 * Rule 2: a link that drops with sessions live ends each once with a stderr note and exit 137.
 */
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { err, ok } from '../../../sandbox/result.ts';
import type { Result } from '../../../sandbox/result.ts';
import { MAX_FRAME_BYTES, decodeFrame, encodeBase64, encodeFrame } from '../../../wire/index.ts';
import type { Request, StreamFrame } from '../../../wire/index.ts';
import type { StreamOut, WireError } from '../../backend.ts';

/** A request without its id: the link numbers requests itself. */
export type GuestRequest = Request extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

export const LINK_DROP_EXIT = 137;
export const dropNote = (reason: string): string =>
  `\nfountain runner: the microVM's agent connection dropped (${reason})\n`;

export interface CallOptions {
  /** Null waits for ever (an exec without a timeout). */
  readonly timeoutMs: number | null;
  /** The daemon's own probes (boot ping, shutdown sync) use negative ids. */
  readonly probe?: boolean;
  readonly dialTimeoutMs?: number;
}

export interface CallReply {
  readonly result: Record<string, unknown>;
  /** Set when the reply named a session whose frames are now held: pass it to release(). */
  readonly gate?: { readonly sessionId: string; readonly linkId: number };
}

interface Pending {
  readonly op: string;
  readonly resolve: (r: Result<CallReply, WireError>) => void;
  readonly timer: NodeJS.Timeout | null;
}

interface LinkSession {
  out: StreamOut | null;
  /** Guest-side request id of a replay → the platform request id it answers. */
  readonly replayFor: Map<number, number>;
  /** Non-null while the gate is closed: frames wait here, in order. */
  held: StreamFrame[] | null;
  live: boolean;
}

const unavailable = (detail: string): WireError => ({ code: 'unavailable', detail });

export interface GuestLinkOptions {
  readonly dial: (timeoutMs: number) => Promise<Result<Duplex, string>>;
  readonly logger: Logger;
  /** Called after an unexpected drop (not after close()). */
  readonly onDrop?: (reason: string) => void;
}

export class GuestLink {
  readonly #dial: GuestLinkOptions['dial'];
  readonly #log: Logger;
  readonly #onDrop: GuestLinkOptions['onDrop'];
  readonly #pending = new Map<number, Pending>();
  readonly #sessions = new Map<string, LinkSession>();
  #stream: Duplex | null = null;
  #connecting: Promise<Result<Duplex, WireError>> | null = null;
  /** Bumped by every connect and close, so a stale reader's events are ignored. */
  #epoch = 0;
  #nextId = 1;
  #nextProbe = -1;

  constructor(opts: GuestLinkOptions) {
    this.#dial = opts.dial;
    this.#log = opts.logger;
    this.#onDrop = opts.onDrop;
  }

  get connected(): boolean {
    return this.#stream !== null;
  }

  /** Sends one request (connecting first if needed) and resolves with its reply; never rejects. */
  async call(req: GuestRequest, opts: CallOptions): Promise<Result<CallReply, WireError>> {
    const stream = await this.#connect(opts.dialTimeoutMs ?? 5000);
    if (!stream.ok) return stream;
    const id = opts.probe ? this.#nextProbe-- : this.#nextId++;
    if (this.#pending.has(id)) return err(unavailable(`duplicate in-flight request id ${id}`));
    return new Promise((resolve) => {
      const timer =
        opts.timeoutMs === null
          ? null
          : setTimeout(() => {
              this.#pending.delete(id);
              resolve(err(unavailable(`the guest agent did not answer ${req.op} within ${opts.timeoutMs} ms`)));
            }, opts.timeoutMs);
      this.#pending.set(id, { op: req.op, resolve, timer });
      stream.value.write(`${encodeFrame({ ...req, id } as Request)}\n`);
    });
  }

  /**
   * The daemon's reply to the platform is on the wire: route the session's frames to `out`
   * (replays relabelled with the platform's request id) and flush what the gate held, in order.
   */
  release(gate: { sessionId: string; linkId: number }, out: StreamOut | null, platformRequestId: number): void {
    const s = this.#sessions.get(gate.sessionId);
    if (!s) return;
    s.out = out;
    s.replayFor.set(gate.linkId, platformRequestId);
    const held = s.held ?? [];
    s.held = null;
    for (const f of held) this.#deliver(s, f);
  }

  /** The platform stopped listening: frames of this session are dropped (the guest journals them). */
  detach(sessionId: string): void {
    const s = this.#sessions.get(sessionId);
    if (s) {
      s.out = null;
      s.held = null;
    }
  }

  /** A deliberate close (destroy, stop): pending calls fail, and no exit is synthesized. */
  close(reason = 'the guest link was closed'): void {
    this.#epoch++;
    const stream = this.#stream;
    this.#stream = null;
    this.#connecting = null;
    stream?.destroy();
    this.#failPending(reason);
    this.#sessions.clear();
  }

  #connect(timeoutMs: number): Promise<Result<Duplex, WireError>> {
    if (this.#stream) return Promise.resolve(ok(this.#stream));
    this.#connecting ??= (async () => {
      const epoch = this.#epoch;
      const dialed = await this.#dial(timeoutMs);
      if (epoch !== this.#epoch) {
        if (dialed.ok) dialed.value.destroy();
        return err(unavailable('the guest link was closed'));
      }
      this.#connecting = null;
      if (!dialed.ok) return err(unavailable(dialed.error));
      this.#attach(dialed.value);
      return ok(dialed.value);
    })();
    return this.#connecting;
  }

  #attach(stream: Duplex): void {
    const epoch = ++this.#epoch;
    this.#stream = stream;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    stream.on('data', (chunk: Buffer) => {
      if (epoch !== this.#epoch) return;
      let start = 0;
      for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
        const piece = chunk.subarray(start, nl);
        start = nl + 1;
        const line = pendingBytes ? Buffer.concat([...pending, piece]).toString('utf8') : piece.toString('utf8');
        pending = [];
        pendingBytes = 0;
        if (line.trim() !== '') this.#receive(line);
        if (epoch !== this.#epoch) return;
      }
      if (start < chunk.length) {
        pending.push(chunk.subarray(start));
        pendingBytes += chunk.length - start;
        if (pendingBytes > MAX_FRAME_BYTES) this.#dropped(epoch, 'the guest sent an oversized frame');
      }
    });
    stream.once('error', (e) => this.#dropped(epoch, e.message));
    stream.once('close', () => this.#dropped(epoch, 'connection closed'));
    stream.once('end', () => this.#dropped(epoch, 'connection closed'));
    stream.resume();
  }

  #receive(line: string): void {
    const d = decodeFrame(line);
    if (d.kind === 'reply') {
      const p = this.#pending.get(d.reply.id);
      if (!p) return;
      this.#pending.delete(d.reply.id);
      if (p.timer) clearTimeout(p.timer);
      if (!d.reply.ok) {
        const code = d.reply.error;
        const known = [
          'not_found',
          'command_exited',
          'not_supported',
          'invalid',
          'unavailable',
          'write_failed',
        ].includes(code);
        p.resolve(err({ code: known ? (code as WireError['code']) : 'provider', detail: d.reply.detail ?? code }));
        return;
      }
      const result = d.reply.result;
      const sid = result.session_id;
      if ((p.op === 'spawn' || p.op === 'attach') && typeof sid === 'string') {
        // Close the gate now, synchronously: frames behind this reply in the same chunk must wait.
        let s = this.#sessions.get(sid);
        if (!s) {
          s = { out: null, replayFor: new Map(), held: null, live: true };
          this.#sessions.set(sid, s);
        }
        s.live = true;
        s.held ??= [];
        p.resolve(ok({ result, gate: { sessionId: sid, linkId: d.reply.id } }));
        return;
      }
      p.resolve(ok({ result }));
      return;
    }
    if (d.kind === 'stream') {
      const s = this.#sessions.get(d.frame.session_id);
      if (s) this.#deliver(s, d.frame);
      return;
    }
    this.#log.debug({ kind: d.kind }, 'runner: ignoring a guest frame that is neither a reply nor a stream frame');
  }

  #deliver(s: LinkSession, frame: StreamFrame): void {
    if (frame.stream === 'exit') s.live = false;
    if (s.held) {
      s.held.push(frame);
      return;
    }
    if (!s.out?.open) return;
    if (frame.replay_for === undefined) {
      s.out.send(frame);
      return;
    }
    const platformId = s.replayFor.get(frame.replay_for);
    // A replay for a request the platform no longer waits on goes nowhere.
    if (platformId !== undefined) s.out.send({ ...frame, replay_for: platformId });
  }

  #failPending(reason: string): void {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const p of pending) {
      if (p.timer) clearTimeout(p.timer);
      p.resolve(err(unavailable(reason)));
    }
  }

  #dropped(epoch: number, reason: string): void {
    if (epoch !== this.#epoch) return;
    this.#epoch++;
    const stream = this.#stream;
    this.#stream = null;
    stream?.destroy();
    this.#log.warn({ reason }, 'runner: the guest link dropped');
    this.#failPending(`the microVM's agent connection dropped (${reason})`);
    // Fountain reads a stream that stops without an exit as success: end each live session once.
    const note = encodeBase64(Buffer.from(dropNote(reason)));
    for (const [id, s] of this.#sessions) {
      if (!s.live) continue;
      this.#deliver(s, { stream: 'stderr', session_id: id, data: note });
      this.#deliver(s, { stream: 'exit', session_id: id, code: LINK_DROP_EXIT });
    }
    this.#onDrop?.(reason);
  }
}
