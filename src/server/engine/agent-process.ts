/**
 * One ACP agent process in a sandbox: spawned detachable with stdin held open and tagged with its
 * conversation id, its stdout fed to an AcpClient, its stderr and exit reported to the owner.
 */
import type { Logger } from 'pino';
import { AcpClient, type AcpClientHandler } from '../../acp/index.ts';
import type { Command, EnvPairs, Handle, SandboxAdapter, StreamFrame } from '../../sandbox/index.ts';
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
  onStderr(text: string): void;
  /** The process ended (exit code) or its stream broke (error); not called after stop(). */
  onEnd(reason: string): void;
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

  private constructor(
    private readonly adapter: SandboxAdapter,
    private readonly log: Logger,
    events: AgentProcessEvents,
    firstRequestId: number,
  ) {
    this.client = new AcpClient({
      write: (bytes) => {
        const cmd = this.#command;
        if (!cmd) return Promise.resolve({ ok: false, error: { code: 'command_exited' } });
        return this.adapter.writeStdin(cmd, bytes);
      },
      handler: events.acp,
      logger: log,
      clientInfo: { name: 'fountain', version: '0' },
      firstRequestId,
    });
    this.events = events;
  }

  private readonly events: AgentProcessEvents;

  get alive(): boolean {
    return !this.#ended && !this.#stopped;
  }

  get command(): Command | null {
    return this.#command;
  }

  /** The runner session id of the process (for list_sessions and re-attach), when the provider has one. */
  static async launch(
    adapter: SandboxAdapter,
    handle: Handle,
    spec: LaunchSpec,
    events: AgentProcessEvents,
    log: Logger,
  ): Promise<{ ok: true; value: AgentProcess } | { ok: false; error: string }> {
    const proc = new AgentProcess(adapter, log, events, spec.firstRequestId ?? 0);
    const { cmd, args } = taggedArgv(spec.conversationId, spec.argv);
    const r = await adapter.spawn(handle, cmd, args, {
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

  /** Closes stdin (agents exit on EOF) and drops the local subscription. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const cmd = this.#command;
    if (cmd) {
      await this.adapter.closeStdin(cmd);
      await this.adapter.stopCommand(cmd);
    }
    this.client.close('the agent process was stopped');
  }

  #frame(f: StreamFrame): void {
    switch (f.type) {
      case 'stdout':
        this.client.feed(f.data);
        return;
      case 'stderr':
        if (!this.#stopped) this.events.onStderr(Buffer.from(f.data).toString('utf8'));
        return;
      case 'exit':
      case 'error': {
        const reason = f.type === 'exit' ? `the agent exited with code ${f.code}` : `sprite connection lost: ${describeError(f.error)}`;
        this.#ended = true;
        this.client.endOfInput(reason);
        if (!this.#stopped) this.events.onEnd(reason);
        else this.log.debug({ reason }, 'stopped agent process ended');
      }
    }
  }
}
