/**
 * The ACP client the conversation engine drives over a sandbox command's stdin/stdout: it parses the agent's
 * NDJSON itself (so a replayed byte journal can rebuild a turn), validates with the SDK's schemas, and never throws.
 *
 * Over 400 lines because the client is one object over one NDJSON stream (requests in flight, the
 * turn, permission answers); it has not been split by concern yet.
 */
import type { Logger } from 'pino';
import {
  PROTOCOL_VERSION,
  type AgentCapabilities,
  type ContentBlock,
  type InitializeResponse,
  type LoadSessionResponse,
  type McpServer,
  type NewSessionResponse,
  type PromptResponse,
  type RequestPermissionOutcome,
  type RequestPermissionRequest,
  type ResumeSessionResponse,
  type SessionNotification,
  type SetSessionConfigOptionResponse,
  type SetSessionModeResponse,
} from '@agentclientprotocol/sdk';
import { describeError, err, ok, type Result, type SandboxError } from '../sandbox/index.ts';
import { acpError, type AcpError, type AcpErrorCode, type AcpProblem } from './errors.ts';
import { LineSplitter, MAX_LINE_BYTES, decodeLine, isBlank } from './lines.ts';
import { classifyLine, type AcpMessage, type JsonRpcId } from './message.ts';
import {
  zInitializeResponse,
  zSetSessionConfigOptionResponse,
  zSetSessionModeResponse,
  zLoadSessionResponse,
  zNewSessionResponse,
  zPromptResponse,
  zRequestPermissionRequest,
  zPromptUsage,
  zResumeSessionResponse,
  zSessionNotification,
  type PromptUsage,
  type Schema,
} from './schemas.ts';
import { JournalSkipper } from './skipper.ts';

/** Where a line sits in the agent's stdout and what was going on when it arrived. */
export interface LineContext {
  /** Ordinal of the line among the non-blank lines of this command's stdout, counted from byte zero. */
  readonly seq: number;
  /** Method of the client request that was waiting for its reply when the line arrived (null: none). */
  readonly during: string | null;
}

/** A `session/request_permission` the client holds until the engine answers it (or cancel does). */
export interface HeldPermission {
  readonly id: JsonRpcId;
  /** Null only for a permission restored by attachPrompt whose request line the replay did not (yet) show. */
  readonly params: RequestPermissionRequest | null;
}

export interface AcpClientHandler {
  /** Every JSON-RPC message from the agent, verbatim (the line without its newline), in arrival order. */
  onMessage?(raw: string, message: AcpMessage, ctx: LineContext): void;
  /** A `session/update` that passed the SDK schema (called after onMessage for the same line). */
  onNotification?(notification: SessionNotification, ctx: LineContext): void;
  /**
   * A new permission request, now held; answer it later with `answerPermission(request.id, ...)`.
   * Without this hook the client answers `cancelled` at once.
   */
  onPermissionRequest?(request: HeldPermission, ctx: LineContext): void;
  /** Something wrong in the agent's output (non-JSON stdout, oversized line, bad params, ...). */
  onProblem?(problem: AcpProblem): void;
}

export interface AcpClientOptions {
  /**
   * Writes bytes to the agent's stdin (e.g. the sandbox adapter's writeStdin for the agent's command).
   * A request's line comes with its write id (requestWriteId), under which it can be repeated after a reconnect.
   */
  readonly write: (bytes: Uint8Array, writeId?: string) => Promise<Result<void, SandboxError>>;
  readonly handler: AcpClientHandler;
  readonly logger: Logger;
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /**
   * Id of the first request this client sends. Ids are consecutive per agent process; a client that takes
   * over a process after its earlier requests (but without attachPrompt) must continue the numbering.
   */
  readonly firstRequestId?: number;
  readonly maxLineBytes?: number;
}

export interface AttachOptions {
  readonly sessionId: string;
  /** The JSON-RPC id of the already-sent `session/prompt` (the turn's acp_prompt_id). */
  readonly promptId: number;
  /** The turn's pending permission request id, if one was waiting when the connection dropped. */
  readonly pendingPermissionId?: JsonRpcId;
  /**
   * The seq (LineContext.seq) of the last line already delivered and stored before the drop. Lines up to it
   * rebuild state (replies, held permissions) but reach no hook, so each line is stored exactly once.
   * Only meaningful when the replay starts at byte zero of the command's output.
   */
  readonly replayThrough?: number;
  /** Drop the journal's earlier turns. Default true; false when the fed bytes start at the active turn. */
  readonly skipEarlierTurns?: boolean;
}

