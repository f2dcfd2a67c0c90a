import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import pino from 'pino';
import { WebSocket } from 'ws';
import type { Command, Handle, SandboxAdapter, SandboxResult, StreamFrame } from '../../sandbox/index.ts';
import { Private, capabilitiesOf, mintRunnerName } from '../../sandbox/index.ts';
import { RunnerAdapter, mapSandboxPath, pickRunner } from './adapter.ts';
import { FakeDaemon, startFakeDaemon } from './fake-daemon.ts';
import { LocalRunnerHost } from './host.ts';
import type { RunnerInfo } from './host.ts';
import { startRunnerTestHub } from './test-hub.ts';
import type { RunnerTestHub } from './test-hub.ts';

const logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const RUNNER_ID = '0f0e0d0c-0b0a-4908-8706-050403020100';
const OTHER_ID = '1f0e0d0c-0b0a-4908-8706-050403020101';
const HANG_GUARD_MS = 5000;

const mint = (id = RUNNER_ID): string => {
  const r = mintRunnerName(id);
  assert.ok(r.ok);
  return r.value;
};

const value = <T>(r: SandboxResult<T>): T => {
  assert.ok(r.ok, `expected ok, got ${inspect(r)}`);
  return r.value;
};

/** Collects owner frames and lets a test wait for the next one matching a predicate. */
class Frames {
  readonly all: StreamFrame[] = [];
  #waiters: Array<{ pred: (f: StreamFrame) => boolean; resolve: (f: StreamFrame) => void }> = [];
  readonly sink = (f: StreamFrame): void => {
    this.all.push(f);
    this.#waiters = this.#waiters.filter((w) => {
      if (!w.pred(f)) return true;
      w.resolve(f);
      return false;
    });
  };
  next(pred: (f: StreamFrame) => boolean, seen = 0): Promise<StreamFrame> {
    const found = this.all.slice(seen).find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching frame; have ${inspect(this.all)}`)), HANG_GUARD_MS);
      this.#waiters.push({
        pred,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      });
    });
  }
  text(type: 'stdout' | 'stderr' = 'stdout'): string {
    return this.all.map((f) => (f.type === type ? Buffer.from(f.data).toString() : '')).join('');
  }
  terminals(): StreamFrame[] {
    return this.all.filter((f) => f.type === 'exit' || f.type === 'error');
  }
}

const isStdout = (needle: string) => (f: StreamFrame) =>
  f.type === 'stdout' && Buffer.from(f.data).toString().includes(needle);
const isTerminal = (f: StreamFrame) => f.type === 'exit' || f.type === 'error';
const settle = (ms = 50) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + HANG_GUARD_MS;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await settle(5);
  }
}

describe('runner adapter over a FakeDaemon on a loopback WebSocket', () => {
  let daemon: FakeDaemon;
  let adapter: RunnerAdapter;
  let handle: Handle;
  const presence: Array<{ state: string; stillRegistered: boolean }> = [];
  const heartbeats: RunnerInfo[] = [];
  let host: LocalRunnerHost;
  let hub: RunnerTestHub;

  before(async () => {
    host = new LocalRunnerHost({
      heartbeat: (info) => heartbeats.push(info),
      presence: (info, state) => presence.push({ state, stillRegistered: host.whereis(info.runnerId) !== undefined }),
    });
    hub = await startRunnerTestHub({ logger, host, heartbeatMs: 25 });
    daemon = await startFakeDaemon({ runnerId: RUNNER_ID, name: 'conformance', hub, logger });
    adapter = new RunnerAdapter(host, { logger });
    handle = value(await adapter.lifecycle.create(mint()));
  });

  after(async () => {
    await daemon.stop();
    await hub.close();
  });

  it('routes lifecycle ops by name and maps the get result', async () => {
    assert.deepEqual(value(await adapter.lifecycle.create(handle.name)), { provider: 'runner', name: handle.name });
    const info = value(await adapter.lifecycle.get(handle));
    assert.equal(info.status, 'running');
    assert.equal(info.raw.path, `/fake/root/${handle.name}`);
    value(await adapter.lifecycle.suspend(handle));
    assert.equal(value(await adapter.lifecycle.get(handle)).status, 'suspended');
    value(await adapter.lifecycle.resume(handle));
    assert.equal(value(await adapter.lifecycle.get(handle)).status, 'running');
    assert.ok(value(await adapter.lifecycle.listAllNames()).includes(handle.name));
    assert.equal(
      value(await adapter.files.hostPath(handle, '/home/sprite/work/a.txt')),
      `/fake/root/${handle.name}/work/a.txt`,
    );
    value(await adapter.files.writeFile(handle, '/home/sprite/f', Buffer.from('bytes'), { mode: 0o600 }));
    assert.equal(daemon.file(handle.name, '/home/sprite/f')?.toString(), 'bytes');
  });

  it('get of a never-created name is not_found; destroy of it is ok', async () => {
    const ghost = adapter.buildHandle(mint());
    const g = await adapter.lifecycle.get(ghost);
    assert.ok(!g.ok && g.error.code === 'not_found');
    value(await adapter.lifecycle.destroy(ghost));
  });

  it('exec folds the script; a nonzero exit is data', async () => {
    const r = value(await adapter.processes.exec(handle, 'sh', ['out:hello ', 'err:oops', 'exit:3']));
    assert.equal(r.exitCode, 3);
    assert.equal(Buffer.from(r.output).toString(), 'hello ');
    const merged = value(
      await adapter.processes.exec(handle, 'sh', ['out:a', 'err:b'], { stderrToStdout: true, timeoutMs: 1000 }),
    );
    assert.equal(Buffer.from(merged.output).toString(), 'ab');
    const dropped = await adapter.processes.exec(handle, 'sh', ['drop']);
    assert.ok(!dropped.ok && dropped.error.code === 'unavailable' && dropped.error.detail === 'closed_before_exit');
  });

  it('wire order is reply → replay → live; replay reaches only the attacher, live output every subscriber', async () => {
    const a = new Frames();
    const cmdA = value(
      await adapter.processes.spawn(handle, 'agent', ['out:hello', 'stay'], { owner: a.sink, stdin: true }),
    );
    await a.next(isStdout('hello'));
    const sessionId = (cmdA.private?.reveal() as { sessionId: string }).sessionId;
    const sentBefore = daemon.sent.length;

    const b = new Frames();
    const cmdB = value(await adapter.processes.attach(handle, sessionId, { owner: b.sink, stdin: true }));
    assert.notEqual(cmdB.ref, cmdA.ref);
    const first = await b.next((f) => f.type === 'stdout');
    assert.equal(first.type === 'stdout' && Buffer.from(first.data).toString(), 'hello');

    const wire = daemon.sent.slice(sentBefore).map((t) => JSON.parse(t) as Record<string, unknown>);
    const attachId = (daemon.received.at(-1) as { id: number }).id;
    assert.equal(wire[0]?.id, attachId, 'the reply comes first');
    assert.equal(wire[1]?.replay_for, attachId, 'then the replay');

    value(await adapter.processes.writeStdin(cmdA, Buffer.from('ping')));
    await a.next(isStdout('echo:ping'));
    await b.next(isStdout('echo:ping'));
    assert.equal(a.text(), 'helloecho:ping', 'the spawner never sees the replay');
    assert.equal(b.text(), 'helloecho:ping');

    value(await adapter.processes.closeStdin(cmdA));
    await a.next(isTerminal);
    await b.next(isTerminal);
    await settle();
    assert.deepEqual(
      a.terminals().map((f) => f.type === 'exit' && f.code),
      [0],
    );
    assert.deepEqual(
      b.terminals().map((f) => f.type === 'exit' && f.code),
      [0],
    );

    const after = await adapter.processes.writeStdin(cmdA, Buffer.from('late'));
    assert.ok(!after.ok && after.error.code === 'command_exited');
    value(await adapter.processes.closeStdin(cmdA));
    const sessions = value(await adapter.processes.listSessions(handle));
    assert.equal(sessions[0]?.id, sessionId);
    assert.equal(sessions[0]?.exitCode, 0);
  });

  it('attach to an exited session replays output and the exit', async () => {
    const a = new Frames();
    const cmd = value(await adapter.processes.spawn(handle, 'x', ['out:1', 'err:2', 'exit:7'], { owner: a.sink }));
    await a.next(isTerminal);
    const sid = (cmd.private?.reveal() as { sessionId: string }).sessionId;
    const b = new Frames();
    value(await adapter.processes.attach(handle, sid, { owner: b.sink }));
    await b.next(isTerminal);
    assert.deepEqual(
      b.all.map((f) => f.type),
      ['stdout', 'stderr', 'exit'],
    );
    const missing = await adapter.processes.attach(handle, 's-nope', { owner: b.sink });
    assert.ok(!missing.ok && missing.error.code === 'not_found');
  });

  it('the last listener leaving sends detach with id 0; the first leaving does not', async () => {
    const a = new Frames();
    const cmdA = value(
      await adapter.processes.spawn(handle, 'agent', ['out:x', 'stay'], { owner: a.sink, stdin: true }),
    );
    await a.next(isStdout('x'));
    const sid = (cmdA.private?.reveal() as { sessionId: string }).sessionId;
    const b = new Frames();
    const cmdB = value(await adapter.processes.attach(handle, sid, { owner: b.sink }));
    await b.next(isStdout('x'));
    const detaches = () => daemon.received.filter((r) => r.op === 'detach' && r.session_id === sid);
    value(await adapter.processes.stopCommand(cmdA));
    value(await adapter.processes.stopCommand(cmdA));
    await settle();
    assert.equal(detaches().length, 0);
    value(await adapter.processes.stopCommand(cmdB));
    await until(() => detaches().length === 1, 'detach');
    assert.equal(detaches()[0]?.id, 0);
    // Detached, the process lives on: stdin still reaches it, and no frames reach the stopped owners.
    value(await adapter.processes.writeStdin(cmdA, Buffer.from('still-there')));
    await settle();
    assert.ok(!a.text().includes('still-there') && !b.text().includes('still-there'));
    value(await adapter.processes.closeStdin(cmdA));
  });

  it('write_stdin and close_stdin on an unknown session map not_found to command_exited and ok', async () => {
    const a = new Frames();
    const real = value(await adapter.processes.spawn(handle, 'x', ['exit:0'], { owner: a.sink }));
    await a.next(isTerminal);
    const priv = real.private?.reveal() as { runnerId: string; name: string; sessionId: string };
    const ghost: Command = { provider: 'runner', ref: 'ghost', private: new Private({ ...priv, sessionId: 's-404' }) };
    const w = await adapter.processes.writeStdin(ghost, Buffer.from('x'));
    assert.ok(!w.ok && w.error.code === 'command_exited');
    value(await adapter.processes.closeStdin(ghost));
    const noPriv = await adapter.processes.writeStdin({ provider: 'runner', ref: 'bare' }, Buffer.from('x'));
    assert.ok(!noPriv.ok && noPriv.error.code === 'invalid');
    assert.ok(!inspect(real).includes(priv.sessionId), 'Command.private stays hidden');
  });

  it('a runner without confinement: network policy is not_supported, and there is no checkpoints part', async () => {
    assert.deepEqual([...capabilitiesOf(adapter)].sort(), ['attach', 'suspend']);
    assert.deepEqual([...capabilitiesOf(adapter, handle)].sort(), ['attach', 'suspend']);
    const p = await adapter.network.applyNetworkPolicy(handle, { allow: [] });
    assert.ok(!p.ok && p.error.code === 'not_supported');
    assert.equal((adapter as SandboxAdapter).checkpoints, undefined);
  });

  it('routing: an unparseable name is invalid, an offline runner is unavailable(runner_offline), never not_found', async () => {
    const bad = await adapter.lifecycle.get(adapter.buildHandle('fountain-12345678-abcdef01'));
    assert.ok(!bad.ok && bad.error.code === 'invalid');
    const offline = adapter.buildHandle(mint(OTHER_ID));
    for (const r of [
      await adapter.lifecycle.get(offline),
      await adapter.lifecycle.destroy(offline),
      await adapter.lifecycle.create(offline.name),
    ]) {
      assert.ok(!r.ok && r.error.code === 'unavailable' && r.error.detail === 'runner_offline', inspect(r));
    }
    const spawned = await adapter.processes.spawn(offline, 'x', [], { owner: () => {} });
    assert.ok(!spawned.ok && spawned.error.detail === 'runner_offline');
  });

  it('heartbeat calls host.heartbeat and pings the daemon', async () => {
    const pings = daemon.pings;
    const beats = heartbeats.length;
    await until(() => daemon.pings >= pings + 2 && heartbeats.length >= beats + 2, 'two heartbeats');
    assert.equal(heartbeats.at(-1)?.runnerId, RUNNER_ID);
  });

  it('a dropped socket: error runner_disconnected (no exit), pending calls fail, offline after unregister; sessions survive', async () => {
    const a = new Frames();
    const cmd = value(
      await adapter.processes.spawn(handle, 'agent', ['out:before', 'stay'], { owner: a.sink, stdin: true }),
    );
    await a.next(isStdout('before'));
    const sid = (cmd.private?.reveal() as { sessionId: string }).sessionId;
    const connects = daemon.connects;
    presence.length = 0;

    const dropped = new Frames();
    const dropCmd = adapter.processes.spawn(handle, 'agent', ['out:last words', 'drop'], { owner: dropped.sink });
    const dc = value(await dropCmd);
    const err = await dropped.next(isTerminal);
    assert.equal(err.type, 'error');
    assert.ok(err.type === 'error' && err.error.code === 'unavailable' && err.error.detail === 'runner_disconnected');
    assert.equal(err.ref, dc.ref);
    assert.equal(dropped.text(), 'last words');
    const stayErr = await a.next(isTerminal);
    assert.ok(stayErr.type === 'error' && stayErr.error.detail === 'runner_disconnected');
    await settle();
    assert.equal(dropped.terminals().length, 1, 'no exit follows the error');
    assert.equal(a.terminals().length, 1);
    const offline = presence.find((p) => p.state === 'offline');
    assert.ok(offline, 'offline presence published');
    assert.equal(offline.stillRegistered, false, 'unregistered before presence offline');

    await until(() => daemon.connects > connects, 'the daemon reconnecting');
    await daemon.waitOnline();
    const b = new Frames();
    value(await adapter.processes.attach(handle, sid, { owner: b.sink, stdin: true }));
    await b.next(isStdout('before'));
    value(await adapter.processes.writeStdin(cmd, Buffer.from('again')));
    await b.next(isStdout('echo:again'));
    value(await adapter.processes.closeStdin(cmd));
    await b.next(isTerminal);
  });

  it('placement picks the most recently connected online runner of the account', async () => {
    const none = pickRunner(new LocalRunnerHost(), 'acct');
    assert.ok(!none.ok && none.error === 'no_runner_online');
    // connectedAt has millisecond resolution; make sure the second runner is strictly newer.
    await settle(5);
    const second = await startFakeDaemon({ runnerId: OTHER_ID, name: 'second', hub, logger });
    try {
      const picked = pickRunner(host, daemon.connection()!.info.accountId);
      assert.ok(picked.ok);
      assert.equal(picked.value.runnerId, OTHER_ID);
      const otherHandle = value(await adapter.lifecycle.create(mint(OTHER_ID)));
      const names = value(await adapter.lifecycle.listAllNames());
      assert.ok(names.includes(otherHandle.name) && names.includes(handle.name));
    } finally {
      await second.stop();
    }
  });
});

describe('runner adapter against misbehaving daemons', () => {
  let hub: RunnerTestHub;
  before(async () => {
    hub = await startRunnerTestHub({ logger, callTimeoutMs: 1000 });
  });
  after(async () => {
    await hub.close();
  });

  it('normalises error replies, malformed replies, stray ids and lenient stream frames', async () => {
    const daemon = await startFakeDaemon({
      runnerId: RUNNER_ID,
      name: 'weird',
      hub,
      logger,
      intercept: (req) => {
        if (req.op === 'suspend') return `{"id":${req.id},"result":{}}`;
        if (req.op === 'resume') return `{"id":${req.id},"ok":false,"error":"exploded","detail":"boom"}`;
        if (req.op === 'get')
          return [`{"id":999,"ok":true,"result":{}}`, `{"id":${req.id},"ok":true,"result":{"status":5}}`];
        if (req.op === 'list') return `{"id":${req.id},"ok":true,"result":{"names":"nope"}}`;
        if (req.op === 'destroy') return `{"id":${req.id},"ok":false,"error":"invalid","detail":"bad sandbox name"}`;
        if (req.op === 'list_sessions') return null;
        if (req.op === 'spawn') {
          return [
            `{"id":${req.id},"ok":true,"result":{"session_id":"s-w"}}`,
            `{"stream":"stdout","session_id":"s-w","data":"not base64!"}`,
            `{"stream":"stdout","session_id":"s-w"}`,
            `{"stream":"stdout","session_id":"s-w","data":"aGk="}`,
            `{"stream":"stdout","session_id":"s-w","data":"aGk=","replay_for":12345}`,
            `[1,2,3]`,
            `{"hello":"world"}`,
            `{"stream":"exit","session_id":"s-w"}`,
            `{"stream":"exit","session_id":"s-w","code":4}`,
          ];
        }
        return undefined;
      },
    });
    try {
      const adapter = new RunnerAdapter(hub.host, { logger });
      const h = value(await adapter.lifecycle.create(mint()));
      const s = await adapter.lifecycle.suspend(h);
      assert.ok(
        !s.ok &&
          s.error.code === 'provider' &&
          s.error.provider === 'runner' &&
          s.error.detail?.startsWith('malformed_reply'),
        inspect(s),
      );
      const r = await adapter.lifecycle.resume(h);
      assert.ok(!r.ok && r.error.code === 'provider' && r.error.detail === 'exploded: boom', inspect(r));
      const g = await adapter.lifecycle.get(h);
      assert.ok(!g.ok && g.error.code === 'provider' && g.error.detail?.startsWith('malformed_get_reply'), inspect(g));
      const l = await adapter.lifecycle.listAllNames();
      assert.ok(!l.ok && l.error.detail?.startsWith('malformed_list'), inspect(l));
      const d = await adapter.lifecycle.destroy(h);
      assert.ok(!d.ok && d.error.code === 'invalid' && d.error.detail === 'bad sandbox name', inspect(d));
      const t = await adapter.processes.listSessions(h);
      assert.ok(!t.ok && t.error.code === 'unavailable' && t.error.detail === 'runner_timeout', inspect(t));

      const f = new Frames();
      value(await adapter.processes.spawn(h, 'x', [], { owner: f.sink }));
      await f.next(isTerminal);
      await settle();
      const outs = f.all
        .filter((x) => x.type === 'stdout')
        .map((x) => (x.type === 'stdout' ? Buffer.from(x.data).toString() : ''));
      assert.deepEqual(
        outs,
        ['not base64!', '', 'hi'],
        'bad base64 is raw text, missing data is empty, stray replay is dropped',
      );
      assert.deepEqual(
        f.terminals(),
        [{ type: 'exit', ref: f.terminals()[0]?.ref, code: 0 }],
        'missing code is 0, and exit ends the subscription',
      );
      // The connection survived all of it.
      assert.ok(value(await adapter.lifecycle.create(h.name)));
    } finally {
      await daemon.stop();
    }
  });

  it('a call pending when the socket drops fails with runner_disconnected', async () => {
    const daemon = await startFakeDaemon({
      runnerId: RUNNER_ID,
      name: 'silent',
      hub,
      logger,
      reconnect: false,
      intercept: (req) => (req.op === 'get' ? null : undefined),
    });
    try {
      const adapter = new RunnerAdapter(hub.host, { logger });
      const h = value(await adapter.lifecycle.create(mint()));
      const pending = adapter.lifecycle.get(h);
      await settle(20);
      daemon.drop();
      const r = await pending;
      assert.ok(!r.ok && r.error.code === 'unavailable' && r.error.detail === 'runner_disconnected', inspect(r));
      await until(() => hub.host.whereis(RUNNER_ID) === undefined, 'unregister');
      const after = await adapter.lifecycle.get(h);
      assert.ok(!after.ok && after.error.detail === 'runner_offline');
    } finally {
      await daemon.stop();
    }
  });
});

describe('call budgets and replay_from', () => {
  it('exec without a timeout outlives the call timeout; replay_from reaches Command.replayFrom', async () => {
    const hub = await startRunnerTestHub({ logger, callTimeoutMs: 100 });
    const daemon = await startFakeDaemon({
      runnerId: RUNNER_ID,
      name: 'budget',
      hub,
      logger,
      reconnect: false,
      intercept: (req) => {
        if (req.op === 'exec') return null;
        if (req.op === 'attach')
          return `{"id":${req.id},"ok":true,"result":{"session_id":"${req.session_id}","replay_from":42}}`;
        return undefined;
      },
    });
    try {
      const adapter = new RunnerAdapter(hub.host, { logger });
      const h = value(await adapter.lifecycle.create(mint()));
      const attached = value(await adapter.processes.attach(h, 's-any', { owner: () => {} }));
      assert.equal(attached.replayFrom, 42);
      const exec = adapter.processes.exec(h, 'sleep', ['forever']);
      // Well past the 100 ms call timeout: an exec without its own timeout has no call timeout either.
      await settle(400);
      daemon.drop();
      const r = await exec;
      assert.ok(!r.ok && r.error.detail === 'runner_disconnected', inspect(r));
    } finally {
      await daemon.stop();
      await hub.close();
    }
  });
});

describe('the server end of the socket refuses bad frames', () => {
  let hub: RunnerTestHub;
  const announced: string[] = [];
  before(async () => {
    const host = new LocalRunnerHost({ presence: (info, state) => announced.push(`${info.name}:${state}`) });
    hub = await startRunnerTestHub({ logger, host, refuseOnline: false });
  });
  after(async () => {
    await hub.close();
  });

  const dial = (name: string, opts: { autoPong?: boolean } = {}): Promise<WebSocket> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(`${hub.url}?name=${name}`, opts);
      ws.once('open', () => resolve(ws));
      ws.once('error', reject);
    });
  const closed = (ws: WebSocket): Promise<{ code: number; reason: string }> =>
    new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));

  it('a binary frame closes with 1003 and unregisters', async () => {
    hub.enroll('bin', RUNNER_ID);
    const ws = await dial('bin');
    assert.ok(hub.host.whereis(RUNNER_ID));
    const c = closed(ws);
    ws.send(Buffer.from([1, 2, 3]));
    assert.deepEqual(await c, { code: 1003, reason: 'frames must be JSON text' });
    await until(() => hub.host.whereis(RUNNER_ID) === undefined, 'unregister');
  });

  it('non-JSON text closes with 1003; a JSON non-frame is ignored', async () => {
    hub.enroll('garbage', RUNNER_ID);
    const ws = await dial('garbage');
    ws.send('{"neither":"reply nor stream"}');
    ws.send('{"id":77,"ok":true,"result":{}}');
    ws.send('"just a string"');
    await settle();
    assert.ok(hub.host.whereis(RUNNER_ID), 'still connected after ignorable frames');
    const c = closed(ws);
    ws.send('{not json');
    assert.equal((await c).code, 1003);
  });

  it('a frame nested deeper than the bound closes with 1003 instead of blowing the stack (issue 22 #11)', async () => {
    hub.enroll('deep', RUNNER_ID);
    const ws = await dial('deep');
    const c = closed(ws);
    ws.send(`{"neither":${'['.repeat(200_000)}${']'.repeat(200_000)}}`);
    assert.deepEqual(await c, { code: 1003, reason: 'frames may nest at most 64 levels' });
    await until(() => hub.host.whereis(RUNNER_ID) === undefined, 'unregister');
  });

  it('a second socket for a registered runner is closed with 4409 and announces nothing', async () => {
    hub.enroll('twice', RUNNER_ID);
    const first = await dial('twice');
    const conn = hub.host.whereis(RUNNER_ID);
    assert.ok(conn);
    announced.length = 0;
    const second = await dial('twice');
    const c = await closed(second);
    assert.deepEqual(announced, [], 'a refused registration announces no presence');
    assert.deepEqual(c, { code: 4409, reason: 'a runner named twice is already connected' });
    assert.equal(hub.accepted.at(-1), null);
    assert.equal(hub.host.whereis(RUNNER_ID), conn, 'the first connection stays registered');
    const c1 = closed(first);
    conn.close(4404, 'runner deleted');
    assert.deepEqual(await c1, { code: 4404, reason: 'runner deleted' });
    assert.equal(hub.host.whereis(RUNNER_ID), undefined);
    assert.deepEqual(announced, ['twice:offline']);
  });
});

describe('a silent runner socket', () => {
  it('is dropped after the idle timeout when it answers no pings', async () => {
    const host = new LocalRunnerHost();
    const hub = await startRunnerTestHub({ logger, host, heartbeatMs: 20, idleTimeoutMs: 150 });
    try {
      hub.enroll('mute', RUNNER_ID);
      const ws = new WebSocket(`${hub.url}?name=mute`, { autoPong: false });
      const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
      ws.on('error', () => {});
      // Under load the server may drop it before the client even sees `open`: assert on the hub's side.
      assert.equal(await closed, 1006);
      assert.equal(hub.accepted.length, 1);
      assert.ok(hub.accepted[0], 'the socket was accepted and registered first');
      assert.equal(host.whereis(RUNNER_ID), undefined);
    } finally {
      await hub.close();
    }
  });
});

describe('hooks and owners that fail', () => {
  it('a throwing or rejecting host hook and a throwing owner disturb nothing', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown): void => {
      unhandled.push(e);
    };
    process.on('unhandledRejection', onUnhandled);
    let beats = 0;
    const host = new LocalRunnerHost({
      heartbeat: async () => {
        beats += 1;
        throw new Error('database down');
      },
      presence: () => {
        throw new Error('bus down');
      },
    });
    const hub = await startRunnerTestHub({ logger, host, heartbeatMs: 10 });
    const daemon = await startFakeDaemon({ runnerId: RUNNER_ID, name: 'fragile', hub, logger });
    try {
      const adapter = new RunnerAdapter(host, { logger });
      const h = value(await adapter.lifecycle.create(mint()));
      const good = new Frames();
      const cmd = value(
        await adapter.processes.spawn(h, 'x', ['out:a', 'stay'], {
          owner: () => {
            throw new Error('owner bug');
          },
          stdin: true,
        }),
      );
      const sid = (cmd.private?.reveal() as { sessionId: string }).sessionId;
      value(await adapter.processes.attach(h, sid, { owner: good.sink }));
      value(await adapter.processes.writeStdin(cmd, Buffer.from('b')));
      await good.next(isStdout('echo:b'));
      await until(() => beats >= 2, 'heartbeats');
      value(await adapter.lifecycle.get(h));
    } finally {
      await daemon.stop();
      await hub.close();
      await settle(20);
      process.off('unhandledRejection', onUnhandled);
    }
    assert.deepEqual(unhandled, []);
  });
});

describe('pure helpers', () => {
  it('maps /home/sprite paths the way the process backend does', () => {
    const d = '/r/runner-x';
    assert.equal(mapSandboxPath(d, '/home/sprite'), d);
    assert.equal(mapSandboxPath(d, ''), d);
    assert.equal(mapSandboxPath(d, '~'), d);
    assert.equal(mapSandboxPath(d, '~/a/b'), `${d}/a/b`);
    assert.equal(mapSandboxPath(d, '/home/sprite/a'), `${d}/a`);
    assert.equal(mapSandboxPath(d, 'rel/x'), `${d}/rel/x`);
    assert.equal(mapSandboxPath(d, '/tmp/x'), '/tmp/x');
    assert.equal(mapSandboxPath(d, '/home/spritely'), '/home/spritely');
  });
});
