import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CollectingOut, captureLogger, until } from '../../testing.ts';
import type { OpResult } from '../../backend.ts';
import { JOURNALS_DIR, openProcessBackend } from './index.ts';
import type { ProcessBackend } from './index.ts';
import { groupAlive } from './groups.ts';
import { OUTPUT_CHUNK, replayRuns } from './session.ts';

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
const unb64 = (s: string) => Buffer.from(s, 'base64').toString();
let nextId = 1;
const id = () => nextId++;

function value<T extends object>(r: OpResult<T>): T {
  if (!r.ok) assert.fail(`expected ok, got ${r.error.code}: ${r.error.detail}`);
  return r.value.result;
}
function code(r: OpResult<object>): string {
  assert.equal(r.ok, false, 'expected an error');
  return r.ok ? '' : r.error.code;
}

import { childEnv, TRUST_ENV_KEYS } from './env.ts';
describe('process backend', () => {
  let root: string;
  let backend: ProcessBackend;

  before(() => {
    root = join(realpathSync(mkdtempSync(join(tmpdir(), 'fountain-pb-'))), 'sandboxes');
    const opened = openProcessBackend({
      root,
      logger: captureLogger().logger,
      journalCapBytes: 64 * 1024,
      journalSegmentBytes: 8 * 1024,
      graceMs: { destroy: 1000, suspend: 1000, stopAll: 1000 },
    });
    assert.ok(opened.ok);
    backend = opened.value;
  });
  after(async () => {
    await backend.stopAll();
    rmSync(join(root, '..'), { recursive: true, force: true });
  });

  const create = async (name: string) => value(await backend.create({ id: id(), op: 'create', name }));
  const exec = async (name: string, cmd: string, args: string[] = [], extra: Record<string, unknown> = {}) => {
    const r = value(await backend.exec({ id: id(), op: 'exec', name, cmd, args, env: [], ...extra }));
    return { output: unb64(r.output), code: r.code };
  };
  const spawn = async (name: string, cmd: string, args: string[], out: CollectingOut, stdin = false) => {
    const reqId = id();
    const r = await backend.spawn(
      { id: reqId, op: 'spawn', name, cmd, args, env: [], stdin },
      { requestId: reqId, out },
    );
    assert.ok(r.ok, r.ok ? '' : r.error.detail);
    r.value.followUp?.();
    return r.value.result.session_id;
  };

  it('creates the root and sandboxes 0700, adopts, lists without dot-directories, and tracks suspension', async () => {
    assert.equal(statSync(root).mode & 0o777, 0o700);
    await create('alpha');
    await create('alpha');
    await create('beta');
    assert.equal(statSync(join(root, 'alpha')).mode & 0o777, 0o700);
    await exec('alpha', 'true');
    await spawn('alpha', 'true', [], new CollectingOut());
    assert.ok(existsSync(join(root, JOURNALS_DIR)));
    const names = value(await backend.list({ id: id(), op: 'list' })).names;
    assert.deepEqual(
      names.filter((n) => n === 'alpha' || n === 'beta'),
      ['alpha', 'beta'],
    );
    assert.ok(!names.some((n) => n.startsWith('.')));

    assert.deepEqual(value(await backend.get({ id: id(), op: 'get', name: 'alpha' })), {
      status: 'running',
      path: join(root, 'alpha'),
    });
    value(await backend.suspend({ id: id(), op: 'suspend', name: 'alpha' }));
    assert.equal(statSync(join(root, 'alpha', '.fountain-suspended')).mode & 0o777, 0o600);
    assert.equal(value(await backend.get({ id: id(), op: 'get', name: 'alpha' })).status, 'suspended');
    value(await backend.resume({ id: id(), op: 'resume', name: 'alpha' }));
    assert.equal(value(await backend.get({ id: id(), op: 'get', name: 'alpha' })).status, 'running');

    value(await backend.destroy({ id: id(), op: 'destroy', name: 'beta' }));
    value(await backend.destroy({ id: id(), op: 'destroy', name: 'beta' }));
    assert.equal(code(await backend.get({ id: id(), op: 'get', name: 'beta' })), 'not_found');
    assert.equal(code(await backend.suspend({ id: id(), op: 'suspend', name: 'beta' })), 'not_found');
  });

  it('refuses names that would leave the root', async () => {
    for (const name of ['..', '.', '../escape', 'a/b', 'a\\b', '.hidden', JOURNALS_DIR]) {
      assert.equal(code(await backend.create({ id: id(), op: 'create', name })), 'invalid', name);
      assert.equal(code(await backend.destroy({ id: id(), op: 'destroy', name })), 'invalid', name);
    }
    assert.ok(existsSync(root));
    assert.ok(!existsSync(join(root, '..', 'escape')));
  });

  it('write_file maps /home/sprite and ~, re-applies the mode, and refuses escapes and bad base64', async () => {
    await create('files');
    const dir = join(root, 'files');
    const write = (path: string, data: string, mode?: number) =>
      backend.writeFile({ id: id(), op: 'write_file', name: 'files', path, data, mode: mode ?? null });
    value(await write('/home/sprite/a/b.txt', b64('one')));
    value(await write('~/c.txt', b64('two'), 0o600));
    value(await write('rel/d.txt', b64('three'), 0o755));
    assert.equal(readFileSync(join(dir, 'a/b.txt'), 'utf8'), 'one');
    assert.equal(statSync(join(dir, 'a/b.txt')).mode & 0o777, 0o644);
    assert.equal(statSync(join(dir, 'c.txt')).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, 'rel/d.txt')).mode & 0o777, 0o755);

    const up = '../'.repeat(20);
    for (const path of [
      `${up}escaped.txt`,
      '../files2/x',
      `/home/sprite/${up}etc/x`,
      '~/../x',
      join(root, 'other', 'x'),
      '/etc/fountain-test',
      join(root, JOURNALS_DIR, 'x'),
    ]) {
      assert.equal(code(await write(path, b64('x'))), 'invalid', path);
    }
    assert.ok(!existsSync('/escaped.txt'));
    // The machine's shared temp directory is not the sandbox's: a file there would outlive it and be seen by all.
    const shared = join(tmpdir(), `fountain-shared-${process.pid}.txt`);
    assert.equal(code(await write(shared, b64('tmp'))), 'invalid', shared);
    assert.equal(code(await write(`/${'tmp'}/fountain-shared-${process.pid}.txt`, b64('tmp'))), 'invalid');
    assert.ok(!existsSync(shared));
    assert.equal(code(await write('x.txt', '%%not base64')), 'invalid');
    assert.equal(
      code(await backend.writeFile({ id: id(), op: 'write_file', name: 'nope', path: 'x', data: b64('x') })),
      'not_found',
    );
  });

  it('write_file never follows a link the sandbox planted: files, directories, a sibling sandbox, .env (issue 22 #3)', async () => {
    await create('links');
    await create('sibling');
    const dir = join(root, 'links');
    const outside = join(root, '..', 'outside');
    mkdirSync(join(outside, 'dir'), { recursive: true });
    writeFileSync(join(outside, 'file'), 'host');
    writeFileSync(join(root, 'sibling', 'secret'), 'sibling');
    writeFileSync(join(dir, '.env'), "K='v'\n");
    // The sandbox plants the links with its own commands.
    const planted = await exec('links', 'sh', [
      '-c',
      `ln -s ${outside}/file f && ln -s ${outside}/dir d && ln -s ${root}/sibling sib && rm .env && ln -s ${outside}/file .env && mkdir -p real && ln -s ${outside}/dir real/deeper && ln ${outside}/file hard`,
    ]);
    assert.equal(planted.code, 0, planted.output);
    const write = (path: string) =>
      backend.writeFile({ id: id(), op: 'write_file', name: 'links', path, data: b64('PWNED'), mode: null });
    for (const [path, words] of [
      ['f', /f: f is a symbolic link/],
      ['/home/sprite/d/new.txt', /d\/new.txt: d is a symbolic link/],
      ['sib/secret', /sib\/secret: sib is a symbolic link/],
      ['~/.env', /\.env: \.env is a symbolic link/],
      ['real/deeper/x/y', /real\/deeper is a symbolic link/],
      ['hard', /hard: hard is a hard link/],
    ] as const) {
      const r = await write(path);
      assert.equal(code(r), 'invalid', path);
      assert.match(!r.ok ? r.error.detail : '', words);
    }
    assert.equal(readFileSync(join(outside, 'file'), 'utf8'), 'host');
    assert.deepEqual(readdirSync(join(outside, 'dir')), []);
    assert.equal(readFileSync(join(root, 'sibling', 'secret'), 'utf8'), 'sibling');
    // A plain nested write beside the links still works, and a FIFO does not block the daemon.
    value(await write('real/ok/file.txt'));
    assert.equal(readFileSync(join(dir, 'real/ok/file.txt'), 'utf8'), 'PWNED');
    assert.equal((await exec('links', 'mkfifo', ['pipe'])).code, 0);
    assert.equal(code(await write('pipe')), 'invalid');
    // The daemon's own suspended marker is never written through a link either.
    assert.equal((await exec('links', 'ln', ['-s', `${outside}/file`, '.fountain-suspended'])).code, 0);
    value(await backend.suspend({ id: id(), op: 'suspend', name: 'links' }));
    assert.equal(readFileSync(join(outside, 'file'), 'utf8'), 'host');
    assert.ok(statSync(join(dir, '.fountain-suspended')).isFile());
  });

  it('exec maps paths, sets the child environment, and returns a nonzero exit as data', async () => {
    await create('ex');
    const dir = join(root, 'ex');
    const r = await exec(
      'ex',
      'bash',
      ['-c', 'echo "$HOME|$FOUNTAIN_SANDBOX_DIR|$npm_config_prefix|$(pwd)|$1|$EXTRA"', '_', '/home/sprite/x'],
      {
        env: [['EXTRA', 'v'], ['IGNORED']],
        dir: '/home/sprite',
      },
    );
    assert.equal(r.code, 0);
    assert.equal(r.output, `${dir}|${dir}|${dir}/.npm-global|${dir}|${dir}/x|v\n`);
    const path = (await exec('ex', 'printenv', ['PATH'])).output.trim().split(':');
    assert.deepEqual(path.slice(0, 3), [`${dir}/.local/bin`, `${dir}/.npm-global/bin`, `${dir}/.bun/bin`]);
    assert.equal((await exec('ex', 'pwd', [], { dir: 'does/not/exist' })).output, `${dir}\n`);
    assert.deepEqual(await exec('ex', 'bash', ['-c', 'echo out; echo err >&2; exit 3']), { output: 'out\n', code: 3 });
    assert.deepEqual(await exec('ex', 'bash', ['-c', 'echo out; echo err >&2'], { stderr_to_stdout: true }), {
      output: 'out\nerr\n',
      code: 0,
    });
    assert.equal(
      code(await backend.exec({ id: id(), op: 'exec', name: 'missing', cmd: 'true', args: [], env: [] })),
      'not_found',
    );
  });

  it('exec gives 127 for a missing command, 137 for a timeout kill, 124 when an escaped child holds the pipe', async () => {
    await create('codes');
    const missing = await exec('codes', 'fountain-no-such-command');
    assert.equal(missing.code, 127);
    assert.match(missing.output, /fountain runner: .*ENOENT/);

    const killed = await exec('codes', 'bash', ['-c', 'echo started; sleep 30'], { timeout_ms: 200 });
    assert.deepEqual(killed, { output: 'started\n', code: 137 });

    // The parent waits until the child has left the group, so the group kill cannot reach it first.
    const escaped = await exec('codes', 'bash', [
      '-c',
      'setsid sh -c "touch left; exec sleep 3" & while [ ! -e left ]; do sleep 0.01; done; echo parent done',
    ]);
    assert.equal(escaped.code, 124);
    assert.match(escaped.output, /parent done\n.*fountain runner: command output did not close/s);

    // The group is gone after the leader exits: a background child that stayed in it was killed.
    const bg = await exec('codes', 'bash', ['-c', 'sleep 30 & echo $!']);
    assert.equal(bg.code, 0);
    const pid = Number(bg.output.trim());
    await until(() => !isAlive(pid), 'background child to die');
  });

  it('a stdin write repeated with its write id (a retry after a lost reply) reaches the process once; the capability is advertised', async () => {
    assert.ok(backend.capabilities().includes('stdin_write_id'));
    await create('wid');
    const out = new CollectingOut();
    const sid = await spawn('wid', 'bash', ['-c', 'while read l; do echo "got:$l"; done'], out, true);
    const write = (data: string, writeId?: string) =>
      backend.stdin({
        id: id(),
        op: 'stdin',
        session_id: sid,
        data: b64(data),
        ...(writeId === undefined ? {} : { write_id: writeId }),
      });
    // The repeat arrives while the first is still being written, then again after: both answer ok, neither writes.
    const [first, concurrent] = await Promise.all([write('one\n', 'req-3.0'), write('one\n', 'req-3.0')]);
    value(first);
    value(concurrent);
    value(await write('one\n', 'req-3.0'));
    value(await write('two\n', 'req-4.0'));
    // Without an id every write is written, as before.
    value(await write('three\n'));
    value(await write('three\n'));
    await until(() => out.bytes(sid).toString().split('\n').length > 4, 'echoes');
    assert.equal(out.bytes(sid).toString(), 'got:one\ngot:two\ngot:three\ngot:three\n');
  });

  it('spawn streams output then exactly one exit; stdin round-trips; close_stdin is EOF; stdin after exit is command_exited', async () => {
    await create('sp');
    const out = new CollectingOut();
    const sid = await spawn(
      'sp',
      'bash',
      ['-c', 'echo ready; while read l; do echo "got:$l"; done; echo bye'],
      out,
      true,
    );
    assert.match(sid, /^s-\d+-[0-9a-f]{8}-\d+$/);
    await until(() => out.bytes(sid).toString().includes('ready'), 'ready');
    value(await backend.stdin({ id: id(), op: 'stdin', name: 'sp', session_id: sid, data: b64('hello\n') }));
    await until(() => out.bytes(sid).toString().includes('got:hello'), 'echo');
    assert.equal(code(await backend.stdin({ id: id(), op: 'stdin', session_id: sid, data: '@@' })), 'invalid');
    value(await backend.stdinClose({ id: id(), op: 'stdin_close', name: 'sp', session_id: sid }));
    await until(() => out.exitCode(sid) !== undefined, 'exit');
    assert.equal(out.exitCode(sid), 0);
    assert.equal(out.bytes(sid).toString(), 'ready\ngot:hello\nbye\n');
    assert.equal(out.frames.filter((f) => f.stream === 'exit').length, 1);
    assert.equal(out.frames.at(-1)?.stream, 'exit');
    assert.equal(
      code(await backend.stdin({ id: id(), op: 'stdin', name: 'sp', session_id: sid, data: b64('late') })),
      'command_exited',
    );
    assert.equal(
      code(await backend.stdin({ id: id(), op: 'stdin', session_id: 's-0-0', data: b64('x') })),
      'not_found',
    );
    assert.equal(code(await backend.stdinClose({ id: id(), op: 'stdin_close', session_id: 's-0-0' })), 'not_found');
    value(await backend.detach({ id: 0, op: 'detach', session_id: 's-0-0' }));

    const noStdin = await spawn('sp', 'sleep', ['5'], new CollectingOut());
    assert.equal(
      code(await backend.stdin({ id: id(), op: 'stdin', session_id: noStdin, data: b64('x') })),
      'write_failed',
    );

    const failed = new CollectingOut();
    const bad = await spawn('sp', 'fountain-no-such-command', [], failed);
    await until(() => failed.exitCode(bad) !== undefined, 'start failure exit');
    assert.equal(failed.exitCode(bad), 127);
    assert.match(failed.bytes(bad).toString(), /^fountain runner: .*ENOENT/);

    const sessions = value(await backend.listSessions({ id: id(), op: 'list_sessions', name: 'sp' })).sessions;
    assert.deepEqual(
      sessions.map((s) => s.id),
      [bad, noStdin, sid],
    );
    assert.equal(sessions[0]!.exit_code, 127);
    assert.equal(sessions[1]!.exit_code, undefined);
    assert.equal(sessions[2]!.command, 'bash -c echo ready; while read l; do echo "got:$l"; done; echo bye');
    assert.equal(sessions[2]!.tty, false);

    // Suspend stops live sessions: the sleeper dies by signal, 137.
    value(await backend.suspend({ id: id(), op: 'suspend', name: 'sp' }));
    const after = value(await backend.listSessions({ id: id(), op: 'list_sessions', name: 'sp' })).sessions;
    assert.equal(after.find((s) => s.id === noStdin)?.exit_code, 137);
  });

  it('attach replays the journal from byte zero, then tails live output, with nothing lost or repeated', async () => {
    await create('jr');
    const first = new CollectingOut();
    const sid = await spawn('jr', 'bash', ['-c', 'for i in $(seq 1 120); do echo "line $i"; sleep 0.002; done'], first);
    await until(() => first.bytes(sid).length > 100, 'some output');
    // The first connection goes away mid-stream.
    first.open = false;
    await new Promise((r) => setTimeout(r, 50));
    const second = new CollectingOut();
    const attach = await backend.attach(
      { id: 77, op: 'attach', name: 'jr', session_id: sid },
      { requestId: 77, out: second },
    );
    assert.ok(attach.ok);
    assert.deepEqual(attach.value.result, { session_id: sid });
    attach.value.followUp?.();
    await until(() => second.exitCode(sid) !== undefined, 'exit on the second connection', 20_000);
    const expected = Array.from({ length: 120 }, (_, i) => `line ${i + 1}\n`).join('');
    assert.equal(second.bytes(sid).toString(), expected);
    const replayed = second.frames.filter((f) => f.replay_for === 77);
    assert.ok(replayed.length > 0);
    // Replay frames come first, then only live ones.
    const firstLive = second.frames.findIndex((f) => f.replay_for === undefined);
    if (firstLive >= 0) assert.ok(second.frames.slice(firstLive).every((f) => f.replay_for === undefined));
    assert.equal(
      code(
        await backend.attach({ id: 78, op: 'attach', name: 'other', session_id: sid }, { requestId: 78, out: second }),
      ),
      'not_found',
    );
  });

  it('session ids do not repeat across backend processes, even within one second', async () => {
    // A restarted daemon, or the guests of two microVMs, each start counting at 1 in the same second.
    const other = openProcessBackend({ root: join(root, '..', 'other'), logger: captureLogger().logger });
    assert.ok(other.ok);
    try {
      value(await other.value.create({ id: id(), op: 'create', name: 'twin' }));
      await create('twin');
      const a = await other.value.spawn(
        { id: 1, op: 'spawn', name: 'twin', cmd: 'true', args: [], env: [], stdin: false },
        { requestId: 1, out: new CollectingOut() },
      );
      const b = await backend.spawn(
        { id: 2, op: 'spawn', name: 'twin', cmd: 'true', args: [], env: [], stdin: false },
        { requestId: 2, out: new CollectingOut() },
      );
      assert.ok(a.ok && b.ok);
      a.value.followUp?.();
      b.value.followUp?.();
      assert.match(a.value.result.session_id, /^s-\d+-[0-9a-f]{8}-\d+$/);
      assert.notEqual(a.value.result.session_id, b.value.result.session_id);
    } finally {
      await other.value.stopAll();
    }
  });

  it('a replay long enough to read asynchronously hands over to live output without a gap or a repeat', async () => {
    const opened = openProcessBackend({
      root: join(root, '..', 'big'),
      logger: captureLogger().logger,
      journalCapBytes: 64 * 1024 * 1024,
    });
    assert.ok(opened.ok);
    const big = opened.value;
    try {
      value(await big.create({ id: id(), op: 'create', name: 'big' }));
      const lines = 40_000;
      const script = `let i = 0; const pad = 'x'.repeat(90);
        const tick = () => { let s = ''; for (let k = 0; k < 200 && i < ${lines}; k++) s += 'L' + (i++) + ' ' + pad + '\\n';
          process.stdout.write(s, () => (i < ${lines} ? setTimeout(tick, 1) : undefined)); };
        tick();
        process.stdin.on('data', (d) => process.stdout.write(d));
        process.stdin.on('end', () => process.exit(0));`;
      const first = new CollectingOut();
      const r = await big.spawn(
        { id: 1, op: 'spawn', name: 'big', cmd: process.execPath, args: ['-e', script], env: [], stdin: true },
        { requestId: 1, out: first },
      );
      assert.ok(r.ok);
      const sid = r.value.result.session_id;
      r.value.followUp?.();
      await until(() => first.bytes(sid).length > 1024 * 1024, '1 MiB of output');
      first.open = false;
      const slow = new CollectingOut();
      slow.drained = () => new Promise((res) => setTimeout(res, 5));
      const a = await big.attach({ id: 2, op: 'attach', name: 'big', session_id: sid }, { requestId: 2, out: slow });
      assert.ok(a.ok);
      a.value.followUp?.();
      // Under load the child may finish writing before the replay ends; a line sent after the
      // whole output arrived is live output for certain, so the hand-over is always exercised.
      await until(
        () =>
          slow
            .bytes(sid)
            .toString()
            .includes(`L${lines - 1} `),
        'all lines through the replay',
        30_000,
      );
      const tail = Buffer.from(`L${lines} tail\n`).toString('base64');
      assert.ok((await big.stdin({ id: 3, op: 'stdin', session_id: sid, data: tail })).ok);
      assert.ok((await big.stdinClose({ id: 4, op: 'stdin_close', session_id: sid })).ok);
      await until(() => slow.exitCode(sid) !== undefined, 'exit after the replay', 30_000);
      const got = slow
        .bytes(sid)
        .toString()
        .split('\n')
        .filter(Boolean)
        .map((l) => Number(l.slice(1, l.indexOf(' '))));
      assert.equal(got.length, lines + 1);
      assert.ok(
        got.every((n, i) => n === i),
        'every line once, in order',
      );
      assert.ok(
        slow.frames.some((f) => f.replay_for === 2) &&
          slow.frames.some((f) => f.replay_for === undefined && f.stream !== 'exit'),
      );
    } finally {
      await big.stopAll();
    }
  });

  it('a capped journal drops its oldest bytes and the attach reply says how many with replay_from', async () => {
    await create('cap');
    const out = new CollectingOut();
    const total = 256 * 1024;
    const sid = await spawn('cap', 'bash', ['-c', `head -c ${total} /dev/urandom | base64 -w 0`], out);
    await until(() => out.exitCode(sid) !== undefined, 'exit');
    const full = out.bytes(sid);
    assert.ok(full.length > total);
    const late = new CollectingOut();
    const r = await backend.attach(
      { id: 90, op: 'attach', name: 'cap', session_id: sid },
      { requestId: 90, out: late },
    );
    assert.ok(r.ok);
    const from = r.value.result.replay_from ?? 0;
    assert.ok(from > 0, 'replay_from reported');
    r.value.followUp?.();
    await until(() => late.exitCode(sid) !== undefined, 'replayed exit');
    assert.deepEqual(late.bytes(sid), full.subarray(from));
    // What the cap keeps: the cap, the segment being written, and the record that crossed it.
    assert.ok(full.length - from <= 64 * 1024 + 8 * 1024 + OUTPUT_CHUNK);
    const segs = readdirSync(join(root, JOURNALS_DIR, 'cap', sid));
    assert.ok(segs.length >= 1 && segs.length <= 12);
  });

  it('stopAll ends every session process group, background children included', async () => {
    await create('stop');
    const out = new CollectingOut();
    const sid = await spawn('stop', 'bash', ['-c', 'trap "" TERM; sleep 60 & echo $$; wait'], out);
    const pgid = Number((await until(() => out.bytes(sid).toString().trim(), 'pid')).trim());
    assert.ok(groupAlive(pgid));
    await backend.stopAll();
    // Killed members are reaped by init a moment later; the wait only guards against a hang.
    await until(() => !groupAlive(pgid), 'the group to be gone');
    assert.equal(out.exitCode(sid), 137);
    assert.ok(!existsSync(join(root, JOURNALS_DIR)));
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('replay frames', () => {
  it('carry runs of one stream up to the size limit, in order, with an exit alone', () => {
    const rec = (kind: 'stdout' | 'stderr' | 'exit', text: string) => ({ kind, payload: Buffer.from(text) });
    const runs = replayRuns(
      [
        rec('stdout', 'ab'),
        rec('stdout', 'cd'),
        rec('stdout', 'ef'),
        rec('stderr', 'x'),
        rec('stdout', 'g'),
        rec('exit', '\0\0\0\0'),
      ],
      4,
    );
    assert.deepEqual(
      runs.map((run) => [run[0]!.kind, run.map((r) => r.payload.toString()).join('|')]),
      [
        ['stdout', 'ab|cd'],
        ['stdout', 'ef'],
        ['stderr', 'x'],
        ['stdout', 'g'],
        ['exit', '\0\0\0\0'],
      ],
    );
    assert.deepEqual(
      replayRuns([rec('stdout', 'toolong')], 4).map((run) => run.length),
      [1],
    );
  });
});

describe('a process-backend sandbox environment holds only what it is given (issue 22 #4)', () => {
  const MARKER = 'RUNNER_ENV_MARKER_22';
  let root: string;
  let backend: ProcessBackend;
  before(() => {
    // The runner's own environment: a marker, a credential of the shell, the runner's key.
    process.env[MARKER] = 'leaked';
    process.env.AWS_SECRET_ACCESS_KEY = 'leaked-too';
    process.env.FOUNTAIN_API_KEY = 'ftn_leaked';
    root = join(realpathSync(mkdtempSync(join(tmpdir(), 'fountain-pb-env-'))), 'sandboxes');
    const opened = openProcessBackend({ root, logger: captureLogger().logger, graceMs: { stopAll: 1000 } });
    assert.ok(opened.ok);
    backend = opened.value;
  });
  after(async () => {
    delete process.env[MARKER];
    delete process.env.AWS_SECRET_ACCESS_KEY;
    delete process.env.FOUNTAIN_API_KEY;
    await backend.stopAll();
    rmSync(join(root, '..'), { recursive: true, force: true });
  });

  it('exec and spawn see the fixed base plus the request env, nothing of the runner', async () => {
    value(await backend.create({ id: id(), op: 'create', name: 'env' }));
    const r = value(
      await backend.exec({ id: id(), op: 'exec', name: 'env', cmd: 'env', args: ['-0'], env: [['ASKED', 'yes']] }),
    );
    const keys = unb64(r.output)
      .split('\0')
      .filter((l) => l !== '')
      .map((l) => l.slice(0, l.indexOf('=')))
      .sort();
    // Trust-anchor paths (public CA bundles) pass when the runner has them: npm behind a TLS-intercepting proxy needs them.
    const trust = TRUST_ENV_KEYS.filter((k) => process.env[k]);
    assert.deepEqual(
      keys,
      [
        'ASKED',
        // The shared install of agent adapters (on by default): a directory, not a secret.
        'FOUNTAIN_RUNTIME_STORE',
        'FOUNTAIN_SANDBOX_DIR',
        'HOME',
        'LANG',
        'PATH',
        'SHELL',
        'TERM',
        'TMPDIR',
        'USER',
        ...trust,
        'npm_config_cache',
        'npm_config_prefix',
      ].sort(),
    );
    const out = new CollectingOut();
    const reqId = id();
    const sp = await backend.spawn(
      { id: reqId, op: 'spawn', name: 'env', cmd: 'env', args: [], env: [], stdin: false },
      { requestId: reqId, out },
    );
    assert.ok(sp.ok);
    sp.value.followUp?.();
    await until(() => out.frames.some((f) => f.stream === 'exit'), 'the spawned env to exit');
    const text = out.bytes(sp.value.result.session_id).toString();
    assert.doesNotMatch(text, /leaked/);
    assert.match(text, /^HOME=/m);
    // Its temporary directory is its own, inside it: nothing lands in the machine's shared /tmp.
    const tmp = /^TMPDIR=(.*)$/m.exec(text)?.[1] ?? '';
    assert.equal(tmp, join(root, 'env', '.tmp'));
    assert.ok(statSync(tmp).isDirectory());
  });

  it("without --npm-cache, sandboxes install through $HOME's npm cache: a changed HOME is honoured", async () => {
    const home = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-pb-home-')));
    const was = process.env.HOME;
    process.env.HOME = home;
    const opened = openProcessBackend({ root: join(home, 'sandboxes'), logger: captureLogger().logger });
    if (was === undefined) delete process.env.HOME;
    else process.env.HOME = was;
    assert.ok(opened.ok);
    try {
      value(await opened.value.create({ id: id(), op: 'create', name: 'home' }));
      const r = value(
        await opened.value.exec({
          id: id(),
          op: 'exec',
          name: 'home',
          cmd: 'sh',
          args: ['-c', 'printf %s "$npm_config_cache"'],
          env: [],
        }),
      );
      assert.equal(unb64(r.output), join(home, '.npm'));
    } finally {
      await opened.value.stopAll();
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('takes the npm cache the runner names (--npm-cache) and the trust anchors, nothing else', () => {
    const env = childEnv('/sb', [], {
      base: { PATH: '/bin', NODE_EXTRA_CA_CERTS: '/etc/ca.pem', AWS_SECRET_ACCESS_KEY: 'x' },
      realHome: '/home/u',
      npmCache: '/repo/.cache/npm',
      exists: () => false,
    });
    assert.equal(env.npm_config_cache, '/repo/.cache/npm');
    assert.equal(env.NODE_EXTRA_CA_CERTS, '/etc/ca.pem');
    assert.equal(env.AWS_SECRET_ACCESS_KEY, undefined);
    assert.equal(
      childEnv('/sb', [], { base: {}, realHome: '/home/u', exists: () => false }).npm_config_cache,
      '/home/u/.npm',
    );
  });
});