/** A request on its way: `sent` when written to stdin, `done` with the agent's reply. */
export interface Call<T> {
  readonly id: number;
  /** Resolves when the request was written to the agent's stdin (or failed to be). */
  readonly sent: Promise<Result<void, AcpError>>;
  readonly done: Promise<Result<T, AcpError>>;
}

/** A prompt's reply, with the token usage the agent reported (when it did and it was well-formed). */
export type PromptReply = PromptResponse & { readonly usage?: PromptUsage };

/** The id is the turn's acp_prompt_id: persist it once `sent` succeeds. The reply's stop reason ends the turn. */
export type PromptHandle = Call<PromptReply>;

export interface SessionParams {
  readonly cwd: string;
  readonly mcpServers?: McpServer[];
}

interface Waiting {
  readonly id: number;
  readonly method: string;
  readonly schema: Schema<unknown>;
  /** session/load may answer null. */
  readonly nullAsEmpty: boolean;
  readonly resolve: (r: Result<unknown, AcpError>) => void;
}

interface Held {
  id: JsonRpcId;
  params: RequestPermissionRequest | null;
}

const encoder = new TextEncoder();

/** The stdin write id of request `id`'s line: ids are consecutive per agent process, so unique within it. */
export const requestWriteId = (id: number): string => `req-${id}`;
const keyOf = (id: JsonRpcId): string => `${typeof id}:${String(id)}`;

/** Text is sent as one text block. */
const blocks = (content: string | ContentBlock[]): ContentBlock[] =>
  typeof content === 'string' ? [{ type: 'text', text: content }] : content;

export class AcpClient {
  private readonly splitter: LineSplitter;
  private readonly maxLineBytes: number;
  private nextId: number;
  private waiting: Waiting | null = null;
  private readonly held = new Map<string, Held>();
  private writeChain: Promise<unknown> = Promise.resolve();
  private seq = 0;
  private fed = false;
  private closedReason: string | null = null;
  private skipper: JournalSkipper | null = null;
  private replayThrough = -1;
  private restoredPermission: string | null = null;
  private session: string | null = null;
  private capabilities: AgentCapabilities | null = null;

  constructor(private readonly opts: AcpClientOptions) {
    this.maxLineBytes = opts.maxLineBytes ?? MAX_LINE_BYTES;
    this.splitter = new LineSplitter(this.maxLineBytes);
    this.nextId = opts.firstRequestId ?? 0;
  }

  /** The id the next request will carry; persist it to continue the numbering in a later client. */
  get nextRequestId(): number {
    return this.nextId;
  }
  /** The id of the prompt attachPrompt continues, while its reply is awaited; null otherwise. */
  get attachedPromptId(): number | null {
    const w = this.waiting;
    return w !== null && w.method === 'session/prompt' ? w.id : null;
  }
  get sessionId(): string | null {
    return this.session;
  }
  get agentCapabilities(): AgentCapabilities | null {
    return this.capabilities;
  }
  /** In attach mode: whether the journal's turn boundary was crossed. The caller times out waiting for it (10 s). */
  get boundarySeen(): boolean {
    return this.skipper ? this.skipper.boundarySeen : true;
  }
  /** The seq the next line will get: the number of lines seen since byte zero. */
  get linesSeen(): number {
    return this.seq;
  }
  get closed(): boolean {
    return this.closedReason !== null;
  }
  /** Permission requests waiting for an answer, oldest first. */
  get heldPermissions(): HeldPermission[] {
    return [...this.held.values()].map((h) => ({ id: h.id, params: h.params }));
  }

  initialize(): Promise<Result<InitializeResponse, AcpError>> {
    const call = this.call<InitializeResponse>(
      'initialize',
      {
        protocolVersion: PROTOCOL_VERSION,
        // Fountain serves no files or terminals to agents: they act inside their own sandbox.
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: this.opts.clientInfo ?? { name: 'fountain', version: '0' },
      },
      zInitializeResponse,
    );
    if (!call.ok) return Promise.resolve(call);
    return call.value.done.then((r) => {
      if (!r.ok) return r;
      if (r.value.protocolVersion !== PROTOCOL_VERSION) {
        return err(
          acpError(
            'acp_unsupported_protocol',
            `agent speaks ACP protocol ${r.value.protocolVersion}, this client ${PROTOCOL_VERSION}`,
          ),
        );
      }
      this.capabilities = r.value.agentCapabilities ?? {};
      return r;
    });
  }

