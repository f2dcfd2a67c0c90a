/**
 * Live smoke of the E2B adapter against a real account (rung 2 of the verification ladder).
 * Runs only when E2B_API_KEY is set; never in CI. Usage: E2B_API_KEY=... npx tsx scripts/smoke/e2b.ts
 */
import { randomBytes } from 'node:crypto';
import { E2BAdapter, optionsFromEnv } from '../../src/providers/e2b/index.ts';
import type { Command, Handle, SandboxResult, StreamFrame } from '../../src/sandbox/index.ts';
import { describeError } from '../../src/sandbox/index.ts';

const opts = optionsFromEnv(process.env);
if (!opts) {
  console.log('skipped: E2B_API_KEY is not set');
  process.exit(0);
}
const adapter = new E2BAdapter(opts);
const name = `fountain-smoke000-${randomBytes(4).toString('hex')}`;
const home = opts.user ? `/home/${opts.user}` : '/home/user';
let failures = 0;

function must<T>(what: string, r: SandboxResult<T>): T {
  if (!r.ok) throw new Error(`${what}: ${describeError(r.error)}`);
  console.log(`ok   ${what}`);
  return r.value;
}
function check(what: string, cond: boolean, detail = ''): void {
  if (cond) console.log(`ok   ${what}`);
  else {
    failures++;
    console.log(`FAIL ${what} ${detail}`);
  }
}

