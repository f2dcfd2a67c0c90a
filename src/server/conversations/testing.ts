/**
 * Test support for the engine: a real `fountain runner` child process dialing a loopback hub,
 * and polling helpers over the event log. Used only by *.test.ts files.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { EventRow } from '../store/conversation-schema.ts';
import type { EngineDb } from '../store/engine-db.ts';
import { pageEvents } from './events-store.ts';

export const FOUNTAIN_BIN = fileURLToPath(new URL('../../../bin/fountain.js', import.meta.url));

export interface RunnerChild {
  readonly child: ChildProcess;
  stderr(): string;
  /** SIGTERM, then waits for the exit (SIGKILL after a grace). */
  stop(): Promise<void>;
}

/** Starts `fountain runner --name <name> --root <root>` against `baseUrl` with `apiKey`. */
export function startRunnerChild(opts: {
  name: string;
  root: string;
  baseUrl: string;
  apiKey: string;
  home: string;
  /** More flags, e.g. the hidden `--reconnect-base-ms` that shortens the reconnect backoff. */
  extraArgs?: readonly string[];
  /** More environment for the daemon (and so for its sandboxes), e.g. a persistent npm cache. */
  env?: Readonly<Record<string, string>>;
  /** The daemon's log level; default warn. */
  logLevel?: string;
  /** A command the daemon runs under (it must exec its arguments), e.g. `unshare` for a private view of /etc. */
  wrap?: readonly string[];
}): RunnerChild {
  const args = [
    FOUNTAIN_BIN,
    'runner',
    '--name',
    opts.name,
    '--root',
    opts.root,
    '--log-level',
    opts.logLevel ?? 'warn',
    ...(opts.extraArgs ?? []),
  ];
  const [file, ...pre] = opts.wrap && opts.wrap.length > 0 ? [...opts.wrap, process.execPath] : [process.execPath];
  const child = spawn(file!, [...pre, ...args], {
    env: {
      ...process.env,
      FOUNTAIN_API_KEY: opts.apiKey,
      FOUNTAIN_BASE_URL: opts.baseUrl,
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_HOME: opts.home,
      FOUNTAIN_LOG_FORMAT: 'json',
      ...opts.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((r) => {
    if (child.exitCode !== null || child.signalCode !== null) r();
    else child.once('exit', () => r());
  });
  return {
    child,
    stderr: () => err,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 8000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** Polls until `check` yields a truthy value; the timeout is only a hang guard. */
export async function until<T>(check: () => T | Promise<T>, what: string, timeoutMs = 90_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function allEvents(db: EngineDb, conversationId: string): Promise<EventRow[]> {
  const out: EventRow[] = [];
  for (let after = 0; ; ) {
    const page = await pageEvents(db, conversationId, { after, limit: 1000 });
    out.push(...page);
    if (page.length < 1000) return out;
    after = page[page.length - 1]!.id;
  }
}

/** The first stage event `stage/state` after event id `after`. */
export async function waitForStage(
  db: EngineDb,
  conversationId: string,
  stage: string,
  state: string,
  after = 0,
): Promise<EventRow> {
  return until(
    async () =>
      (await allEvents(db, conversationId)).find((e) => e.id > after && e.stage === stage && e.state === state),
    `${stage}/${state}`,
  );
}

/** The agent's answer text in a turn: its agent_message_chunk texts joined. */
export function answerText(events: readonly EventRow[], turnId: string): string {
  let text = '';
  for (const e of events) {
    if (e.turnId !== turnId || e.stream !== 'acp') continue;
    const msg = JSON.parse(e.data) as {
      method?: string;
      params?: { update?: { sessionUpdate?: string; content?: { type?: string; text?: string } } };
    };
    const u = msg.params?.update;
    if (msg.method === 'session/update' && u?.sessionUpdate === 'agent_message_chunk' && u.content?.type === 'text')
      text += u.content.text ?? '';
  }
  return text;
}