  newSession(p: SessionParams): Promise<Result<NewSessionResponse, AcpError>> {
    const call = this.call<NewSessionResponse>(
      'session/new',
      { cwd: p.cwd, mcpServers: p.mcpServers ?? [] },
      zNewSessionResponse,
    );
    if (!call.ok) return Promise.resolve(call);
    return call.value.done.then((r) => {
      if (r.ok) this.session = r.value.sessionId;
      return r;
    });
  }

  /** The agent replays the session's history as updates before it answers; they reach the hooks with `during: "session/load"`. */
  loadSession(p: SessionParams & { readonly sessionId: string }): Promise<Result<LoadSessionResponse, AcpError>> {
    if (this.capabilities && !this.capabilities.loadSession) {
      return Promise.resolve(err(acpError('acp_not_supported', 'the agent does not advertise loadSession')));
    }
    const call = this.call<LoadSessionResponse>(
      'session/load',
      { sessionId: p.sessionId, cwd: p.cwd, mcpServers: p.mcpServers ?? [] },
      zLoadSessionResponse,
      true,
    );
    if (!call.ok) return Promise.resolve(call);
    this.session = p.sessionId;
    return call.value.done;
  }

  resumeSession(p: SessionParams & { readonly sessionId: string }): Promise<Result<ResumeSessionResponse, AcpError>> {
    if (this.capabilities && !this.capabilities.sessionCapabilities?.resume) {
      return Promise.resolve(err(acpError('acp_not_supported', 'the agent does not advertise session resume')));
    }
    const call = this.call<ResumeSessionResponse>(
      'session/resume',
      { sessionId: p.sessionId, cwd: p.cwd, mcpServers: p.mcpServers ?? [] },
      zResumeSessionResponse,
      true,
    );
    if (!call.ok) return Promise.resolve(call);
    this.session = p.sessionId;
    return call.value.done;
  }

  /** `session/set_config_option` on the current session (e.g. the `model` option an adapter offers). */
  setConfigOption(configId: string, value: string): Promise<Result<SetSessionConfigOptionResponse, AcpError>> {
    if (this.session === null)
      return Promise.resolve(err(acpError('acp_no_session', 'set_config_option needs a session')));
    const call = this.call<SetSessionConfigOptionResponse>(
      'session/set_config_option',
      { sessionId: this.session, configId, value },
      zSetSessionConfigOptionResponse,
    );
    return call.ok ? call.value.done : Promise.resolve(call);
  }

  /** `session/set_mode` on the current session (one of the modes the agent listed). */
  setMode(modeId: string): Promise<Result<SetSessionModeResponse, AcpError>> {
    if (this.session === null) return Promise.resolve(err(acpError('acp_no_session', 'set_mode needs a session')));
    const call = this.call<SetSessionModeResponse>(
      'session/set_mode',
      { sessionId: this.session, modeId },
      zSetSessionModeResponse,
    );
    return call.ok ? call.value.done : Promise.resolve(call);
  }

  /** Sends `session/prompt`. Text is sent as one text block. */
  prompt(content: string | ContentBlock[]): Result<PromptHandle, AcpError> {
    if (this.session === null)
      return err(acpError('acp_no_session', 'prompt needs a session: call newSession or loadSession first'));
    return this.call<PromptReply>(
      'session/prompt',
      { sessionId: this.session, prompt: blocks(content) },
      zPromptResponse as Schema<PromptReply>,
    );
  }