class Frames {
  readonly all: StreamFrame[] = [];
  readonly sink = (f: StreamFrame) => void this.all.push(f);
  text = () => Buffer.concat(this.all.flatMap((f) => (f.type === 'stdout' ? [Buffer.from(f.data)] : []))).toString();
  async until(pred: () => boolean, what: string, ms = 60_000): Promise<void> {
    const end = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > end) throw new Error(`timed out: ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  terminal = () => this.all.find((f) => f.type === 'exit' || f.type === 'error');
}

async function main(): Promise<void> {
  let h: Handle = must('create', await adapter.lifecycle.create(name));
  try {
    const again = must('create again adopts (metadata lookup)', await adapter.lifecycle.create(name));
    const id = (x: Handle) => (x.private?.reveal() as { sandboxId?: string } | undefined)?.sandboxId;
    check('adopted the same sandbox', id(again) === id(h), `${id(again)} vs ${id(h)}`);
    const info = must('get', await adapter.lifecycle.get(h));
    check('get says running', info.status === 'running', JSON.stringify(info));
    const missing = await adapter.lifecycle.get(adapter.buildHandle(`${name}-missing`));
    check('get on a missing name is not_found', !missing.ok && missing.error.code === 'not_found');
    const names = must('list_all_names', await adapter.lifecycle.listAllNames());
    check('list contains the sandbox', names.includes(name));

    const zero = must('exec exit 0', await adapter.processes.exec(h, 'true', []));
    check('an omitted exitCode reads as 0', zero.exitCode === 0);
    const ex = must('exec', await adapter.processes.exec(h, 'sh', ['-c', 'echo smoke-ok; exit 3']));
    check(
      'exec output and real exit code',
      Buffer.from(ex.output).toString().includes('smoke-ok') && ex.exitCode === 3,
      JSON.stringify(ex),
    );
    // Issue 19 item 1: without a limit no Connect-Timeout-Ms goes out (a 0 is a passed deadline in
    // connect-go): the command runs once, its real result comes back, it is not reported as a timeout.
    const once = must(
      'exec without a timeout (no 0 deadline)',
      await adapter.processes.exec(h, 'sh', ['-c', 'echo x >> "$HOME/smoke-once"; sleep 2; cat "$HOME/smoke-once"']),
    );
    check(
      'it ran exactly once and finished',
      Buffer.from(once.output).toString() === 'x\n' && once.exitCode === 0,
      JSON.stringify(Buffer.from(once.output).toString()),
    );
    const slow = await adapter.processes.exec(h, 'sleep', ['30'], { timeoutMs: 1000 });
    check('an exec timeout is enforced by envd', !slow.ok && slow.error.detail === 'timeout', JSON.stringify(slow));

    const f = new Frames();
    const c: Command = must(
      'spawn',
      await adapter.processes.spawn(h, 'sh', ['-c', 'echo ready; exec cat'], { owner: f.sink, stdin: true }),
    );
    must(
      'write_stdin immediately after spawn (the #693 race)',
      await adapter.processes.writeStdin(c, Buffer.from('first\n')),
    );
    await f.until(() => f.text().includes('first'), 'first echo');
    must('write_stdin again', await adapter.processes.writeStdin(c, Buffer.from('second\n')));
    await f.until(() => f.text().includes('second'), 'second echo (no EOF after the first write)');
    const sessions = must('list_sessions', await adapter.processes.listSessions(h));
    check('one session listed', sessions.length === 1, JSON.stringify(sessions));
    must('stop_command (detach the spawner)', await adapter.processes.stopCommand(c));
    const a = new Frames();
    const at = must('attach', await adapter.processes.attach(h, sessions[0]!.id, { owner: a.sink, stdin: true }));
    await a.until(() => a.text().includes('second'), 'attach replay');
    check('attach replays from byte zero', a.text().startsWith('ready\nfirst\nsecond\n'), JSON.stringify(a.text()));
    must('write_stdin through the attacher', await adapter.processes.writeStdin(at, Buffer.from('third\n')));
    await a.until(() => a.text().includes('third'), 'tail after replay');
    must('close_stdin', await adapter.processes.closeStdin(at));
    await a.until(() => a.terminal() !== undefined, 'exit after EOF');
    check('exit 0 after a real EOF', JSON.stringify(a.terminal()).includes('"code":0'), JSON.stringify(a.terminal()));
    const late = await adapter.processes.writeStdin(at, Buffer.from('late'));
    check('write after exit is command_exited', !late.ok && late.error.code === 'command_exited');

    must(
      'write_file',
      await adapter.files.writeFile(h, `${home}/smoke/memory.txt`, Buffer.from('kept'), { mode: 0o600 }),
    );
    const live = new Frames();
    must(
      'spawn a process to survive the pause',
      await adapter.processes.spawn(h, 'sh', ['-c', 'echo before-pause; exec cat'], { owner: live.sink, stdin: true }),
    );
    await live.until(() => live.text().includes('before-pause'), 'output before pause');
    must('suspend', await adapter.lifecycle.suspend(h));
    await live.until(() => live.terminal() !== undefined, 'the stream drops at pause');
    check(
      'the dropped stream is closed_before_exit',
      JSON.stringify(live.terminal()).includes('closed_before_exit'),
      JSON.stringify(live.terminal()),
    );
    const parked = must('get while suspended', await adapter.lifecycle.get(h));
    check('status suspended', parked.status === 'suspended', JSON.stringify(parked));
    h = must('resume', await adapter.lifecycle.resume(h));
    check('same sandbox id after resume', id(h) === id(again));
    const cat = must(
      'read the file after resume',
      await adapter.processes.exec(h, 'cat', [`${home}/smoke/memory.txt`]),
    );
    check('the disk survived', Buffer.from(cat.output).toString() === 'kept');
    const after = must('list_sessions after resume', await adapter.processes.listSessions(h));
    check('the process survived the pause (memory kept)', after.length === 1, JSON.stringify(after));
    if (after[0]) {
      const r = new Frames();
      const ra = must(
        'attach after resume',
        await adapter.processes.attach(h, after[0].id, { owner: r.sink, stdin: true }),
      );
      await r.until(() => r.text().includes('before-pause'), 'replay after resume');
      must('close_stdin after resume', await adapter.processes.closeStdin(ra));
      await r.until(() => r.terminal() !== undefined, 'exit after resume');
    }

    must('egress deny all', await adapter.network.applyNetworkPolicy(h, { allow: [] }));
    const blocked = must(
      'curl while denied',
      await adapter.processes.exec(h, 'sh', ['-c', 'curl -sS -m 5 https://example.com >/dev/null'], {
        timeoutMs: 20_000,
      }),
    );
    check('deny-all blocks example.com', blocked.exitCode !== 0);
    must('egress allow example.com', await adapter.network.applyNetworkPolicy(h, { allow: ['example.com'] }));
    const allowed = must(
      'curl while allowed',
      await adapter.processes.exec(h, 'sh', ['-c', 'curl -sS -m 10 https://example.com >/dev/null'], {
        timeoutMs: 20_000,
      }),
    );
    check('allow list lets example.com through', allowed.exitCode === 0);
    const other = must(
      'curl another host',
      await adapter.processes.exec(h, 'sh', ['-c', 'curl -sS -m 5 https://example.org >/dev/null'], {
        timeoutMs: 20_000,
      }),
    );
    check('other hosts stay blocked', other.exitCode !== 0);
  } finally {
    must('destroy', await adapter.lifecycle.destroy(h));
    const gone = await adapter.lifecycle.get(h);
    check('gone after destroy', !gone.ok && gone.error.code === 'not_found');
    adapter.close();
  }
}

main().then(
  () => process.exit(failures === 0 ? 0 : 1),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  },
);
