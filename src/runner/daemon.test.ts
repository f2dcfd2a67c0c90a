import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StreamFrame } from '../wire/index.ts';
import { openProcessBackend } from './backends/process/index.ts';
import type { ProcessBackend } from './backends/process/index.ts';
import { maskingNeeded } from './connection.ts';
import { runDaemon } from './daemon.ts';
import type { DaemonHandle } from './daemon.ts';
import { backoffDelay, classifyClose, runnerSocketUrl } from './dial.ts';
import { defaultRunnerName } from './identity.ts';
import { LoopbackRunnerServer, captureLogger, until } from './testing.ts';
import type { CapturedLogger } from './testing.ts';

const KEY = `ftn_${'ab'.repeat(32)}`;
const FAST = { pingIntervalMs: 60_000, pingTimeoutMs: 60_000, baseMs: 10, capMs: 40 };

describe('runner daemon over a loopback WebSocket', () => {
  let root: string;
  let backend: ProcessBackend;
  const running: DaemonHandle[] = [];
  const servers: LoopbackRunnerServer[] = [];

  before(() => {
    root = join(realpathSync(mkdtempSync(join(tmpdir(), 'fountain-daemon-'))), 'sandboxes');
    const opened = openProcessBackend({ root, logger: captureLogger().logger, graceMs: { stopAll: 1000 } });
    assert.ok(opened.ok);
    backend = opened.value;
  });
  after(async () => {
    await Promise.all(running.map((d) => d.stop()));
    await Promise.all(servers.map((s) => s.close()));
    rmSync(join(root, '..'), { recursive: true, force: true });
  });

  const start = async (
    plan: Parameters<typeof LoopbackRunnerServer.start>[0],
    opts: { autoPong?: boolean; timings?: object; baseUrl?: string } = {},
  ) => {
    const server = await LoopbackRunnerServer.start(plan, opts);
    servers.push(server);
    const log: CapturedLogger = captureLogger();
    const daemon = runDaemon({
      name: 'box',
      root,
      backend,
      baseUrl: opts.baseUrl ?? server.baseUrl,
      apiKey: KEY,
      logger: log.logger,
      version: '0.1.0-test',
      hostname: 'Box.local',
      timings: { ...FAST, ...opts.timings },
    });
    running.push(daemon);
    return { server, daemon, log };
  };
  const messages = (log: CapturedLogger) => log.lines.map((l) => l.msg);

  for (const [status, words] of [
    [401, /API key refused \(HTTP 401: \{"error":"unauthorized"\}\)/],
    [403, /API key refused \(HTTP 403/],
    [404, /self-hosted runners are disabled on this instance/],
    [400, /runner rejected \(HTTP 400: \{"errors":\{"name":\["has invalid format"\]\}\}\)/],
  ] as const) {
    it(`gives up on HTTP ${status} after one attempt`, async () => {
      const body =
        status === 400
          ? '{"errors":{"name":["has invalid format"]}}'
          : status === 401
            ? '{"error":"unauthorized"}'
            : '{}';
      const { server, daemon, log } = await start(() => ({ refuse: status, body }));
      const exit = await daemon.done;
      assert.equal(exit.kind, 'gave_up');
      assert.match(exit.kind === 'gave_up' ? exit.message : '', words);
      assert.equal(server.upgrades.length, 1);
      assert.ok(!messages(log).includes('runner: connected'));
    });
  }

  it('gives up without dialing when the base URL is not http or https', async () => {
    const { server, daemon } = await start(() => ({ accept: true }), { baseUrl: 'ftp://127.0.0.1:1' });
    const exit = await daemon.done;
    assert.equal(exit.kind, 'gave_up');
    assert.equal(server.upgrades.length, 0);
  });

  it('retries 409 and other statuses with a doubling, capped backoff, then connects with its identity', async () => {
    const { server, daemon, log } = await start((n) => (n < 4 ? { refuse: n === 2 ? 502 : 409 } : { accept: true }));
    await until(() => messages(log).includes('runner: connected'), 'connected');
    const delays = log.lines.filter((l) => l.msg === 'runner: disconnected; reconnecting').map((l) => l.delayMs);
    assert.deepEqual(delays, [10, 20, 40, 40]);
    const up = server.upgrades.at(-1)!;
    assert.equal(up.url.pathname, '/api/runners/ws');
    assert.equal(up.headers.authorization, `Bearer ${KEY}`);
    const q = Object.fromEntries(up.url.searchParams);
    assert.deepEqual(Object.keys(q).sort(), ['arch', 'capabilities', 'hostname', 'name', 'os', 'root', 'version']);
    assert.equal(q.name, 'box');
    assert.equal(q.capabilities, 'suspend,attach,stdin_write_id', 'the process backend advertises no network_policy');
    assert.equal(q.hostname, 'Box.local');
    assert.equal(q.root, root);
    assert.equal(q.version, '0.1.0-test');
    assert.equal(q.os, process.platform === 'win32' ? 'windows' : process.platform);
    assert.equal((await daemon.stop()).kind, 'stopped');
  });

  it('reconnects after close codes 4409, 4404 and 1003, and resets the backoff after a clean close', async () => {
    const { server, daemon, log } = await start(() => ({ accept: true }));
    const codes = [4409, 4404, 1000, 1003, 1001];
    for (let i = 0; i < codes.length; i++) {
      const sock = await until(() => server.sockets[i], `connection ${i + 1}`);
      sock.ws.close(codes[i]!, 'test');
    }
    await until(() => server.sockets[codes.length], 'the last reconnect');
    const attempts = log.lines.filter((l) => l.msg === 'runner: disconnected; reconnecting').map((l) => l.attempt);
    assert.deepEqual(attempts, [1, 2, 0, 1, 0]);
    await daemon.stop();
  });

  it('resets the backoff after a connection was up through a heartbeat, even when it then drops (issue 22 #12)', async () => {
    const { server, daemon, log } = await start(() => ({ accept: true }));
    for (let i = 0; i < 4; i++) {
      const sock = await until(() => server.sockets[i], `connection ${i + 1}`);
      // The server's heartbeat: a ping the daemon answers. Then the server "crashes" (no close frame).
      const ponged = new Promise<void>((r) => sock.ws.once('pong', () => r()));
      sock.ws.ping();
      await ponged;
      sock.ws.terminate();
    }
    await until(() => server.sockets[4], 'the last reconnect');
    const lines = log.lines.filter((l) => l.msg === 'runner: disconnected; reconnecting');
    assert.deepEqual(
      lines.map((l) => l.attempt),
      [1, 1, 1, 1],
    );
    assert.deepEqual(
      lines.map((l) => l.delayMs),
      [10, 10, 10, 10],
    );
    await daemon.stop();
  });

  it('terminates a socket whose ping goes unanswered and dials again', async () => {
    const { server, daemon, log } = await start(() => ({ accept: true }), {
      autoPong: false,
      timings: { pingIntervalMs: 30, pingTimeoutMs: 60 },
    });
    await until(() => server.sockets.length >= 2, 'a second connection');
    assert.ok(log.lines.some((l) => l.msg === 'runner: disconnected; reconnecting' && l.reason === 'ping timeout'));
    await daemon.stop();
  });

  it('answers bad frames by id when it can, skips the rest, and serves requests concurrently', async () => {
    const { server, daemon } = await start(() => ({ accept: true }));
    const sock = await until(() => server.sockets[0], 'connection');
    sock.ws.send('not json');
    sock.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    sock.ws.send('{"stream":"stdout"}');
    assert.deepEqual(await sock.call({ id: 5, op: 'fly' }), {
      id: 5,
      ok: false,
      error: 'not_supported',
      detail: 'fly',
    });
    const bad = await sock.call({ id: 6, op: 'stdin', session_id: 's-1-1', data: '%%' });
    assert.equal(bad.ok ? '' : bad.error, 'invalid');
    const ping = await sock.call({ id: 7, op: 'ping' });
    assert.equal(ping.ok ? '' : ping.error, 'not_supported');
    assert.equal((await sock.call({ id: 8, op: 'create', name: '../x' })).ok, false);

    assert.equal((await sock.call({ op: 'create', name: 'conc' })).ok, true);
    sock.ws.send(JSON.stringify({ id: 20, op: 'exec', name: 'conc', cmd: 'sleep', args: ['0.5'] }));
    sock.ws.send(JSON.stringify({ id: 21, op: 'list' }));
    await sock.reply(20);
    const order = sock.frames
      .filter((f) => 'ok' in f && (f.id === 20 || f.id === 21))
      .map((f) => (f as { id: number }).id);
    assert.deepEqual(order, [21, 20]);
    await daemon.stop();
  });

  it('orders reply → replay → live, and after a socket drop an attach moves the session to the new socket with no byte lost or repeated', async () => {
    const { server, daemon } = await start(() => ({ accept: true }));
    const one = await until(() => server.sockets[0], 'connection');
    assert.equal((await one.call({ op: 'create', name: 'replay' })).ok, true);
    one.ws.send(
      JSON.stringify({
        id: 30,
        op: 'spawn',
        name: 'replay',
        cmd: 'bash',
        args: ['-c', 'echo first; for i in $(seq 1 80); do echo "n $i"; sleep 0.003; done'],
      }),
    );
    const spawned = await one.reply(30);
    assert.ok(spawned.ok);
    const sid = (spawned.ok ? spawned.result.session_id : '') as string;
    // Nothing about the session precedes its reply.
    const replyAt = one.frames.findIndex((f) => 'ok' in f && f.id === 30);
    assert.ok(one.frames.slice(0, replyAt).every((f) => !('stream' in f) || f.session_id !== sid));
    await until(() => one.stdout(sid).includes('n 20\n'), 'some output on the first socket');
    one.ws.close(1001, 'deploy');

    const two = await until(() => server.sockets[1], 'reconnect');
    await new Promise((r) => setTimeout(r, 30));
    two.ws.send(JSON.stringify({ id: 3, op: 'attach', name: 'replay', session_id: sid, stdin: true }));
    await until(() => two.frames.some((f) => 'stream' in f && f.stream === 'exit'), 'exit on the second socket');
    const frames = two.frames.filter((f) => !('ok' in f) || f.id === 3);
    assert.deepEqual(frames[0], { id: 3, ok: true, result: { session_id: sid } });
    const streams = frames.slice(1) as StreamFrame[];
    const firstLive = streams.findIndex((f) => f.replay_for === undefined);
    assert.ok(streams.slice(0, firstLive === -1 ? undefined : firstLive).every((f) => f.replay_for === 3));
    if (firstLive !== -1) assert.ok(streams.slice(firstLive).every((f) => f.replay_for === undefined));
    const expected = `first\n${Array.from({ length: 80 }, (_, i) => `n ${i + 1}\n`).join('')}`;
    assert.equal(two.stdout(sid), expected);
    assert.ok(expected.startsWith(one.stdout(sid)));
    assert.equal(streams.filter((f) => f.stream === 'exit').length, 1);
    await daemon.stop();
  });
});

describe('dial rules', () => {
  it('builds the socket URL from http(s) bases, keeping a path prefix', () => {
    const id = { name: 'n', hostname: 'h', os: 'linux', arch: 'amd64', version: 'v', root: '/r' };
    assert.equal(
      runnerSocketUrl('https://f.example/base/', id)?.toString(),
      'wss://f.example/base/api/runners/ws?name=n&hostname=h&os=linux&arch=amd64&version=v&root=%2Fr',
    );
    assert.equal(runnerSocketUrl('http://127.0.0.1:4000', id)?.protocol, 'ws:');
    assert.equal(runnerSocketUrl('ws://x', id), null);
    assert.equal(runnerSocketUrl('not a url', id), null);
  });
  it('backs off 1 s doubling to a 30 s cap', () => {
    const t = { baseMs: 1000, capMs: 30_000 };
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 7].map((a) => backoffDelay(a, t)),
      [1000, 1000, 2000, 4000, 8000, 16000, 30000, 30000],
    );
  });
  it('classifies close codes', () => {
    assert.equal(classifyClose(1000, '').kind, 'clean');
    assert.equal(classifyClose(1001, '').kind, 'clean');
    for (const c of [4409, 4404, 1003, 1006]) assert.equal(classifyClose(c, '').kind, 'retry');
  });
  it('sanitises the hostname into a runner name', () => {
    assert.equal(defaultRunnerName('Mac-Mini.local'), 'mac-mini');
    assert.equal(defaultRunnerName('__My Box!!__'), 'my-box');
    assert.equal(defaultRunnerName('...'), 'runner');
    assert.equal(defaultRunnerName('a'.repeat(80)).length, 63);
  });
});

describe('frame masking', () => {
  it('is skipped only where no plain-text intermediary can read the socket: TLS and this machine', () => {
    const needed = (u: string) => maskingNeeded(new URL(u));
    for (const u of [
      'wss://fountain.example/api/runners/ws',
      'https://fountain.example',
      'ws://127.0.0.1:4000/x',
      'ws://127.9.8.7/x',
      'ws://localhost:4000',
      'ws://[::1]:4000/x',
    ]) {
      assert.equal(needed(u), false, u);
    }
    for (const u of [
      'ws://fountain.example/x',
      'http://10.0.0.2:4000',
      'ws://128.0.0.1/x',
      'ws://localhost.example/x',
      'ws://[::2]/x',
    ]) {
      assert.equal(needed(u), true, u);
    }
  });
});