  /**
   * Recovery: continue a prompt that was sent before the connection dropped, over the replayed journal.
   * Call before the first feed; then feed the attach replay from byte zero and the live tail after it.
   * Earlier turns are skipped; the prompt's reply resolves `done`; the pending permission is held again.
   */
  attachPrompt(a: AttachOptions): Result<Omit<PromptHandle, 'sent'>, AcpError> {
    if (this.fed || this.waiting || this.closedReason !== null) {
      return err(acpError('acp_invalid_state', 'attachPrompt must come first, before any output is fed'));
    }
    this.session = a.sessionId;
    this.nextId = a.promptId + 1;
    if (a.skipEarlierTurns ?? true) this.skipper = new JournalSkipper(a.promptId - 1, this.maxLineBytes);
    this.replayThrough = a.replayThrough ?? -1;
    if (a.pendingPermissionId !== undefined) {
      this.restoredPermission = keyOf(a.pendingPermissionId);
      this.held.set(this.restoredPermission, { id: a.pendingPermissionId, params: null });
    }
    let resolve!: (r: Result<unknown, AcpError>) => void;
    const done = new Promise<Result<unknown, AcpError>>((r) => (resolve = r));
    this.waiting = { id: a.promptId, method: 'session/prompt', schema: zPromptResponse, nullAsEmpty: false, resolve };
    return ok({ id: a.promptId, done: done as Promise<Result<PromptReply, AcpError>> });
  }

  /**
   * Recovery of a prompt whose write a dropped connection cut short: writes the attached prompt's request
   * again, under its first write id, so a runner that took the first write does not deliver it twice
   * (only where the provider says repeats are written once). `content` is what the first `prompt` sent.
   */
  repeatPrompt(content: string | ContentBlock[]): Promise<Result<void, AcpError>> {
    const w = this.waiting;
    if (this.session === null || w === null || w.method !== 'session/prompt')
      return Promise.resolve(err(acpError('acp_invalid_state', 'repeatPrompt needs an attached prompt')));
    const params = { sessionId: this.session, prompt: blocks(content) };
    return this.send({ jsonrpc: '2.0', id: w.id, method: 'session/prompt', params }, requestWriteId(w.id)).then((r) => {
      // As for a first write: a prompt that cannot be written will get no reply.
      if (!r.ok && this.waiting === w) {
        this.waiting = null;
        w.resolve(r);
      }
      return r;
    });
  }

  /** Answers a held permission request. The first answer wins; a second gets `acp_unknown_request`. */
  answerPermission(id: JsonRpcId, outcome: RequestPermissionOutcome): Promise<Result<void, AcpError>> {
    const h = this.held.get(keyOf(id));
    if (!h)
      return Promise.resolve(
        err(acpError('acp_unknown_request', `no held permission request with id ${JSON.stringify(id)}`)),
      );
    this.held.delete(keyOf(id));
    return this.send({ jsonrpc: '2.0', id, result: { outcome } });
  }

  /**
   * Interrupt: sends `session/cancel`, then answers every held permission request `cancelled`.
   * The running prompt then resolves, normally with stop reason `cancelled`.
   */
  async cancel(): Promise<Result<{ cancelledPermissions: JsonRpcId[] }, AcpError>> {
    if (this.session === null) return err(acpError('acp_no_session', 'nothing to cancel: no session'));
    const sent = await this.send({ jsonrpc: '2.0', method: 'session/cancel', params: { sessionId: this.session } });
    if (!sent.ok) return sent;
    const cancelled: JsonRpcId[] = [];
    for (const h of [...this.held.values()]) {
      const r = await this.answerPermission(h.id, { outcome: 'cancelled' });
      if (!r.ok && r.error.code !== 'acp_unknown_request') return r;
      if (r.ok) cancelled.push(h.id);
    }
    return ok({ cancelledPermissions: cancelled });
  }

  /** Feeds bytes of the agent's stdout (live, or an attach replay followed by the live tail). Never throws. */
  feed(chunk: Uint8Array): void {
    if (this.closedReason !== null) return;
    this.fed = true;
    let bytes = chunk;
    if (this.skipper && !this.skipper.boundarySeen) {
      const r = this.skipper.push(chunk);
      if (!r.ok) {
        this.fail('runner_replay_line_too_large', r.error.message);
        return;
      }
      if (!this.skipper.boundarySeen) return;
      this.seq = this.skipper.discardedLines;
      bytes = r.value;
    }
    for (const item of this.splitter.push(bytes)) {
      if (item.kind === 'too_large') {
        const seq = this.seq++;
        if (seq > this.replayThrough) {
          this.problem({
            code: 'acp_line_too_large',
            message: `a line from the agent exceeds ${this.maxLineBytes} bytes; it was dropped`,
            raw: decodeLine(item.prefix).lossy,
            seq,
          });
        }
        continue;
      }
      this.line(item.bytes);
    }
  }

