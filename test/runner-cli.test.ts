import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { groupAlive } from '../src/runner/backends/process/groups.ts';
import { LoopbackRunnerServer, until } from '../src/runner/testing.ts';

const BIN = new URL('../bin/fountain.js', import.meta.url).pathname;
const KEY = `ftn_${'cd'.repeat(32)}`;

interface Run {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
}

function runCli(args: string[], env: Record<string, string>): Run {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: {
      ...process.env,
      FOUNTAIN_API_KEY: '',
      FOUNTAIN_BASE_URL: '',
      FOUNTAIN_PROFILE: '',
      FOUNTAIN_LOG_FORMAT: 'json',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, stderr: () => err, exited };
}

describe('fountain runner as a real process', () => {
  let home: string;
  const servers: LoopbackRunnerServer[] = [];
  const children: ChildProcess[] = [];

  before(() => {
    home = realpathSync(mkdtempSync(join(tmpdir(), 'fountain-cli-')));
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.close()));
    rmSync(home, { recursive: true, force: true });
  });

  it('exits 2 with a plain message when there is no API key', async () => {
    const run = runCli(['runner', '--root', join(home, 'none')], { FOUNTAIN_HOME: home });
    children.push(run.child);
    assert.equal(await run.exited, 2);
    assert.match(run.stderr(), /no API key for profile "default"/);
  });

  it('gives up with exit 1 when the key is refused', async () => {
    const server = await LoopbackRunnerServer.start(() => ({ refuse: 401, body: '{"error":"unauthorized"}' }));
    servers.push(server);
    const run = runCli(['runner', '--name', 'refused', '--root', join(home, 'refused')], {
      FOUNTAIN_HOME: home,
      FOUNTAIN_API_KEY: KEY,
      FOUNTAIN_BASE_URL: server.baseUrl,
    });
    children.push(run.child);
    assert.equal(await run.exited, 1);
    assert.match(run.stderr(), /fountain runner: API key refused \(HTTP 401/);
    assert.equal(server.upgrades.length, 1);
  });

  it('Ctrl-C ends every session process group, SIGKILL for one that ignores SIGTERM, then exits 0', async () => {
    const server = await LoopbackRunnerServer.start(() => ({ accept: true }));
    servers.push(server);
    const root = join(home, 'sandboxes');
    const run = runCli(['runner', '--name', 'ctrl-c', '--root', root, '--log-level', 'debug'], {
      FOUNTAIN_HOME: home,
      FOUNTAIN_API_KEY: KEY,
      FOUNTAIN_BASE_URL: server.baseUrl,
    });
    children.push(run.child);
    const sock = await until(() => server.sockets[0], 'the runner to connect', 30_000);
    await until(() => run.stderr().includes('runner: connected'), 'runner: connected');
    assert.equal(server.upgrades[0]!.url.searchParams.get('name'), 'ctrl-c');
    assert.equal(server.upgrades[0]!.url.searchParams.get('root'), root);

    const name = `runner-${'0'.repeat(32)}-deadbeef`;
    assert.equal((await sock.call({ op: 'create', name })).ok, true);
    const sessions: Array<{ sid: string; pgid: number }> = [];
    for (const script of ['sleep 300 & echo $$; wait', 'trap "" TERM; sleep 300 & echo $$; wait']) {
      const r = await sock.call({ op: 'spawn', name, cmd: 'bash', args: ['-c', script] });
      assert.ok(r.ok);
      const sid = String(r.result.session_id);
      const pgid = Number(await until(() => sock.stdout(sid).trim(), 'the session pid'));
      assert.ok(groupAlive(pgid));
      sessions.push({ sid, pgid });
    }

    run.child.kill('SIGINT');
    assert.equal(await run.exited, 0);
    for (const { pgid } of sessions) await until(() => !groupAlive(pgid), `process group ${pgid} to be gone`);
    // The sessions ended while the socket was still up, so Fountain saw their exit frames.
    for (const { sid } of sessions) {
      const exit = sock.frames.find((f) => 'stream' in f && f.stream === 'exit' && f.session_id === sid);
      assert.deepEqual(exit && 'code' in exit ? exit.code : undefined, 137);
    }
    await until(() => sock.closed, 'the socket to close');
  });
});
