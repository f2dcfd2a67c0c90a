/**
 * One test per Daytona quirk: each drives the adapter against the stub, which
 * reproduces the quirk, and fails if the adapter's workaround is removed. Stub self-checks prove the quirk is there.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { Private, isTransient } from '../../sandbox/index.ts';
import type { Handle } from '../../sandbox/index.ts';
import { DaytonaStub } from '../../../test/stubs/daytona/server.ts';
import type { DaytonaStubOptions } from '../../../test/stubs/daytona/server.ts';
import { FrameLog, STAY_SCRIPT, delay } from '../../../test/stubs/daytona/frames.ts';
import { DaytonaAdapter } from './adapter.ts';
import type { DaytonaHandlePrivate } from './adapter.ts';
import { DaytonaClient } from './client.ts';

const KEY = 'dtn_quirk_test_key_0123456789';
let n = 0;
const name = () => `fountain-quirks0-${(++n).toString(16).padStart(8, '0')}`;

async function rig(opts: Partial<DaytonaStubOptions> = {}) {
  const stub = await DaytonaStub.start({ apiKey: KEY, ...opts });
  const adapter = new DaytonaAdapter({ apiKey: KEY, apiUrl: stub.apiUrl, pollIntervalMs: 20, statePollMs: 10 });
  return { stub, adapter };
}

async function created(adapter: DaytonaAdapter, nm = name()): Promise<Handle> {
  const h = await adapter.lifecycle.create(nm);
  assert.ok(h.ok, `create: ${JSON.stringify(!h.ok && h.error)}`);
  return h.value;
}

const priv = (h: Handle) => (h.private as Private<DaytonaHandlePrivate>).reveal();

/** Raw toolbox access for the stub self-checks, bypassing the adapter's workarounds. */
async function rawToolbox(stub: DaytonaStub, nm: string) {
  const client = new DaytonaClient({ apiUrl: stub.apiUrl, apiKey: new Private(KEY), requestTimeoutMs: 5000 });
  const s = await client.getSandbox(nm);
  assert.ok(s.ok);
  return { client, sandbox: s.value, toolbox: client.toolbox(s.value.toolboxProxyUrl!, s.value.id) };
}

describe('daytona quirk: the input endpoint ends stdin after each write', () => {
  let rigged: Awaited<ReturnType<typeof rig>>;
  before(async () => (rigged = await rig({ inputEofPerWrite: true })));
  after(() => rigged.stub.stop());

  test('stub self-check: a raw input write appends a newline and the command sees EOF', async () => {
    const h = await created(rigged.adapter);
    const { toolbox } = await rawToolbox(rigged.stub, h.name);
    assert.ok((await toolbox.createSession('raw-input')).ok);
    const ex = await toolbox.sessionExecAsync('raw-input', `sh -c 'cat; echo EOF-SEEN'`);
    assert.ok(ex.ok);
    await delay(100);
    const input = await fetch(`${toolbox.base}/process/session/raw-input/command/${ex.value.cmdId}/input`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data: 'abc' }),
    });
    assert.equal(input.status, 204);
    let journal = '';
    for (let i = 0; i < 100 && !journal.includes('EOF-SEEN'); i++) {
      await delay(20);
      const logs = await toolbox.logs('raw-input', ex.value.cmdId);
      if (logs.ok && logs.value.kind === 'journal') journal = Buffer.from(logs.value.bytes).toString('utf8');
    }
    assert.equal(journal, '\x01\x01\x01abc\n\x01\x01\x01EOF-SEEN\n');
  });

  test('adapter: stdin goes through a tail-fed file, so many writes reach one live process and only close_stdin ends it', async () => {
    const h = await created(rigged.adapter);
    const log = new FrameLog();
    const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', STAY_SCRIPT], { owner: log.sink, stdin: true });
    assert.ok(c.ok);
    await log.until((l) => l.text('stdout').includes('ready'), 'ready');
    for (const word of ['one', 'two', 'three']) {
      assert.deepEqual(await rigged.adapter.processes.writeStdin(c.value, Buffer.from(word)), {
        ok: true,
        value: undefined,
      });
      await log.until((l) => l.text('stdout').includes(`${word}\n`), word);
    }
    assert.deepEqual(log.terminals(), [], 'no exit before close_stdin');
    assert.ok((await rigged.adapter.processes.closeStdin(c.value)).ok);
    await log.until((l) => l.terminals().length > 0, 'exit');
    assert.deepEqual(log.terminals(), [{ type: 'exit', ref: c.value.ref, code: 0 }]);
    assert.deepEqual(await rigged.adapter.processes.writeStdin(c.value, Buffer.from('late')), {
      ok: false,
      error: { code: 'command_exited' },
    });
  });

  test('adapter: stdin is byte-exact (the input endpoint would add a newline)', async () => {
    const h = await created(rigged.adapter);
    const log = new FrameLog();
    const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', 'cat > got; wc -c < got'], {
      owner: log.sink,
      stdin: true,
    });
    assert.ok(c.ok);
    assert.ok((await rigged.adapter.processes.writeStdin(c.value, Buffer.from('abc'))).ok);
    assert.ok((await rigged.adapter.processes.writeStdin(c.value, Buffer.from('de'))).ok);
    assert.ok((await rigged.adapter.processes.closeStdin(c.value)).ok);
    await log.until((l) => l.terminals().length > 0, 'exit');
    assert.equal(log.text('stdout').trim(), '5');
  });
});