  /** The agent's stdout ended (its command exited): a last unterminated line is still read, then the client closes. */
  endOfInput(reason = 'the agent closed its stdout'): void {
    if (this.closedReason !== null) return;
    const rest = this.skipper && !this.skipper.boundarySeen ? null : this.splitter.flush();
    if (rest) this.line(rest);
    this.close(reason);
  }

  /** Stops the client: a waiting request resolves `acp_closed`, held permissions are dropped. Idempotent. */
  close(reason = 'the ACP client was closed'): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    this.held.clear();
    const w = this.waiting;
    this.waiting = null;
    w?.resolve(err(acpError('acp_closed', `${w.method}: ${reason}`)));
  }

  private fail(code: AcpErrorCode, message: string): void {
    this.opts.logger.warn({ code }, message);
    const w = this.waiting;
    this.waiting = null;
    w?.resolve(err(acpError(code, message)));
    this.close(message);
  }

  private call<T>(method: string, params: unknown, schema: Schema<T>, nullAsEmpty = false): Result<Call<T>, AcpError> {
    if (this.closedReason !== null) return err(acpError('acp_closed', `${method}: ${this.closedReason}`));
    if (this.waiting) {
      // Strictly one request at a time: the journal's turn boundary depends on it.
      return err(
        acpError('acp_busy', `${method} while ${this.waiting.method} (id ${this.waiting.id}) awaits its reply`),
      );
    }
    const id = this.nextId++;
    let resolve!: (r: Result<unknown, AcpError>) => void;
    const done = new Promise<Result<unknown, AcpError>>((r) => (resolve = r));
    const entry: Waiting = { id, method, schema: schema as Schema<unknown>, nullAsEmpty, resolve };
    this.waiting = entry;
    const sent = this.send({ jsonrpc: '2.0', id, method, params }, requestWriteId(id)).then((r) => {
      if (!r.ok && this.waiting === entry) {
        this.waiting = null;
        entry.resolve(r);
      }
      return r;
    });
    return ok({ id, sent, done: done as Promise<Result<T, AcpError>> });
  }

  private send(message: object, writeId?: string): Promise<Result<void, AcpError>> {
    const bytes = encoder.encode(`${JSON.stringify(message)}\n`);
    const write = this.opts.write;
    // Chained so bytes reach stdin in call order even when the transport's writes overlap.
    const p = this.writeChain.then(async (): Promise<Result<void, AcpError>> => {
      try {
        const r = await (writeId === undefined ? write(bytes) : write(bytes, writeId));
        return r.ok
          ? ok(undefined)
          : err(
              acpError('acp_write_failed', `writing to the agent failed: ${describeError(r.error)}`, {
                cause: r.error,
              }),
            );
      } catch (e) {
        return err(
          acpError('acp_write_failed', `writing to the agent failed: ${e instanceof Error ? e.message : String(e)}`),
        );
      }
    });
    this.writeChain = p;
    return p;
  }

  private line(bytes: Uint8Array): void {
    if (isBlank(bytes)) return;
    const seq = this.seq++;
    const live = seq > this.replayThrough;
    const { text, lossy } = decodeLine(bytes);
    if (text === null) {
      if (live)
        this.problem({ code: 'acp_invalid_utf8', message: 'a line from the agent is not UTF-8', raw: lossy, seq });
      return;
    }
    const c = classifyLine(text);
    if (!c.ok) {
      if (live) this.problem({ code: c.code, message: c.message, raw: text, seq });
      return;
    }
    const ctx: LineContext = { seq, during: this.waiting?.method ?? null };
    if (live) this.hook(() => this.opts.handler.onMessage?.(text, c.message, ctx));
    this.dispatch(c.message, text, ctx, live);
  }

  private dispatch(m: AcpMessage, raw: string, ctx: LineContext, live: boolean): void {
    switch (m.kind) {
      case 'result':
      case 'error':
        return this.reply(m, raw, ctx, live);
      case 'notification': {
        if (m.method !== 'session/update') return;
        const n = zSessionNotification.safeParse(m.params);
        if (!n.success) {
          if (live)
            this.problem({
              code: 'acp_invalid_message',
              message: `session/update: ${n.error.message}`,
              raw,
              seq: ctx.seq,
            });
          return;
        }
        if (live) this.hook(() => this.opts.handler.onNotification?.(n.data, ctx));
        return;
      }
      case 'request':
        return this.request(m, raw, ctx, live);
    }
  }

  private reply(
    m: Extract<AcpMessage, { kind: 'result' | 'error' }>,
    raw: string,
    ctx: LineContext,
    live: boolean,
  ): void {
    const w = this.waiting;
    if (!w || m.id !== w.id) {
      if (live)
        this.problem({
          code: 'acp_unexpected_response',
          message: `a reply to id ${JSON.stringify(m.id)}, which no request awaits`,
          raw,
          seq: ctx.seq,
        });
      return;
    }
    this.waiting = null;
    if (w.method === 'session/prompt') this.withdrawPermissions(live, ctx.seq);
    if (m.kind === 'error') {
      w.resolve(
        err(acpError('acp_rpc_error', `${w.method} failed: ${m.error.message} (${m.error.code})`, { rpc: m.error })),
      );
      return;
    }
    if (w.nullAsEmpty && m.result === null) {
      w.resolve(ok({}));
      return;
    }
    const r = w.schema.safeParse(m.result);
    if (r.success && w.method === 'session/prompt') {
      // Usage is not part of the stable reply schema (which drops it); a malformed one is left out, not fatal.
      const usage = zPromptUsage.safeParse((m.result as { usage?: unknown } | null)?.usage);
      if (usage.success) {
        w.resolve(ok({ ...(r.data as object), usage: usage.data }));
        return;
      }
    }
    w.resolve(
      r.success
        ? ok(r.data)
        : err(
            acpError(
              'acp_invalid_response',
              `${w.method}: the agent's result does not match the ACP schema: ${r.error.message}`,
            ),
          ),
    );
  }

  private request(m: Extract<AcpMessage, { kind: 'request' }>, raw: string, ctx: LineContext, live: boolean): void {
    if (m.method !== 'session/request_permission') {
      // Only live lines are answered: a replayed one was answered by the client that saw it first.
      if (!live) return;
      this.problem({
        code: 'acp_request_refused',
        message: `refused ${m.method}: this client offers no such capability`,
        raw,
        seq: ctx.seq,
      });
      void this.send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } });
      return;
    }
    const p = zRequestPermissionRequest.safeParse(m.params);
    if (!p.success) {
      if (!live) return;
      this.problem({
        code: 'acp_invalid_message',
        message: `session/request_permission: ${p.error.message}`,
        raw,
        seq: ctx.seq,
      });
      void this.send({ jsonrpc: '2.0', id: m.id, error: { code: -32602, message: 'Invalid params' } });
      return;
    }
    const key = keyOf(m.id);
    if (key === this.restoredPermission) {
      // The request the engine already holds (its deadline keeps running): fill in the params, ask nobody again.
      const h = this.held.get(key);
      if (h) h.params = p.data;
      return;
    }
    // A replayed request that is not the restored one was answered before the drop.
    if (!live) return;
    const handler = this.opts.handler.onPermissionRequest;
    if (!handler) {
      void this.send({ jsonrpc: '2.0', id: m.id, result: { outcome: { outcome: 'cancelled' } } });
      return;
    }
    this.held.set(key, { id: m.id, params: p.data });
    this.hook(() => handler.call(this.opts.handler, { id: m.id, params: p.data }, ctx));
  }

  private withdrawPermissions(live: boolean, seq: number): void {
    for (const h of this.held.values()) {
      if (live) {
        this.problem({
          code: 'acp_permission_withdrawn',
          message: `permission request ${JSON.stringify(h.id)} was still unanswered when the prompt ended`,
          seq,
        });
      }
    }
    this.held.clear();
    this.restoredPermission = null;
  }

  private problem(p: AcpProblem): void {
    this.opts.logger.debug({ code: p.code, seq: p.seq }, p.message);
    this.hook(() => this.opts.handler.onProblem?.(p));
  }

  private hook(f: () => void): void {
    try {
      f();
    } catch (e) {
      // An engine bug must not break the byte stream for the lines that follow.
      this.opts.logger.error({ err: e }, 'ACP client hook threw');
    }
  }
}
