/**
 * Live smoke of the Daytona adapter against a real organisation (rung 2 of the verification ladder).
 * Runs only when DAYTONA_API_KEY is set; never in CI. Usage: DAYTONA_API_KEY=... npx tsx scripts/smoke/daytona.ts
 */
import { randomBytes } from 'node:crypto';
import { DaytonaAdapter, daytonaOptionsFromEnv } from '../../src/providers/daytona/index.ts';
import type { Command, Handle, SandboxResult, StreamFrame } from '../../src/sandbox/index.ts';
import { describeError } from '../../src/sandbox/index.ts';

const opts = daytonaOptionsFromEnv(process.env);
if (!opts.ok) {
  console.log(`skipped: ${opts.error.message}`);
  process.exit(0);
}
const adapter = new DaytonaAdapter(opts.value);
const name = `fountain-smoke000-${randomBytes(4).toString('hex')}`;
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

const STAY =
  'echo ready; while :; do c=$(dd bs=65536 count=1 2>/dev/null); [ -z "$c" ] && exit 0; printf "%s\\n" "$c"; done';

async function main(): Promise<void> {
  let h: Handle = must('create', await adapter.lifecycle.create(name));
  try {
    const again = must('create again adopts (409)', await adapter.lifecycle.create(name));
    check('adopted the same name', again.name === name);
    const info = must('get', await adapter.lifecycle.get(h));
    check('get says running', info.status === 'running', JSON.stringify(info));
    const missing = await adapter.lifecycle.get(adapter.buildHandle(`${name}-missing`));
    check('get on a missing name is not_found', !missing.ok && missing.error.code === 'not_found');
    const names = must('list_all_names', await adapter.lifecycle.listAllNames());
    check('list contains the sandbox', names.includes(name));

    const ex = must('exec', await adapter.processes.exec(h, 'sh', ['-c', 'echo smoke-ok; exit 3']));
    check(
      'exec output and real exit code',
      Buffer.from(ex.output).toString().includes('smoke-ok') && ex.exitCode === 3,
      JSON.stringify(ex),
    );
    if (process.env.SMOKE_SKIP_LONG !== '1') {
      // Issue 19 item 5: /process/execute answers only when the command ends; fetch's default gave
      // up waiting for headers at 300 s. Takes five and a half minutes (SMOKE_SKIP_LONG=1 skips it).
      const long = await adapter.processes.exec(h, 'sh', ['-c', 'sleep 330; echo long-done'], { timeoutMs: 400_000 });
      check(
        'an exec longer than 300 s returns its result',
        long.ok && Buffer.from(long.value.output).toString() === 'long-done\n',
        JSON.stringify(long.ok ? long.value : long.error),
      );
    }

    const f = new Frames();
    const c: Command = must(
      'spawn',
      await adapter.processes.spawn(h, 'sh', ['-c', STAY], { owner: f.sink, stdin: true }),
    );
    must('write_stdin immediately after spawn', await adapter.processes.writeStdin(c, Buffer.from('first')));
    await f.until(() => f.text().includes('first'), 'first echo');
    must('write_stdin again', await adapter.processes.writeStdin(c, Buffer.from('second')));
    await f.until(() => f.text().includes('second'), 'second echo (no EOF after the first write)');
    const sessions = must('list_sessions', await adapter.processes.listSessions(h));
    const a = new Frames();
    const at = must('attach', await adapter.processes.attach(h, sessions[0]!.id, { owner: a.sink, stdin: true }));
    await a.until(() => a.text().includes('second'), 'attach replay');
    check('attach replays from byte zero', a.text().startsWith('ready\n'), JSON.stringify(a.text()));
    must('close_stdin', await adapter.processes.closeStdin(c));
    await f.until(() => f.terminal() !== undefined, 'exit after EOF');
    check('exit 0 after a real EOF', JSON.stringify(f.terminal()).includes('"code":0'), JSON.stringify(f.terminal()));
    const late = await adapter.processes.writeStdin(c, Buffer.from('late'));
    check('write after exit is command_exited', !late.ok && late.error.code === 'command_exited');
    must('stop_command (attacher)', await adapter.processes.stopCommand(at));

    must(
      'write_file',
      await adapter.files.writeFile(h, '/home/sprite/smoke/memory.txt', Buffer.from('kept'), { mode: 0o600 }),
    );
    must('suspend', await adapter.lifecycle.suspend(h));
    const parked = must('get while suspended', await adapter.lifecycle.get(h));
    check('status suspended', parked.status === 'suspended', JSON.stringify(parked));
    h = must('resume', await adapter.lifecycle.resume(h));
    const cat = must(
      'read the file after resume',
      await adapter.processes.exec(h, 'cat', ['/home/sprite/smoke/memory.txt']),
    );
    check('the disk survived', Buffer.from(cat.output).toString() === 'kept');
    const after = must('list_sessions after resume', await adapter.processes.listSessions(h));
    check('sessions did not survive the stop', after.length === 0, JSON.stringify(after));

    const deny = await adapter.network.applyNetworkPolicy(h, { allow: [] });
    if (!deny.ok && deny.error.code === 'denied')
      console.log(`note egress is tier-gated here: ${describeError(deny.error)}`);
    else {
      must('egress deny all', deny);
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
      // Issue 19 item 6: the domain list goes alone (block-all false with no CIDR list reopens all
      // egress on the public runner). Unverified against the production runner until this passes.
      const other = must(
        'curl another host',
        await adapter.processes.exec(h, 'sh', ['-c', 'curl -sS -m 5 https://example.org >/dev/null'], {
          timeoutMs: 20_000,
        }),
      );
      check('a domain allow-list does not fail open: example.org stays blocked', other.exitCode !== 0);
    }
  } finally {
    must('destroy', await adapter.lifecycle.destroy(h));
    const gone = await adapter.lifecycle.get(h);
    check('gone after destroy', !gone.ok && gone.error.code === 'not_found');
  }
}

main().then(
  () => process.exit(failures === 0 ? 0 : 1),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exit(1);
  },
);
