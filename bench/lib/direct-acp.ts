/**
 * The floor for a demo-agent turn: the same agent process driven over its own stdio with raw
 * NDJSON JSON-RPC, no sandbox, no server, no store.
 */
import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROTOCOL_VERSION } from '@agentclientprotocol/sdk';
import { localDemoAgentArgv } from '../../src/acp/index.ts';
import { exited } from './rig.ts';

interface Message {
  readonly id?: number;
  readonly method?: string;
  readonly params?: {
    readonly update?: { readonly sessionUpdate?: string; readonly content?: { readonly text?: string } };
  };
  readonly result?: unknown;
  readonly error?: unknown;
}

export class DirectAgent {
  readonly #child: ChildProcessByStdio<Writable, Readable, null>;
  readonly #home: string;
  #nextId = 1;
  #buf = '';
  #replies = new Map<number, (m: Message) => void>();
  /** Called for every agent_message_chunk notification, with its text. */
  onChunk: (text: string) => void = () => {};

  private constructor() {
    this.#home = mkdtempSync(join(tmpdir(), 'fountain-bench-acp-'));
    const [cmd, ...args] = localDemoAgentArgv();
    this.#child = spawn(cmd!, args, { env: { ...process.env, HOME: this.#home }, stdio: ['pipe', 'pipe', 'ignore'] });
    this.#child.stdout.setEncoding('utf8');
    this.#child.stdout.on('data', (text: string) => this.#lines(text));
  }

  /** The agent's process id. */
  get pid(): number {
    return this.#child.pid!;
  }

  /** Spawns the agent and runs initialize + session/new; resolves with the session id. */
  static async start(): Promise<{ agent: DirectAgent; sessionId: string }> {
    const agent = new DirectAgent();
    await agent.request('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    });
    const s = (await agent.request('session/new', { cwd: agent.#home, mcpServers: [] })) as { sessionId: string };
    return { agent, sessionId: s.sessionId };
  }

  request(method: string, params: unknown): Promise<unknown> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#replies.set(id, (m) =>
        m.error ? reject(new Error(`${method}: ${JSON.stringify(m.error)}`)) : resolve(m.result),
      );
      this.#child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  }

  prompt(sessionId: string, text: string): Promise<unknown> {
    return this.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] });
  }

  async stop(): Promise<void> {
    this.#child.stdin.end();
    const t = setTimeout(() => this.#child.kill('SIGKILL'), 5000);
    await exited(this.#child);
    clearTimeout(t);
    rmSync(this.#home, { recursive: true, force: true });
  }

  #lines(text: string): void {
    this.#buf += text;
    let nl: number;
    while ((nl = this.#buf.indexOf('\n')) >= 0) {
      const line = this.#buf.slice(0, nl);
      this.#buf = this.#buf.slice(nl + 1);
      if (!line.trim()) continue;
      const m = JSON.parse(line) as Message;
      if (m.method === 'session/update' && m.params?.update?.sessionUpdate === 'agent_message_chunk')
        this.onChunk(m.params.update.content?.text ?? '');
      if (m.id !== undefined && m.method === undefined) {
        this.#replies.get(m.id)?.(m);
        this.#replies.delete(m.id);
      }
    }
  }
}
