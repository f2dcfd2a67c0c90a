import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { SpritesStub, type SpritesStubOptions } from '../../../test/stubs/sprites/server.ts';
import { Frames, eventually, sleep } from '../../../test/stubs/sprites/frames.ts';
import type { Handle } from '../../sandbox/index.ts';
import { SpritesAdapter } from './adapter.ts';

const TOKEN = 'sprites-test-token-5f2c9a';
// Prints a line, echoes each stdin line, exits 0 on EOF.
const STAY = ['-c', 'echo ready; while read l; do echo "echo:$l"; done'];
let counter = 0;
const name = () => `fountain-quirks-${process.pid}-${++counter}`;

async function setup(opts: Partial<SpritesStubOptions> = {}) {
  const stub = await SpritesStub.start({ token: TOKEN, ...opts });
  const adapter = new SpritesAdapter({ token: TOKEN, baseUrl: stub.url });
  return { stub, adapter };
}

async function created(adapter: SpritesAdapter): Promise<Handle> {
  const h = await adapter.lifecycle.create(name());
  assert.ok(h.ok, inspect(h));
  return h.value;
}

describe('sprites quirks (each test names the quirk its workaround answers)', () => {
  describe('stub with short delays', () => {
    let stub: SpritesStub;
    let adapter: SpritesAdapter;
    before(async () => {
      ({ stub, adapter } = await setup({
        defaultMaxRunAfterDisconnectMs: 100,
        scrollbackBytes: 64,
        sessionInfoDelayMs: 150,
      }));
    });
    after(() => stub.close());

    it('quirk session_info ack: spawn returns only once the process is registered, so the first stdin write is not lost', async () => {
      const h = await created(adapter);
      const frames = new Frames();
      const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink });
      assert.ok(c.ok, inspect(c));
      // Written the instant spawn returns, as an ACP client writes `initialize`.
      const w = await adapter.processes.writeStdin(c.value, Buffer.from('initialize\n'));
      assert.ok(w.ok, inspect(w));
      await frames.until((f) => f.text().includes('echo:initialize'), 'the echo of the first stdin write');
      await adapter.processes.closeStdin(c.value);
      await frames.until((f) => f.terminals().length > 0, 'exit');
      assert.deepEqual(
        frames.terminals().map((f) => f.type),
        ['exit'],
      );
    });

    it('quirk ten-second disconnect kill (scaled to 100 ms): a detachable session outlives its dropped socket', async () => {
      const h = await created(adapter);
      const frames = new Frames();
      const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink, detachable: true });
      assert.ok(c.ok, inspect(c));
      await frames.until((f) => f.text().includes('ready'), 'first output');
      const sessions = await adapter.processes.listSessions(h);
      assert.ok(sessions.ok && sessions.value.length === 1, inspect(sessions));
      const id = sessions.value[0]!.id;
      await adapter.processes.stopCommand(c.value);
      // Well past the stub's disconnect grace: without max_run_after_disconnect=0 it is dead by now.
      await sleep(800);
      assert.ok(stub.liveSessionIds(h.name).includes(id), 'the detached process is still running');
      const again = new Frames();
      const a = await adapter.processes.attach(h, id, { owner: again.sink, stdin: true });
      assert.ok(a.ok, inspect(a));
      await adapter.processes.writeStdin(a.value, Buffer.from('still-here\n'));
      await again.until((f) => f.text().includes('echo:still-here'), 'echo through the reattached session');
      await adapter.processes.closeStdin(a.value);
      await again.until((f) => f.terminals().length > 0, 'exit after reattach');
      assert.equal(again.terminals()[0]?.type, 'exit');
    });

    it('quirk ten-second disconnect kill (stub check): a session spawned without detachable dies after the grace', async () => {
      const h = await created(adapter);
      const frames = new Frames();
      const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink });
      assert.ok(c.ok, inspect(c));
      await frames.until((f) => f.text().includes('ready'), 'first output');
      assert.equal(stub.liveSessionIds(h.name).length, 1);
      await adapter.processes.stopCommand(c.value);
      await eventually(() => stub.liveSessionIds(h.name).length === 0, 'the non-detachable process to be killed');
    });

    it('quirk partial scrollback: attach replays from byte zero, not the native mid-line tail', async () => {
      const h = await created(adapter);
      const frames = new Frames();
      const script =
        'i=0; while [ $i -lt 40 ]; do echo "line-$i"; i=$((i+1)); done; while read l; do echo "echo:$l"; done';
      const c = await adapter.processes.spawn(h, 'sh', ['-c', script], { owner: frames.sink, detachable: true });
      assert.ok(c.ok, inspect(c));
      await frames.until((f) => f.text().includes('line-39\n'), 'all forty lines');
      const full = frames.text();
      assert.ok(full.length > 64 * 3, 'output is several times the scrollback');
      const sessions = await adapter.processes.listSessions(h);
      assert.ok(sessions.ok && sessions.value[0], inspect(sessions));
      await adapter.processes.stopCommand(c.value);
      const replay = new Frames();
      const a = await adapter.processes.attach(h, sessions.value[0].id, { owner: replay.sink, stdin: true });
      assert.ok(a.ok, inspect(a));
      await replay.until((f) => f.text().includes('line-39\n'), 'the replay to reach the last line');
      assert.equal(replay.text(), full, 'the replay is the whole output from byte zero');
      await adapter.processes.writeStdin(a.value, Buffer.from('after\n'));
      await replay.until((f) => f.text().includes('echo:after'), 'live output after the replay');
      await adapter.processes.closeStdin(a.value);
      await replay.until((f) => f.terminals().length > 0, 'exit');
      assert.deepEqual(
        replay.terminals().map((f) => (f.type === 'exit' ? f.code : f.type)),
        [0],
      );
    });

    it('quirk is_active is false while detached: list_sessions still returns the detached session', async () => {
      const h = await created(adapter);
      const frames = new Frames();
      const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink, detachable: true });
      assert.ok(c.ok);
      await frames.until((f) => f.text().includes('ready'), 'first output');
      await adapter.processes.stopCommand(c.value);
      await sleep(50);
      const sessions = await adapter.processes.listSessions(h);
      assert.ok(sessions.ok, inspect(sessions));
      assert.equal(sessions.value.length, 1);
      assert.ok(
        sessions.value[0]!.command?.startsWith('sh -c echo ready'),
        `command is what was spawned: ${sessions.value[0]!.command}`,
      );
    });

    it('quirk kill path is /exec/{id}/kill (a sessions/ segment 404s and would read as gone): terminate really ends the session', async () => {
      const h = await created(adapter);
      const frames = new Frames();
      const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink, detachable: true });
      assert.ok(c.ok);
      await frames.until((f) => f.text().includes('ready'), 'first output');
      const [id] = stub.liveSessionIds(h.name);
      assert.ok(id);
      await adapter.processes.stopCommand(c.value);
      const t = await adapter.processes.terminateSession!(h, id, { timeoutMs: 5000 });
      assert.ok(t.ok, inspect(t));
      assert.deepEqual(stub.liveSessionIds(h.name), []);
      const again = await adapter.processes.terminateSession!(h, id, { timeoutMs: 5000 });
      assert.ok(again.ok, 'terminating an absent session is ok');
    });

    it('quirk close without an exit frame: exec is closed_before_exit, spawn ends in an error frame and never exit 0', async () => {
      const h = await created(adapter);
      stub.faults.dropOnOutput = 'SEVER-HERE';
      try {
        const r = await adapter.processes.exec(h, 'sh', ['-c', 'echo SEVER-HERE; sleep 3']);
        assert.ok(!r.ok, inspect(r));
        assert.equal(r.error.code, 'closed_before_exit');
        const frames = new Frames();
        const c = await adapter.processes.spawn(h, 'sh', ['-c', 'echo SEVER-HERE; sleep 3'], { owner: frames.sink });
        assert.ok(c.ok, inspect(c));
        await frames.until((f) => f.terminals().length > 0, 'a terminal frame');
        await sleep(100);
        const terms = frames.terminals();
        assert.equal(terms.length, 1);
        assert.equal(terms[0]!.type, 'error');
        assert.equal(terms[0]!.type === 'error' && terms[0]!.error.code, 'closed_before_exit');
        const w = await adapter.processes.writeStdin(c.value, Buffer.from('x'));
        assert.ok(!w.ok && w.error.code === 'command_exited', inspect(w));
      } finally {
        delete stub.faults.dropOnOutput;
      }
    });

    it('quirk one-byte exit frame: codes above 127 come back exactly', async () => {
      const h = await created(adapter);
      const r = await adapter.processes.exec(h, 'sh', ['-c', 'exit 231']);
      assert.ok(r.ok, inspect(r));
      assert.equal(r.value.exitCode, 231);
    });

    it('quirk env replaces the whole default environment: exec and spawn env add to HOME and PATH', async () => {
      const h = await created(adapter);
      const r = await adapter.processes.exec(h, 'sh', ['-c', 'printf "%s|%s|%s" "$HOME" "$FOO" "$(command -v tee)"'], {
        env: [['FOO', 'bar baz']],
      });
      assert.ok(r.ok, inspect(r));
      const [home, foo, tee] = Buffer.from(r.value.output).toString().split('|');
      assert.ok(home?.endsWith('/home/sprite'), `HOME kept: ${home}`);
      assert.equal(foo, 'bar baz');
      assert.ok(tee, 'PATH kept');
      const frames = new Frames();
      const c = await adapter.processes.spawn(h, 'sh', ['-c', 'printf "%s|%s" "$HOME" "$FOO"'], {
        owner: frames.sink,
        env: [['FOO', 'qux']],
      });
      assert.ok(c.ok, inspect(c));
      await frames.until((f) => f.terminals().length > 0, 'exit');
      assert.match(frames.text(), /\/home\/sprite\|qux$/);
    });

    it('quirk empty rule list means no policy: allow [] denies everything, a list allows only itself', async () => {
      const h = await created(adapter);
      assert.equal(stub.egressAllowed(h.name, 'example.com'), true, 'no policy yet: everything allowed');
      const none = await adapter.network.applyNetworkPolicy(h, { allow: [] });
      assert.ok(none.ok, inspect(none));
      assert.equal(stub.egressAllowed(h.name, 'example.com'), false);
      assert.equal(stub.egressAllowed(h.name, 'github.com'), false, 'the platform defaults are not re-allowed');
      const some = await adapter.network.applyNetworkPolicy(h, { allow: ['api.example.com'] });
      assert.ok(some.ok, inspect(some));
      assert.equal(stub.egressAllowed(h.name, 'api.example.com'), true);
      assert.equal(stub.egressAllowed(h.name, 'example.org'), false);
      const bad = await adapter.network.applyNetworkPolicy(h, { allow: ['not a domain'] });
      assert.ok(!bad.ok && bad.error.code === 'invalid', inspect(bad));
    });
  });

  describe('stub answering duplicates with 400 and policy writes with 200', () => {
    let stub: SpritesStub;
    let adapter: SpritesAdapter;
    before(async () => {
      ({ stub, adapter } = await setup({ duplicateStatus: 400, policyPostStatus: 200 }));
    });
    after(() => stub.close());

    it('quirk duplicate create answers 400 (not 409): create still adopts, createNew refuses', async () => {
      const n = name();
      const first = await adapter.lifecycle.create(n);
      const second = await adapter.lifecycle.create(n);
      assert.ok(first.ok && second.ok, inspect([first, second]));
      const fresh = await adapter.lifecycle.createNew!(n);
      assert.ok(!fresh.ok && (fresh.error.code === 'invalid' || fresh.error.code === 'already_exists'), inspect(fresh));
    });

    it('quirk policy POST answers 200 (docs) rather than 204 (SDK): any 2xx is success', async () => {
      const h = await created(adapter);
      const r = await adapter.network.applyNetworkPolicy(h, { allow: [] });
      assert.ok(r.ok, inspect(r));
      assert.equal(stub.egressAllowed(h.name, 'example.com'), false);
    });
  });

  describe('stub paging two at a time, answering duplicates with 409', () => {
    let stub: SpritesStub;
    let adapter: SpritesAdapter;
    before(async () => {
      ({ stub, adapter } = await setup({ pageSize: 2, duplicateStatus: 409 }));
    });
    after(() => stub.close());

    it('quirk list paging: every page is read, and a page promising more without a token is truncated', async () => {
      const names = [];
      for (let i = 0; i < 5; i++) names.push((await created(adapter)).name);
      const r = await adapter.lifecycle.listAllNames();
      assert.ok(r.ok, inspect(r));
      assert.deepEqual([...r.value].sort(), [...names].sort());
      stub.faults.brokenPaging = true;
      try {
        const t = await adapter.lifecycle.listAllNames();
        assert.ok(!t.ok && t.error.code === 'truncated', inspect(t));
      } finally {
        stub.faults.brokenPaging = false;
      }
    });

    it('quirk duplicate create answers 409: create adopts, createNew is already_exists with a fresh instance id after destroy', async () => {
      const n = name();
      const first = await adapter.lifecycle.createNew!(n);
      assert.ok(first.ok && first.value.instanceId, inspect(first));
      const again = await adapter.lifecycle.create(n);
      assert.ok(again.ok, inspect(again));
      const dup = await adapter.lifecycle.createNew!(n);
      assert.ok(!dup.ok && dup.error.code === 'already_exists', inspect(dup));
      assert.ok((await adapter.lifecycle.destroy(first.value)).ok);
      const second = await adapter.lifecycle.createNew!(n);
      assert.ok(
        second.ok && second.value.instanceId && second.value.instanceId !== first.value.instanceId,
        inspect(second),
      );
    });

    it('quirk 429 carries retry_after_seconds: create is rate_limited with the hint', async () => {
      stub.faults.rateLimitCreates = 1;
      const r = await adapter.lifecycle.create(name());
      assert.ok(!r.ok && r.error.code === 'rate_limited', inspect(r));
      assert.equal(r.error.retryAfterMs, 7000);
    });

    it('quirk bearer auth on REST and on the exec upgrade: a wrong token is denied, never not_found, and never echoed', async () => {
      const h = await created(adapter);
      const wrong = new SpritesAdapter({ token: 'wrong-token-value-77', baseUrl: stub.url });
      const g = await wrong.lifecycle.get(wrong.buildHandle(h.name));
      assert.ok(!g.ok && g.error.code === 'denied', inspect(g));
      const e = await wrong.processes.exec(wrong.buildHandle(h.name), 'true', []);
      assert.ok(!e.ok && e.error.code === 'denied', inspect(e));
      const unset = new SpritesAdapter({ token: '  ', baseUrl: stub.url });
      const u = await unset.lifecycle.get(unset.buildHandle(h.name));
      assert.ok(!u.ok && u.error.code === 'denied', inspect(u));
      for (const v of [g, e, h, inspect(h, { depth: 9 }), JSON.stringify(h), inspect(adapter, { depth: 9 })]) {
        const text = typeof v === 'string' ? v : `${inspect(v, { depth: 9 })}${JSON.stringify(v)}`;
        assert.ok(!text.includes(TOKEN) && !text.includes('wrong-token-value-77'), `token leaked in ${text}`);
      }
    });
  });

  describe('stub hibernating after 200 ms idle', () => {
    let stub: SpritesStub;
    let adapter: SpritesAdapter;
    before(async () => {
      ({ stub, adapter } = await setup({ hibernateAfterMs: 200 }));
    });
    after(() => stub.close());

    it('quirk hibernation keeps the disk, not the processes: suspend ends sessions so the sprite can hibernate', async () => {
      const h = await created(adapter);
      const w = await adapter.files.writeFile(h, '/home/sprite/memory.txt', Buffer.from('remember me'));
      assert.ok(w.ok, inspect(w));
      const frames = new Frames();
      const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink, detachable: true });
      assert.ok(c.ok);
      await frames.until((f) => f.text().includes('ready'), 'first output');
      const s = await adapter.lifecycle.suspend(h);
      assert.ok(s.ok, inspect(s));
      await eventually(async () => {
        const g = await adapter.lifecycle.get(h);
        return g.ok && g.value.status === 'suspended';
      }, 'the sprite to hibernate');
      const r = await adapter.lifecycle.resume(h);
      assert.ok(r.ok, inspect(r));
      const cat = await adapter.processes.exec(r.value, 'cat', ['memory.txt']);
      assert.ok(cat.ok && Buffer.from(cat.value.output).toString() === 'remember me', inspect(cat));
      const sessions = await adapter.processes.listSessions(r.value);
      assert.ok(sessions.ok && sessions.value.length === 0, inspect(sessions));
      assert.equal(readFileSync(stub.hostPath(h.name, '/home/sprite/memory.txt')!, 'utf8'), 'remember me');
    });
  });

  describe('issue 19: first-contact defects the stub used to hide', () => {
    it('item 8 (kill answers 410 Gone for an ended session; replayers end with their shim): suspend never fails on one session and never kills a replayer', async () => {
      const { stub, adapter } = await setup({ listEndedForMs: 60_000 });
      try {
        const h = await created(adapter);
        const quick = await adapter.processes.exec(h, 'sh', ['-c', 'echo done']);
        assert.ok(quick.ok, inspect(quick));
        const frames = new Frames();
        const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink, detachable: true });
        assert.ok(c.ok, inspect(c));
        await frames.until((f) => f.text().includes('ready'), 'first output');
        const sessions = await adapter.processes.listSessions(h);
        assert.ok(sessions.ok, inspect(sessions));
        const shim = sessions.value.find((x) => x.command?.includes('while read'));
        assert.ok(shim, inspect(sessions));
        await adapter.processes.stopCommand(c.value);
        const replay = new Frames();
        const a = await adapter.processes.attach(h, shim.id, { owner: replay.sink });
        assert.ok(a.ok, inspect(a));
        await replay.until((f) => f.text().includes('ready'), 'the replay');
        stub.kills.length = 0;
        const s = await adapter.lifecycle.suspend(h);
        assert.ok(s.ok, `a failed suspend becomes a destroy: ${inspect(s)}`);
        assert.ok(stub.kills.includes(shim.id), 'the shim session was ended');
        const raw = await fetch(`${stub.url}/v1/sprites/${h.name}/exec`, {
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        const listed = (await raw.json()) as { sessions: Array<{ id: number; command: string }> };
        const replayers = listed.sessions.filter((x) => x.command.includes('fountain-replay')).map((x) => String(x.id));
        for (const id of replayers)
          assert.ok(!stub.kills.includes(id), `replayer ${id} was killed: ${inspect(stub.kills)}`);
        assert.equal(stub.status(h.name) !== null, true, 'the sprite and its disk are still there');
      } finally {
        await stub.close();
      }
    });

    it('item 9 (sprites older than 0.0.1-rc30 attach only with ?id=): attach falls back on the 404 of /exec/{id}', async () => {
      const { stub, adapter } = await setup({ legacyAttach: true });
      try {
        const h = await created(adapter);
        const frames = new Frames();
        const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink, detachable: true });
        assert.ok(c.ok, inspect(c));
        await frames.until((f) => f.text().includes('ready'), 'first output');
        const sessions = await adapter.processes.listSessions(h);
        assert.ok(sessions.ok && sessions.value[0], inspect(sessions));
        await adapter.processes.stopCommand(c.value);
        const replay = new Frames();
        const a = await adapter.processes.attach(h, sessions.value[0].id, { owner: replay.sink, stdin: true });
        assert.ok(a.ok, inspect(a));
        assert.ok((await adapter.processes.writeStdin(a.value, Buffer.from('legacy\n'))).ok);
        await replay.until((f) => f.text().includes('echo:legacy'), 'stdin through the legacy attach');
        await adapter.processes.closeStdin(a.value);
        await replay.until((f) => f.terminals().length > 0, 'exit');
        assert.deepEqual(replay.summary().slice(-1), ['exit:0']);
      } finally {
        await stub.close();
      }
    });

    for (const mode of ['after_output', 'never'] as const) {
      it(`item 10 (session_info order is undocumented; here: ${mode}): exec keeps output that arrives before it, and does not wait for it`, async () => {
        const { stub, adapter } = await setup({ sessionInfo: mode });
        try {
          const h = await created(adapter);
          const r = await adapter.processes.exec(h, 'sh', ['-c', 'echo early; echo late'], { timeoutMs: 10_000 });
          assert.ok(r.ok, inspect(r));
          assert.equal(Buffer.from(r.value.output).toString(), 'early\nlate\n');
          {
            const frames = new Frames();
            const c = await adapter.processes.spawn(h, 'sh', ['-c', 'echo first-words; read l; echo "got:$l"'], {
              owner: frames.sink,
            });
            assert.ok(c.ok, inspect(c));
            assert.ok((await adapter.processes.writeStdin(c.value, Buffer.from('x\n'))).ok);
            await frames.until((f) => f.terminals().length > 0, 'exit');
            assert.equal(
              frames.text(),
              'first-words\ngot:x\n',
              'output sent before session_info (or without it) is kept',
            );
          }
        } finally {
          await stub.close();
        }
      });
    }

    it('item 11 (fast commands close with 1000 and no exit frame, sprites-py#16): resume and the exit code after attach retry the probe once', async () => {
      const { stub, adapter } = await setup();
      try {
        const h = await created(adapter);
        stub.faults.closeWithoutExit = { times: 1, commandIncludes: 'true' };
        const r = await adapter.lifecycle.resume(h);
        assert.ok(r.ok, `resume failed on one lost exit frame: ${inspect(r)}`);
        const frames = new Frames();
        const c = await adapter.processes.spawn(h, 'sh', STAY, { owner: frames.sink, detachable: true });
        assert.ok(c.ok, inspect(c));
        await frames.until((f) => f.text().includes('ready'), 'first output');
        const sessions = await adapter.processes.listSessions(h);
        assert.ok(sessions.ok && sessions.value[0], inspect(sessions));
        await adapter.processes.stopCommand(c.value);
        stub.faults.closeWithoutExit = { times: 1, commandIncludes: 'fountain-exit' };
        const replay = new Frames();
        const a = await adapter.processes.attach(h, sessions.value[0].id, { owner: replay.sink, stdin: true });
        assert.ok(a.ok, inspect(a));
        await replay.until((f) => f.text().includes('ready'), 'the replay');
        assert.ok((await adapter.processes.closeStdin(a.value)).ok);
        await replay.until((f) => f.terminals().length > 0, 'the terminal frame');
        assert.deepEqual(replay.summary(), ['stdout:ready\n', 'exit:0']);
      } finally {
        await stub.close();
      }
    });
  });

  it('a stopped endpoint is unavailable, never not_found', async () => {
    const { stub, adapter } = await setup();
    const h = await created(adapter);
    await stub.close();
    for (const r of [
      await adapter.lifecycle.get(h),
      await adapter.processes.exec(h, 'true', []),
      await adapter.processes.listSessions(h),
    ]) {
      assert.ok(!r.ok && r.error.code === 'unavailable', inspect(r));
    }
  });
});
