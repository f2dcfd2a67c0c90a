/**
 * The CLI as a user meets it, as real child processes against a real server and runner: `chat` from a
 * pipe and from a terminal (util-linux `script` gives it a pseudo-terminal), listing, creating, help, logs.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { call } from './helpers/http.ts';
import { FOUNTAIN_BIN, RUNNER_NAME, startStack, until, type Stack } from './web/harness.ts';

const T = 60_000;

interface Run {
  readonly exited: Promise<number | null>;
  out(): string;
  err(): string;
  write(s: string): void;
  end(): void;
  kill(): void;
}

function start(cmd: string, args: string[], env: NodeJS.ProcessEnv): Run {
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return {
    exited,
    out: () => out,
    err: () => err,
    write: (s) => child.stdin.write(s),
    end: () => child.stdin.end(),
    kill: () => child.kill('SIGKILL'),
  };
}

/** The pieces of `fountain …` quoted for `sh -c`. */
const shellLine = (args: string[]): string =>
  [process.execPath, FOUNTAIN_BIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');

describe('fountain CLI', () => {
  let stack: Stack;
  let env: NodeJS.ProcessEnv;
  const fountain = (args: string[], input?: string): Run => {
    const r = start(process.execPath, [FOUNTAIN_BIN, ...args], env);
    if (input !== undefined) {
      r.write(input);
      r.end();
    }
    return r;
  };
  /** `fountain …` on a pseudo-terminal: stdin, stdout and stderr are a tty, Ctrl-C is the terminal's. */
  const onTerminal = (args: string[]): Run =>
    start('script', ['-q', '-e', '-c', `exec ${shellLine(args)}`, '/dev/null'], env);
  const api = (method: string, path: string, body?: unknown) => call(stack.url, stack.apiKey, method, path, body);

  before(async () => {
    stack = await startStack();
    await stack.startRunner();
    env = {
      FOUNTAIN_API_KEY: stack.apiKey,
      FOUNTAIN_BASE_URL: stack.url,
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_HOME: mkdtempSync(join(tmpdir(), 'fountain-cli-')),
      FOUNTAIN_LOG_FORMAT: 'json',
    };
    const made = await api('POST', '/api/agents', {
      name: 'demo',
      runtime: 'demo',
      model: 'fountain/demo',
      system: '',
      permission_policy: { default: 'ask' },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
  });
  after(async () => {
    await stack?.stop();
  });

  it('chat reads a pipe to the end and exits; a question left open is answered "reject" in words', {
    timeout: T,
  }, async () => {
    const r = fountain(['chat', 'demo'], 'run: echo never-runs\n');
    const code = await r.exited;
    assert.equal(code, 0, `${r.out()}\n${r.err()}`);
    assert.match(
      r.out(),
      /new conversation [0-9a-f-]{36} with demo \(each chat starts one; --continue picks up the latest\)/,
    );
    assert.match(r.out(), /permission requested/);
    assert.match(r.out(), /no more input: answered "Reject"/);
    // The card names the command (`$ echo never-runs`); its output never appears on a line of its own.
    assert.doesNotMatch(r.out(), /^never-runs$/m);
    const id = /new conversation ([0-9a-f-]{36})/.exec(r.out())![1]!;
    const turns = await api('GET', `/api/conversations/${id}/turns`);
    assert.equal(turns.body.data.length, 1);
    assert.equal(turns.body.data[0].status, 'completed', 'the turn ended instead of waiting out the ask timeout');
  });

  it('chat on an empty stdin (</dev/null, or blank lines) starts no conversation and no sandbox', {
    timeout: T,
  }, async () => {
    const count = async () => ((await api('GET', '/api/conversations')).body.data as unknown[]).length;
    const before = await count();
    const devNull = start('sh', ['-c', `${shellLine(['chat', 'demo'])} </dev/null`], env);
    assert.equal(await devNull.exited, 0, `${devNull.out()}\n${devNull.err()}`);
    assert.match(devNull.out(), /no message: no conversation started with demo/);
    const blank = fountain(['chat', 'demo'], '\n  \n');
    assert.equal(await blank.exited, 0, `${blank.out()}\n${blank.err()}`);
    assert.doesNotMatch(blank.out(), /new conversation/);
    // A --model the agent's runtime does not take is refused before any message is read.
    const wrongModel = fountain(['chat', 'demo', '--model', 'openai/gpt-5'], 'hello\n');
    assert.equal(await wrongModel.exited, 1, wrongModel.out());
    assert.match(wrongModel.err(), /--model openai\/gpt-5: provider must be fountain for runtime demo/);
    assert.equal(await count(), before, 'no conversation was created');
  });

  it('Ctrl-C of chat on a terminal prints the --conversation to come back with', { timeout: T }, async () => {
    // Before the first message there is nothing to come back to.
    const early = onTerminal(['chat', 'demo']);
    await until(() => /^> /m.test(early.out()), 'the prompt');
    early.write('\x03');
    assert.equal(await early.exited, 130, early.out());
    assert.match(early.out(), /no conversation was started/);

    const r = onTerminal(['chat', 'demo']);
    await until(() => /^> /m.test(r.out()), 'the prompt');
    r.write('hello\r');
    await until(() => /new conversation [0-9a-f-]{36}/.test(r.out()) && /You said: hello/.test(r.out()), 'the answer');
    await until(() => (r.out().match(/^> /gm) ?? []).length >= 2, 'the next prompt');
    const id = /new conversation ([0-9a-f-]{36})/.exec(r.out())![1]!;
    r.write('\x03');
    const code = await r.exited;
    assert.equal(code, 130, r.out());
    // The command as it works where the user is: this test runs inside the checkout (src/cli/invocation.ts).
    assert.ok(r.out().includes(`come back with: npx fountain chat demo --conversation ${id}`), r.out());
  });

  it('a re-attach shows a banner and the output it missed; --continue picks the latest conversation', {
    timeout: T,
  }, async () => {
    const first = fountain(['chat', 'demo', '--model', 'fountain/demo-cli', '-m', 'remember: the kettle is blue']);
    assert.equal(await first.exited, 0, first.err());
    assert.match(first.out(), /new conversation [0-9a-f-]{36} with demo on fountain\/demo-cli/);
    const id = /new conversation ([0-9a-f-]{36})/.exec(first.out())![1]!;
    assert.equal((await api('GET', `/api/conversations/${id}`)).body.data.model, 'fountain/demo-cli');
    // A message sent while no chat is attached (the web page, the API): its answer is what a re-attach missed.
    const sent = await api('POST', `/api/conversations/${id}/prompts`, { prompt: 'recall' });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await until(
      async () => (await api('GET', `/api/conversations/${id}/turns`)).body.data[1]?.status === 'completed',
      'the unattended turn',
    );

    const back = onTerminal(['chat', 'demo', '--conversation', id]);
    await until(() => /^> /m.test(back.out()), 'the prompt');
    assert.match(
      back.out(),
      new RegExp(`continuing conversation ${id} with demo · 2 turns · "(Demo: )?remember: the kettle is blue"`),
    );
    assert.match(back.out(), /the latest turn, in case you missed it:/);
    assert.match(back.out(), /the kettle is blue/);
    back.write('\x03');
    await back.exited;

    // A model is a new conversation's: continuing one on another is refused, not ignored.
    const moved = fountain(['chat', 'demo', '--continue', '--model', 'fountain/demo-else', '-m', 'recall']);
    assert.equal(await moved.exited, 1, moved.out());
    assert.match(moved.err(), new RegExp(`conversation ${id} runs on fountain/demo-cli`));
    const cont = fountain(['chat', 'demo', '--continue', '-m', 'recall']);
    assert.equal(await cont.exited, 0, cont.err());
    assert.match(cont.out(), new RegExp(`continuing conversation ${id} with demo`));
    assert.doesNotMatch(cont.out(), /new conversation/);
  });

  it('`agents` and `conversations` without a subcommand list; the list has AGENT and a TITLE', {
    timeout: T,
  }, async () => {
    const agents = fountain(['agents']);
    assert.equal(await agents.exited, 0, agents.err());
    assert.match(agents.out(), /^ID\s+NAME\s+RUNTIME/);
    assert.match(agents.out(), /\bdemo\b/);
    const convs = fountain(['conversations']);
    assert.equal(await convs.exited, 0, convs.err());
    const [header, ...rows] = convs.out().trimEnd().split('\n');
    assert.match(header!, /^ID\s+AGENT\s+STATUS\s+TURNS\s+TITLE/);
    assert.ok(
      rows.some((r) => /demo\s+\w+\s+\d+\s+(Demo: )?remember: the kettle is blue/.test(r)),
      convs.out(),
    );
    assert.ok(
      rows.every((r) => / demo /.test(r)),
      'every row names its agent',
    );
  });

  it('`agents create --runtime demo` needs no --model', { timeout: T }, async () => {
    const r = fountain(['agents', 'create', '--name', 'demo-two', '--runtime', 'demo']);
    assert.equal(await r.exited, 0, r.err());
    assert.match(r.out(), /created agent demo-two/);
    const other = fountain(['agents', 'create', '--name', 'claude-one', '--runtime', 'claude']);
    assert.equal(await other.exited, 1);
    assert.match(other.err(), /model/);
  });

  it('`agents create|update --runner` pins an agent to a runner by name; `--no-runner` unpins; an unknown runner is refused naming it', {
    timeout: T,
  }, async () => {
    const made = fountain(['agents', 'create', '--name', 'pinned', '--runtime', 'demo', '--runner', RUNNER_NAME]);
    assert.equal(await made.exited, 0, made.err());
    const runnerId = ((await api('GET', '/api/runners')).body.data as { id: string; name: string }[]).find(
      (r) => r.name === RUNNER_NAME,
    )!.id;
    const pinned = () =>
      api('GET', '/api/agents').then(
        (r) =>
          (r.body.data as { name: string; runner_id: string | null }[]).find((a) => a.name === 'pinned')!.runner_id,
      );
    assert.equal(await pinned(), runnerId);
    const listed = fountain(['agents', 'list']);
    assert.equal(await listed.exited, 0, listed.err());
    assert.match(listed.out(), new RegExp(`pinned\\s.*\\s${RUNNER_NAME}\\s*$`, 'm'));
    const unpin = fountain(['agents', 'update', 'pinned', '--no-runner']);
    assert.equal(await unpin.exited, 0, unpin.err());
    assert.match(unpin.out(), /updated agent pinned/);
    assert.equal(await pinned(), null);
    const repin = fountain(['agents', 'update', 'pinned', '--runner', RUNNER_NAME]);
    assert.equal(await repin.exited, 0, repin.err());
    assert.equal(await pinned(), runnerId);
    const unknown = fountain(['agents', 'update', 'pinned', '--runner', 'mars']);
    assert.equal(await unknown.exited, 1);
    assert.match(unknown.err(), /mars/);
    assert.equal(await pinned(), runnerId);
  });

  it('top-level help does not list the internal runner-guest', { timeout: T }, async () => {
    const r = fountain(['--help']);
    assert.equal(await r.exited, 0);
    assert.match(r.out(), /\bchat\b/);
    assert.doesNotMatch(r.out(), /runner-guest/);
  });

  it("the runner's JSON log on a non-terminal names each key once", { timeout: T }, async () => {
    const r = start(
      process.execPath,
      [FOUNTAIN_BIN, 'runner', '--name', 'log-check', '--root', mkdtempSync(join(tmpdir(), 'fountain-cli-root-'))],
      env,
    );
    await until(() => r.err().includes('runner: connected'), `the runner to connect (${r.err()})`);
    r.kill();
    await r.exited;
    const lines = r.err().trim().split('\n');
    assert.ok(lines.length >= 2);
    for (const line of lines) {
      // JSON.parse keeps the last of two equal keys, so count them in the text.
      assert.equal([...line.matchAll(/"name":/g)].length, 1, line);
    }
  });

  it('a prompt while the runner is away says which runner it waits for', { timeout: T }, async () => {
    const made = fountain(['chat', 'demo', '-m', 'hello']);
    assert.equal(await made.exited, 0, made.err());
    const id = /new conversation ([0-9a-f-]{36})/.exec(made.out())![1]!;
    await stack.stopRunner();
    try {
      const r = fountain(['chat', 'demo', '--conversation', id, '-m', 'hello again']);
      await until(() => /retrying in/.test(r.out()), `the retry line (${r.out()} ${r.err()})`);
      assert.match(r.out(), new RegExp(`the runner "${RUNNER_NAME}" is offline; retrying in \\d+ s`));
      r.kill();
      await r.exited;
    } finally {
      await stack.startRunner();
    }
  });
});
