/**
 * One ACP agent process in a sandbox: spawned detachable with stdin held open and tagged with its
 * conversation id, its stdout fed to an AcpClient, its stderr and exit reported to the owner.
 */
import type { Logger } from 'pino';
import {
  AcpClient,
  type AcpClientHandler,
  type AcpError,
  type AttachOptions as AcpAttachOptions,
} from '../../acp/index.ts';
import type { PromptResponse } from '@agentclientprotocol/sdk';
import type { Command, EnvPairs, Handle, SandboxAdapter, SandboxError, StreamFrame } from '../../sandbox/index.ts';
import { describeError } from '../../sandbox/index.ts';

/**
 * The tag that names the conversation in the process's command line, where list_sessions shows it
 * (an environment variable would not be visible there). The agent runs as
 * `sh -c 'exec "$@"' fountain-conv-<id> <argv...>`: `$0` carries the tag and exec drops the shell.
 */
export const conversationTag = (conversationId: string): string => `fountain-conv-${conversationId}`;

export function taggedArgv(conversationId: string, argv: readonly string[]): { cmd: string; args: string[] } {
  return { cmd: 'sh', args: ['-c', 'exec "$@"', conversationTag(conversationId), ...argv] };
}

export interface AgentProcessEvents {
  readonly acp: AcpClientHandler;
  /** `ordinal`: the chunk's index among this command's stderr chunks since byte zero (stable across replays). */
  onStderr(text: string, ordinal: number): void;
  /** The process ended (exit code) or its stream broke (`error` set); not called after stop() or release(). */
  onEnd(reason: string, error?: SandboxError): void;
}

/** The hooks, or a function building them for the process (when they need to know which process speaks). */
export type EventsFor = AgentProcessEvents | ((proc: AgentProcess) => AgentProcessEvents);

/** Re-attaching to a running agent process whose prompt was sent by an earlier client (recovery). */
export interface ReattachSpec {
  readonly sessionId: string;
  readonly acp: AcpAttachOptions;
}

export interface LaunchSpec {
  readonly conversationId: string;
  readonly argv: readonly string[];
  readonly env: EnvPairs;
  readonly dir: string;
  /** The JSON-RPC id to start numbering at (ids are consecutive per process). */
  readonly firstRequestId?: number;
}

export class AgentProcess {
  readonly client: AcpClient;
  #command: Command | null = null;
  #stopped = false;
  #ended = false;
  #stderrChunks = 0;

  private readonly events: AgentProcessEvents;

  private constructor(
    private readonly adapter: SandboxAdapter,
    private readonly log: Logger,
    events: EventsFor,
    firstRequestId: number,
  ) {
    this.events = typeof events === 'function' ? events(this) : events;
    this.client = new AcpClient({
      write: (bytes, writeId) => {
        const cmd = this.#command;
        if (!cmd) return Promise.resolve({ ok: false, error: { code: 'command_exited' } });
        return this.adapter.processes.writeStdin(cmd, bytes, writeId === undefined ? {} : { writeId });
      },
      handler: this.events.acp,
      logger: log,
      clientInfo: { name: 'fountain', version: '0' },
      firstRequestId,
    });
  }

  get alive(): boolean {
    return !this.#ended && !this.#stopped;
  }

  get command(): Command | null {
    return this.#command;
  }

  /** Whether a request written again under its write id reaches the agent once (even after the connection dropped). */
  get repeatsWritesOnce(): boolean {
    const cmd = this.#command;
    return cmd !== null && this.adapter.processes.repeatsStdinOnce?.(cmd) === true;
  }

  /** The runner session id of the process (for list_sessions and re-attach), when the provider has one. */
  static async launch(
    adapter: SandboxAdapter,
    handle: Handle,
    spec: LaunchSpec,
    events: EventsFor,
    log: Logger,
  ): Promise<{ ok: true; value: AgentProcess } | { ok: false; error: string }> {
    const proc = new AgentProcess(adapter, log, events, spec.firstRequestId ?? 0);
    const { cmd, args } = taggedArgv(spec.conversationId, spec.argv);
    const r = await adapter.processes.spawn(handle, cmd, args, {
      owner: (f) => proc.#frame(f),
      env: spec.env,
      dir: spec.dir,
      stdin: true,
      detachable: true,
    });
    if (!r.ok) return { ok: false, error: `could not start the agent: ${describeError(r.error)}` };
    proc.#command = r.value;
    return { ok: true, value: proc };
  }

  /**
   * Takes over an agent process that runs on after a dropped connection: the client continues the sent
   * prompt over the replayed journal (attach mode) and `prompt` resolves with its reply.
   */
  static async reattach(
    adapter: SandboxAdapter,
    handle: Handle,
    spec: ReattachSpec,
    events: EventsFor,
    log: Logger,
  ): Promise<
    | {
        ok: true;
        value: {
          proc: AgentProcess;
          prompt: Promise<{ ok: true; value: PromptResponse } | { ok: false; error: AcpError }>;
        };
      }
    | { ok: false; error: SandboxError | AcpError }
  > {
    const proc = new AgentProcess(adapter, log, events, 0);
    // Before the attach: the replay may reach the owner before the attach call returns.
    const attached = proc.client.attachPrompt(spec.acp);
    if (!attached.ok) return attached;
    const r = await adapter.processes.attach(handle, spec.sessionId, { owner: (f) => proc.#frame(f), stdin: true });
    if (!r.ok) {
      proc.#stopped = true;
      proc.client.close('the attach failed');
      return r;
    }
    proc.#command = r.value;
    return { ok: true, value: { proc, prompt: attached.value.done } };
  }

  /**
   * Lets go of the process without ending it (recovery, server shutdown): the local subscription and
   * client close; the remote command keeps running and journaling for a later reattach.
   */
  async release(reason: string): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const cmd = this.#command;
    if (cmd) await this.adapter.processes.stopCommand(cmd);
    this.client.close(reason);
  }

  /** Closes stdin (agents exit on EOF) and drops the local subscription. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const cmd = this.#command;
    if (cmd) {
      await this.adapter.processes.closeStdin(cmd);
      await this.adapter.processes.stopCommand(cmd);
    }
    this.client.close('the agent process was stopped');
  }

  #frame(f: StreamFrame): void {
    switch (f.type) {
      case 'stdout':
        this.client.feed(f.data);
        return;
      case 'stderr': {
        const ordinal = this.#stderrChunks++;
        if (!this.#stopped) this.events.onStderr(Buffer.from(f.data).toString('utf8'), ordinal);
        return;
      }
      case 'exit':
      case 'error': {
        const reason =
          f.type === 'exit'
            ? `the agent exited with code ${f.code}`
            : `sandbox connection lost: ${describeError(f.error)}`;
        this.#ended = true;
        // The owner hears first, so a recovery can disown the prompt before the client fails it.
        if (!this.#stopped) this.events.onEnd(reason, f.type === 'error' ? f.error : undefined);
        else this.log.debug({ reason }, 'stopped agent process ended');
        this.client.endOfInput(reason);
      }
    }
  }
}