describe('daytona quirk: the follow websocket is unusable (closes at once, random replay prefix)', () => {
  let rigged: Awaited<ReturnType<typeof rig>>;
  before(async () => (rigged = await rig()));
  after(() => rigged.stub.stop());

  test('stub self-check: the follow socket delivers a prefix and closes without an exit', async () => {
    const h = await created(rigged.adapter);
    const { toolbox } = await rawToolbox(rigged.stub, h.name);
    assert.ok((await toolbox.createSession('follow')).ok);
    const ex = await toolbox.sessionExecAsync('follow', `sh -c 'echo a; echo b; sleep 5'`);
    assert.ok(ex.ok);
    await delay(150);
    const url = `${toolbox.base.replace('http', 'ws')}/process/session/follow/command/${ex.value.cmdId}/logs?follow=true`;
    const got = await new Promise<{ bytes: Buffer; code: number }>((resolve, reject) => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${KEY}`, 'x-daytona-split-output': 'true' } });
      const parts: Buffer[] = [];
      ws.on('message', (d: Buffer) => parts.push(d));
      ws.on('close', (code) => resolve({ bytes: Buffer.concat(parts), code }));
      ws.on('error', reject);
    });
    assert.ok('\x01\x01\x01a\n\x01\x01\x01b\n'.startsWith(got.bytes.toString('utf8')), 'a prefix of the journal');
    await toolbox.deleteSession('follow', 5000);
  });

  test('adapter: attach replays from byte zero by polling the HTTP journal, then tails to the exit', async () => {
    const h = await created(rigged.adapter);
    const first = new FrameLog();
    const script = 'for i in 1 2 3; do echo line-$i; done; read x; echo got-$x; exit 4';
    const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', script], { owner: first.sink, stdin: true });
    assert.ok(c.ok);
    await first.until((l) => l.text('stdout').includes('line-3'), 'line-3');
    const sessions = await rigged.adapter.processes.listSessions(h);
    assert.ok(sessions.ok && sessions.value.length === 1);
    const second = new FrameLog();
    const at = await rigged.adapter.processes.attach(h, sessions.value[0]!.id, { owner: second.sink, stdin: true });
    assert.ok(at.ok);
    await second.until((l) => l.text('stdout').includes('line-3'), 'replay');
    assert.ok(second.text('stdout').startsWith('line-1\nline-2\nline-3\n'), 'replay starts at byte zero');
    assert.ok((await rigged.adapter.processes.writeStdin(at.value, Buffer.from('x\n'))).ok);
    await second.until((l) => l.terminals().length > 0, 'attacher exit');
    await first.until((l) => l.terminals().length > 0, 'owner exit');
    assert.equal(second.text('stdout'), 'line-1\nline-2\nline-3\ngot-x\n');
    assert.deepEqual(second.terminals(), [{ type: 'exit', ref: at.value.ref, code: 4 }]);
    assert.deepEqual(first.terminals(), [{ type: 'exit', ref: c.value.ref, code: 4 }]);
    assert.equal(rigged.stub.followSocketConnections, 1, 'only the self-check used the follow socket');
  });
});

describe('daytona quirk: command records carry no exit code', () => {
  let rigged: Awaited<ReturnType<typeof rig>>;
  before(async () => (rigged = await rig({ exitCodes: 'missing' })));
  after(() => rigged.stub.stop());

  test('stub self-check: a finished command has no exitCode in its record', async () => {
    const h = await created(rigged.adapter);
    const { toolbox } = await rawToolbox(rigged.stub, h.name);
    assert.ok((await toolbox.createSession('noexit')).ok);
    const ex = await toolbox.sessionExecAsync('noexit', 'exit 7');
    assert.ok(ex.ok);
    await delay(200);
    const rec = await toolbox.getCommand('noexit', ex.value.cmdId);
    assert.ok(rec.ok);
    assert.equal(rec.value.exitCode, undefined);
  });

  test('adapter: the exit sentinel file gives the real code, never an invented 0', async () => {
    const h = await created(rigged.adapter);
    for (const code of [0, 7]) {
      const log = new FrameLog();
      const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', `echo bye; exit ${code}`], {
        owner: log.sink,
        stdin: false,
      });
      assert.ok(c.ok);
      await log.until((l) => l.terminals().length > 0, 'exit');
      assert.equal(log.text('stdout'), 'bye\n');
      assert.deepEqual(log.terminals(), [{ type: 'exit', ref: c.value.ref, code }]);
    }
  });

  test('adapter: a session killed before its shim wrote a sentinel ends with closed_before_exit, not exit 0', async () => {
    const h = await created(rigged.adapter);
    const log = new FrameLog();
    const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', STAY_SCRIPT], { owner: log.sink, stdin: true });
    assert.ok(c.ok);
    await log.until((l) => l.text('stdout').includes('ready'), 'ready');
    const sessions = await rigged.adapter.processes.listSessions(h);
    assert.ok(sessions.ok);
    assert.ok((await rigged.adapter.processes.terminateSession(h, sessions.value[0]!.id)).ok);
    await log.until((l) => l.terminals().length > 0, 'terminal');
    const t = log.terminals();
    assert.equal(t.length, 1);
    assert.equal(t[0]!.type, 'error');
    assert.equal(t[0]!.type === 'error' && t[0]!.error.code, 'closed_before_exit');
  });
});

describe('daytona quirk: the API fallback when the daemon does report exit codes', () => {
  let rigged: Awaited<ReturnType<typeof rig>>;
  before(async () => (rigged = await rig({ exitCodes: 'reported' })));
  after(() => rigged.stub.stop());

  test('adapter: sentinel and record agree', async () => {
    const h = await created(rigged.adapter);
    const log = new FrameLog();
    const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', 'echo out; exit 3'], { owner: log.sink });
    assert.ok(c.ok);
    await log.until((l) => l.terminals().length > 0, 'exit');
    assert.deepEqual(log.terminals(), [{ type: 'exit', ref: c.value.ref, code: 3 }]);
  });
});

describe('daytona quirk: without the split header the journal is merged and unmarked', () => {
  let rigged: Awaited<ReturnType<typeof rig>>;
  before(async () => (rigged = await rig()));
  after(() => rigged.stub.stop());

  test('stub self-check: a plain logs GET merges stdout and stderr', async () => {
    const h = await created(rigged.adapter);
    const { toolbox } = await rawToolbox(rigged.stub, h.name);
    assert.ok((await toolbox.createSession('merged')).ok);
    const ex = await toolbox.sessionExecAsync('merged', `sh -c 'echo out; echo err >&2'`);
    assert.ok(ex.ok);
    await delay(200);
    const res = await fetch(`${toolbox.base}/process/session/merged/command/${ex.value.cmdId}/logs`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    const body = await res.text();
    assert.ok(!body.includes('\x01') && !body.includes('\x02'), 'markers stripped');
    assert.deepEqual(body.split('\n').filter(Boolean).sort(), ['err', 'out']);
  });

  test('adapter: stdout and stderr arrive as separate frames', async () => {
    const h = await created(rigged.adapter);
    const log = new FrameLog();
    const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', 'echo to-out; echo to-err >&2; exit 0'], {
      owner: log.sink,
    });
    assert.ok(c.ok);
    await log.until((l) => l.terminals().length > 0, 'exit');
    assert.equal(log.text('stdout'), 'to-out\n');
    assert.equal(log.text('stderr'), 'to-err\n');
  });
});

describe('daytona quirk: network settings are tier-gated', () => {
  test('adapter: a Tier 1 organisation refusal is a clear, permanent denied', async () => {
    const { stub, adapter } = await rig({ tier: 1 });
    try {
      const h = await created(adapter);
      const r = await adapter.network.applyNetworkPolicy(h, { allow: [] });
      assert.equal(r.ok, false);
      assert.equal(!r.ok && r.error.code, 'denied');
      assert.match(!r.ok ? (r.error.detail ?? '') : '', /network_restricted_by_tier/);
      assert.equal(isTransient(!r.ok && r.error), false);
    } finally {
      await stub.stop();
    }
  });

  test('adapter: on Tier 3, allow [] blocks all (not a no-op) and a domain list is applied', async () => {
    const { stub, adapter } = await rig({ tier: 3 });
    try {
      const h = await created(adapter);
      assert.ok((await adapter.network.applyNetworkPolicy(h, { allow: ['api.example.com'] })).ok);
      let s = stub.sandbox(h.name)!;
      assert.equal(s.domainAllowList, 'api.example.com');
      assert.ok((await adapter.network.applyNetworkPolicy(h, { allow: [] })).ok);
      s = stub.sandbox(h.name)!;
      assert.equal(s.networkBlockAll, true);
      assert.equal(s.domainAllowList, '');
      assert.equal(s.networkAllowList, '');
      const tooMany = Array.from({ length: 11 }, (_, i) => `d${i}.example.com`);
      const r = await adapter.network.applyNetworkPolicy(h, { allow: tooMany });
      assert.equal(!r.ok && r.error.code, 'invalid');
    } finally {
      await stub.stop();
    }
  });
});

describe('daytona quirk: lifecycle calls are asynchronous', () => {
  let rigged: Awaited<ReturnType<typeof rig>>;
  before(async () => (rigged = await rig({ transitionMs: 150 })));
  after(() => rigged.stub.stop());

  test('adapter: create, suspend, resume and destroy return only once the target state is reached', async () => {
    const h = await created(rigged.adapter);
    assert.equal(rigged.stub.sandbox(h.name)!.state, 'started');
    const e = await rigged.adapter.processes.exec(h, 'echo', ['up']);
    assert.ok(e.ok && e.value.exitCode === 0);
    assert.ok((await rigged.adapter.files.writeFile(h, 'memory.txt', Buffer.from('remember me'))).ok);
    assert.ok((await rigged.adapter.lifecycle.suspend(h)).ok);
    assert.equal(rigged.stub.sandbox(h.name)!.state, 'stopped');
    const g = await rigged.adapter.lifecycle.get(h);
    assert.ok(g.ok && g.value.status === 'suspended');
    const r = await rigged.adapter.lifecycle.resume(h);
    assert.ok(r.ok);
    assert.equal(rigged.stub.sandbox(h.name)!.state, 'started');
    const cat = await rigged.adapter.processes.exec(r.value, 'cat', ['memory.txt']);
    assert.ok(cat.ok);
    assert.equal(Buffer.from(cat.value.output).toString(), 'remember me', 'stop keeps the disk');
    assert.ok((await rigged.adapter.lifecycle.destroy(h)).ok);
    assert.equal(rigged.stub.sandbox(h.name), undefined);
    assert.deepEqual(await rigged.adapter.lifecycle.get(h), { ok: false, error: { code: 'not_found' } });
  });

  test('adapter: stop kills sessions; a stream ends with an error, and list_sessions shows they are gone', async () => {
    const h = await created(rigged.adapter);
    const log = new FrameLog();
    const c = await rigged.adapter.processes.spawn(h, 'sh', ['-c', STAY_SCRIPT], { owner: log.sink });
    assert.ok(c.ok);
    await log.until((l) => l.text('stdout').includes('ready'), 'ready');
    assert.ok((await rigged.adapter.lifecycle.suspend(h)).ok);
    const r = await rigged.adapter.lifecycle.resume(h);
    assert.ok(r.ok);
    const s = await rigged.adapter.processes.listSessions(r.value);
    assert.deepEqual(s, { ok: true, value: [] });
    await log.until((l) => l.terminals().length > 0, 'terminal');
    assert.deepEqual(
      log.terminals().map((f) => f.type),
      ['error'],
    );
  });
});

describe('daytona quirk: a name that exists answers 409', () => {
  test('adapter: create adopts the existing sandbox', async () => {
    const { stub, adapter } = await rig();
    try {
      const nm = name();
      const a = await created(adapter, nm);
      const b = await created(adapter, nm);
      assert.equal(a.name, b.name);
      assert.equal(priv(a).sandboxId, priv(b).sandboxId);
    } finally {
      await stub.stop();
    }
  });
});

describe('daytona quirk: autoStopInterval defaults to 15 minutes', () => {
  test('adapter: creates with autoStopInterval 0, so Daytona never parks a sandbox behind Fountain', async () => {
    const { stub, adapter } = await rig();
    try {
      const h = await created(adapter);
      assert.equal(stub.sandbox(h.name)!.autoStopInterval, 0);
      stub.elapseIdle(60);
      const g = await adapter.lifecycle.get(h);
      assert.ok(g.ok && g.value.status === 'running');
    } finally {
      await stub.stop();
    }
  });
});

describe('daytona quirk: the toolbox proxy URL changes after a start', () => {
  test('adapter: a second adapter (another node) with a cached proxy recovers by re-reading the sandbox', async () => {
    const { stub, adapter } = await rig();
    const other = new DaytonaAdapter({ apiKey: KEY, apiUrl: stub.apiUrl, pollIntervalMs: 20, statePollMs: 10 });
    try {
      const h = await created(adapter);
      assert.ok((await other.processes.exec(adapter.buildHandle(h.name), 'true', [])).ok);
      const before = priv(h).toolboxProxyUrl;
      assert.ok((await adapter.lifecycle.suspend(h)).ok);
      const r = await adapter.lifecycle.resume(h);
      assert.ok(r.ok);
      assert.notEqual(priv(r.value).toolboxProxyUrl, before);
      const e = await other.processes.exec(other.buildHandle(h.name), 'echo', ['moved']);
      assert.ok(e.ok, JSON.stringify(!e.ok && e.error));
      assert.equal(Buffer.from(e.value.output).toString(), 'moved\n');
    } finally {
      await stub.stop();
    }
  });
});

describe('daytona quirk: a 202 from session exec is no proof the process started', () => {
  test('adapter: spawn returns only after the shim acknowledged the start', async () => {
    const { stub, adapter } = await rig({ startDelayMs: 400 });
    try {
      const h = await created(adapter);
      const log = new FrameLog();
      const c = await adapter.processes.spawn(h, 'sh', ['-c', STAY_SCRIPT], { owner: log.sink });
      assert.ok(c.ok);
      const sessions = [...stub.sandbox(h.name)!.sessions.values()];
      assert.equal(sessions.length, 1);
      assert.ok(sessions[0]!.commands[0]!.proc?.pid, 'the process exists when spawn returns');
      assert.ok((await adapter.processes.writeStdin(c.value, Buffer.from('early'))).ok);
      await log.until((l) => l.text('stdout').includes('early'), 'early echo');
      await adapter.processes.closeStdin(c.value);
      await log.until((l) => l.terminals().length > 0, 'exit');
    } finally {
      await stub.stop();
    }
  });
});

describe('daytona quirk: /process/execute reports exit code -1 for a command that cannot start', () => {
  test('adapter: exec runs through sh, so a missing binary is the real 127', async () => {
    const { stub, adapter } = await rig();
    try {
      const h = await created(adapter);
      const { toolbox } = await rawToolbox(stub, h.name);
      const raw = await toolbox.execute('no-such-binary-xyz', 10);
      assert.ok(raw.ok && raw.value.exitCode === -1, 'stub self-check: -1 from the raw endpoint');
      const r = await adapter.processes.exec(h, 'no-such-binary-xyz', []);
      assert.ok(r.ok);
      assert.equal(r.value.exitCode, 127);
    } finally {
      await stub.stop();
    }
  });
});

describe('daytona: listing is paginated', () => {
  test('adapter: list_all_names follows cursors to the full set', async () => {
    const { stub, adapter } = await rig({ pageSize: 2 });
    try {
      const names = [name(), name(), name(), name(), name()];
      for (const nm of names) await created(adapter, nm);
      const r = await adapter.lifecycle.listAllNames();
      assert.ok(r.ok);
      assert.deepEqual([...r.value].sort(), [...names].sort());
    } finally {
      await stub.stop();
    }
  });
});

describe('issue 19: first-contact defects the stub used to hide', () => {
  test('item 5 (POST /process/execute answers only when the command ends; undici gives up waiting for headers at 300 s): exec outlives the fetch default', async () => {
    const { Agent, getGlobalDispatcher, setGlobalDispatcher } = await import('undici');
    const { stub, adapter } = await rig();
    const before = getGlobalDispatcher();
    // Node's fetch default is 300 s; shortened here so the test does not wait five minutes.
    const shortDefault = new Agent({ headersTimeout: 300, bodyTimeout: 300 });
    setGlobalDispatcher(shortDefault);
    try {
      const h = await created(adapter);
      const r = await adapter.processes.exec(h, 'sh', ['-c', 'sleep 1; echo finished'], { timeoutMs: 30_000 });
      assert.ok(r.ok, `exec died at the client's default header wait: ${JSON.stringify(r)}`);
      assert.equal(Buffer.from(r.value.output).toString(), 'finished\n');
      const none = await adapter.processes.exec(h, 'sh', ['-c', 'sleep 1; echo no-limit']);
      assert.ok(none.ok && Buffer.from(none.value.output).toString() === 'no-limit\n', JSON.stringify(none));
    } finally {
      setGlobalDispatcher(before);
      await shortDefault.close();
      await stub.stop();
    }
  });

  test('item 6 (block-all false with no CIDR list restores general egress and ignores the domain list): a domain allow-list is enforced', async () => {
    const { stub, adapter } = await rig({ tier: 3 });
    try {
      const h = await created(adapter);
      assert.equal(stub.egressAllowed(h.name, 'example.com'), true, 'open before any policy');
      assert.ok((await adapter.network.applyNetworkPolicy(h, { allow: ['api.example.com'] })).ok);
      assert.equal(stub.egressAllowed(h.name, 'api.example.com'), true);
      assert.equal(stub.egressAllowed(h.name, 'example.com'), false, 'the allow-list failed open');
      assert.ok((await adapter.network.applyNetworkPolicy(h, { allow: ['api.example.com', '10.1.0.0/16'] })).ok);
      assert.equal(stub.egressAllowed(h.name, '10.1.2.3'), true);
      assert.equal(stub.egressAllowed(h.name, 'example.com'), false);
      assert.ok((await adapter.network.applyNetworkPolicy(h, { allow: [] })).ok);
      assert.equal(stub.egressAllowed(h.name, 'api.example.com'), false, 'allow [] denies all');
    } finally {
      await stub.stop();
    }
  });

  test('item 7 (the journal endpoint returns the whole log each time): following a command fetches each byte about once', async () => {
    const { stub, adapter } = await rig();
    try {
      const h = await created(adapter);
      const log = new FrameLog();
      const line = 'x'.repeat(999);
      const script = `i=0; while [ $i -lt 40 ]; do echo ${line}; echo e$i >&2; i=$((i+1)); sleep 0.03; done`;
      const c = await adapter.processes.spawn(h, 'sh', ['-c', script], { owner: log.sink });
      assert.ok(c.ok, JSON.stringify(c));
      await log.until((l) => l.terminals().length > 0, 'the exit');
      const out = log.text('stdout');
      assert.equal(out, `${line}\n`.repeat(40));
      assert.equal(
        log.text('stderr'),
        Array.from({ length: 40 }, (_, i) => `e${i}\n`).join(''),
        'stdout and stderr stay apart',
      );
      assert.deepEqual(
        log.terminals().map((f) => f.type === 'exit' && f.code),
        [0],
      );
      const output = out.length + log.text('stderr').length;
      assert.ok(
        stub.journalBytesServed < 2 * output,
        `read ${stub.journalBytesServed} bytes to follow ${output} bytes of output`,
      );
    } finally {
      await stub.stop();
    }
  });
});
