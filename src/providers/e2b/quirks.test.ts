/**
 * One test per E2B quirk, each against the loopback stub that reproduces
 * it; each fails when the adapter's workaround is taken out.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import type { Handle } from '../../sandbox/index.ts';
import { E2BStub } from '../../../test/stubs/e2b/server.ts';
import { Frames, sleep } from '../../../test/stubs/e2b/frames.ts';
import { envdBaseUrl } from './config.ts';
import { E2BAdapter, NAME_KEY } from './index.ts';
import type { E2BOptions } from './index.ts';

const KEY = 'e2b_test_key_0123456789abcdef';
let n = 0;
const name = () => `fountain-quirks0-${(++n).toString(16).padStart(8, '0')}`;
const utf8 = (s: string) => new TextEncoder().encode(s);

function withStub(stubOpts: Partial<Parameters<typeof E2BStub.start>[0]>, adapterOpts: Partial<E2BOptions> = {}) {
  const ctx = {} as { stub: E2BStub; adapter: E2BAdapter; handle: () => Promise<Handle> };
  before(async () => {
    ctx.stub = await E2BStub.start({ apiKey: KEY, ...stubOpts });
    ctx.adapter = new E2BAdapter({
      apiKey: KEY,
      baseUrl: ctx.stub.apiUrl,
      sandboxUrl: ctx.stub.sandboxUrl,
      requestTimeoutMs: 10_000,
      ...adapterOpts,
    });
    ctx.handle = async () => {
      const h = await ctx.adapter.lifecycle.create(name());
      assert.ok(h.ok, inspect(h));
      return h.value;
    };
  });
  after(async () => {
    ctx.adapter.close();
    await ctx.stub.stop();
  });
  return ctx;
}

const sandboxIdOf = async (a: E2BAdapter, h: Handle) => {
  const g = await a.lifecycle.get(h);
  assert.ok(g.ok, inspect(g));
  return String(g.value.raw.sandboxId);
};

describe('e2b quirk #693 (spawn race): envd registers a process only when it sends start', () => {
  const ctx = withStub({ startDelayMs: 300 });
  it('quirk #693: spawn returns only after start, so an immediate write_stdin reaches the process', async () => {
    const h = await ctx.handle();
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'read l; echo "got:$l"'], {
      owner: f.sink,
      stdin: true,
    });
    assert.ok(c.ok, inspect(c));
    const w = await ctx.adapter.processes.writeStdin(c.value, utf8('first\n'));
    assert.ok(w.ok, `the first write raced registration: ${inspect(w)}`);
    await f.untilText('got:first');
    assert.deepEqual(await f.terminal(), { type: 'exit', ref: c.value.ref, code: 0 });
  });
});

describe('e2b quirks on stdin, exit codes, replay and lifetimes', () => {
  const ctx = withStub({ dropMarker: '__E2B_STUB_DROP__' });

  it('quirk #927 (stdin is /dev/null unless Start says stdin: true): repeated writes reach the process, then a real EOF', async () => {
    const h = await ctx.handle();
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'while read l; do echo "echo:$l"; done; echo eof'], {
      owner: f.sink,
      stdin: true,
    });
    assert.ok(c.ok, inspect(c));
    for (const w of ['a', 'b', 'c']) assert.ok((await ctx.adapter.processes.writeStdin(c.value, utf8(`${w}\n`))).ok);
    await f.untilText('echo:c');
    assert.ok((await ctx.adapter.processes.closeStdin(c.value)).ok);
    await f.untilText('eof');
    assert.deepEqual(await f.terminal(), { type: 'exit', ref: c.value.ref, code: 0 });
    assert.equal(f.stdout(), 'echo:a\necho:b\necho:c\neof\n');
    const late = await ctx.adapter.processes.writeStdin(c.value, utf8('late\n'));
    assert.deepEqual(late, { ok: false, error: { code: 'command_exited' } });
  });

  it('quirk (proto3 omits exitCode 0 from the end event): exec and spawn report 0, and nonzero codes as sent', async () => {
    const h = await ctx.handle();
    const zero = await ctx.adapter.processes.exec(h, 'true', []);
    assert.deepEqual(zero.ok && zero.value.exitCode, 0, inspect(zero));
    const three = await ctx.adapter.processes.exec(h, 'sh', ['-c', 'echo out; exit 3']);
    assert.ok(three.ok, inspect(three));
    assert.equal(three.value.exitCode, 3);
    assert.equal(Buffer.from(three.value.output).toString(), 'out\n');
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'echo hi'], { owner: f.sink });
    assert.ok(c.ok, inspect(c));
    assert.deepEqual(await f.terminal(), { type: 'exit', ref: c.value.ref, code: 0 });
    const raw = ctx.stub.requests.filter((r) => r.server === 'envd' && r.path === '/process.Process/Start');
    assert.ok(raw.length > 0);
  });

  it('quirk (a stream can end without an end event): the command ends in closed_before_exit, never an exit 0', async () => {
    const h = await ctx.handle();
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'echo __E2B_STUB_DROP__; sleep 30'], { owner: f.sink });
    assert.ok(c.ok, inspect(c));
    await f.untilText('__E2B_STUB_DROP__');
    const end = await f.terminal();
    assert.equal(end.type, 'error', f.dump());
    assert.equal(end.type === 'error' && end.error.code, 'closed_before_exit');
    await sleep(100);
    assert.equal(f.terminals().length, 1, f.dump());
    const e = await ctx.adapter.processes.exec(h, 'sh', ['-c', 'echo __E2B_STUB_DROP__; sleep 30']);
    assert.equal(!e.ok && e.error.code, 'closed_before_exit', inspect(e));
  });

  it('quirks #1640/#2639 (no replay; output with no subscriber is dropped): attach replays the journal from byte zero, then tails', async () => {
    const h = await ctx.handle();
    const f = new Frames();
    // "two" waits for a mark the test makes only once the owner is stopped (a fixed sleep lost that race under load).
    const mark = `/tmp/fountain-quirk-${randomBytes(6).toString('hex')}`;
    const c = await ctx.adapter.processes.spawn(
      h,
      'sh',
      ['-c', `echo one; while [ ! -e ${mark} ]; do sleep 0.05; done; echo two; read l; echo "three:$l"`],
      { owner: f.sink, stdin: true },
    );
    assert.ok(c.ok, inspect(c));
    await f.untilText('one');
    assert.ok((await ctx.adapter.processes.stopCommand(c.value)).ok);
    assert.ok((await ctx.adapter.processes.exec(h, 'touch', [mark])).ok);
    await sleep(600); // "two" is printed while nobody listens
    const sessions = await ctx.adapter.processes.listSessions(h);
    assert.ok(sessions.ok && sessions.value.length === 1, inspect(sessions));
    const g = new Frames();
    const a = await ctx.adapter.processes.attach(h, sessions.value[0]!.id, { owner: g.sink, stdin: true });
    assert.ok(a.ok, inspect(a));
    await g.untilText('one\ntwo\n');
    assert.ok((await ctx.adapter.processes.writeStdin(a.value, utf8('x\n'))).ok);
    await g.untilText('three:x');
    assert.deepEqual(await g.terminal(), { type: 'exit', ref: a.value.ref, code: 0 });
    assert.equal(g.stdout(), 'one\ntwo\nthree:x\n');
    assert.equal(f.stdout(), 'one\n', 'the stopped owner got nothing after stop_command');
    // A finished session still replays, then exits with its journaled code.
    const again = new Frames();
    const b = await ctx.adapter.processes.attach(h, sessions.value[0]!.id, { owner: again.sink });
    assert.ok(b.ok, inspect(b));
    assert.deepEqual(await again.terminal(), { type: 'exit', ref: b.value.ref, code: 0 });
    assert.equal(again.stdout(), 'one\ntwo\nthree:x\n');
    const unknown = await ctx.adapter.processes.attach(h, 'fountain-s-0000000000000000', { owner: () => undefined });
    assert.equal(!unknown.ok && unknown.error.code, 'not_found');
  });

  it('quirk #500 (Connect-Timeout-Ms is the process lifetime): an exec timeout kills the process', async () => {
    const h = await ctx.handle();
    const e = await ctx.adapter.processes.exec(h, 'sleep', ['30'], { timeoutMs: 200 });
    assert.deepEqual(e, { ok: false, error: { code: 'unavailable', detail: 'timeout' } });
  });

  it('quirk (POST /sandboxes without timeout lives 15 s): create always sends the configured lifetime', async () => {
    const h = await ctx.handle();
    const id = await sandboxIdOf(ctx.adapter, h);
    const s = ctx.stub.list().find((x) => x.id === id);
    assert.ok(s);
    assert.ok(s.endAt.getTime() - Date.now() > 60_000, `expires at ${s.endAt.toISOString()}`);
  });
});

describe('e2b quirk: pause drops every open stream', () => {
  const ctx = withStub({});
  it('quirk (pause drops streams): the live command ends in closed_before_exit; after resume the session replays and takes stdin; the disk survives', async () => {
    const h = await ctx.handle();
    assert.ok((await ctx.adapter.files.writeFile(h, '/home/user/memory/keep.txt', utf8('kept\n'))).ok);
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'echo ready; while read l; do echo "echo:$l"; done'], {
      owner: f.sink,
      stdin: true,
    });
    assert.ok(c.ok, inspect(c));
    assert.ok((await ctx.adapter.processes.writeStdin(c.value, utf8('ping\n'))).ok);
    await f.untilText('echo:ping');
    assert.ok((await ctx.adapter.lifecycle.suspend(h)).ok);
    const end = await f.terminal();
    assert.equal(end.type === 'error' && end.error.code, 'closed_before_exit', f.dump());
    const info = await ctx.adapter.lifecycle.get(h);
    assert.equal(info.ok && info.value.status, 'suspended');
    const r = await ctx.adapter.lifecycle.resume(h);
    assert.ok(r.ok, inspect(r));
    const sessions = await ctx.adapter.processes.listSessions(r.value);
    assert.ok(sessions.ok && sessions.value.length === 1, inspect(sessions));
    const g = new Frames();
    const a = await ctx.adapter.processes.attach(r.value, sessions.value[0]!.id, { owner: g.sink, stdin: true });
    assert.ok(a.ok, inspect(a));
    await g.untilText('ready\necho:ping\n');
    assert.ok((await ctx.adapter.processes.writeStdin(a.value, utf8('pong\n'))).ok);
    await g.untilText('echo:pong');
    assert.ok((await ctx.adapter.processes.closeStdin(a.value)).ok);
    assert.deepEqual(await g.terminal(), { type: 'exit', ref: a.value.ref, code: 0 });
    const cat = await ctx.adapter.processes.exec(r.value, 'cat', ['/home/user/memory/keep.txt']);
    assert.equal(cat.ok && Buffer.from(cat.value.output).toString(), 'kept\n');
  });

  it('quirk #1352 (after resume Connect stalls at 8 KiB): attach after resume replays a large output in full', async () => {
    const h = await ctx.handle();
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(
      h,
      'sh',
      ['-c', 'head -c 20000 /dev/zero | tr "\\0" a; echo; read l; echo "after:$l"'],
      { owner: f.sink, stdin: true },
    );
    assert.ok(c.ok, inspect(c));
    await f.until(() => f.stdout().length >= 20001, '20001 bytes');
    assert.ok((await ctx.adapter.lifecycle.suspend(h)).ok);
    const r = await ctx.adapter.lifecycle.resume(h);
    assert.ok(r.ok);
    const sessions = await ctx.adapter.processes.listSessions(r.value);
    assert.ok(sessions.ok && sessions.value[0]);
    const g = new Frames();
    const a = await ctx.adapter.processes.attach(r.value, sessions.value[0].id, { owner: g.sink, stdin: true });
    assert.ok(a.ok);
    await g.until(() => g.stdout().length >= 20001, 'the whole 20001-byte replay');
    assert.ok((await ctx.adapter.processes.writeStdin(a.value, utf8('z\n'))).ok);
    await g.untilText('after:z');
    assert.equal(g.stdout(), `${'a'.repeat(20000)}\nafter:z\n`);
  });
});

describe('e2b quirk: a sandbox expires (and parks) unless kept alive', () => {
  const ctx = withStub({}, { sandboxTimeoutS: 2 });
  it('quirk (TTL expiry parks a live turn): a running command heartbeats /timeout and finishes', async () => {
    const h = await ctx.handle();
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'sleep 3; echo done'], { owner: f.sink });
    assert.ok(c.ok, inspect(c));
    const end = await f.terminal();
    assert.deepEqual(end, { type: 'exit', ref: c.value.ref, code: 0 }, f.dump());
    assert.equal(f.stdout(), 'done\n');
  });
});

describe('e2b quirk: no names, only metadata', () => {
  const ctx = withStub({ createDelayMs: 150 }, { listPageSize: 2 });

  it('quirk (no native names; concurrent creates both miss the lookup): creates converge on one sandbox', async () => {
    const nm = name();
    const all = await Promise.all([
      ctx.adapter.lifecycle.create(nm),
      ctx.adapter.lifecycle.create(nm),
      ctx.adapter.lifecycle.create(nm),
    ]);
    for (const r of all) assert.ok(r.ok, inspect(r));
    const left = ctx.stub.list().filter((s) => s.metadata[NAME_KEY] === nm);
    assert.equal(left.length, 1, `duplicates left: ${inspect(left)}`);
    for (const r of all) if (r.ok) assert.equal(await sandboxIdOf(ctx.adapter, r.value), left[0]!.id);
    const adopt = await ctx.adapter.lifecycle.create(nm);
    assert.ok(adopt.ok);
    assert.equal(
      ctx.stub.list().filter((s) => s.metadata[NAME_KEY] === nm).length,
      1,
      'create adopts an existing name',
    );
  });

  it('quirk (listing is paged with X-Next-Token): list_all_names pages to the end, and one failed page fails it all', async () => {
    const names = [name(), name(), name(), name(), name()];
    for (const nm of names) assert.ok((await ctx.adapter.lifecycle.create(nm)).ok);
    const listed = await ctx.adapter.lifecycle.listAllNames();
    assert.ok(listed.ok, inspect(listed));
    for (const nm of names) assert.ok(listed.value.includes(nm), `${nm} missing`);
    ctx.stub.failNext('api', /^\/v2\/sandboxes\?.*nextToken=/, { status: 500, body: { code: 500, message: 'boom' } });
    const partial = await ctx.adapter.lifecycle.listAllNames();
    assert.equal(!partial.ok && partial.error.code, 'unavailable', inspect(partial));
  });
});

describe('e2b: only a definitive absence is not_found', () => {
  const ctx = withStub({});
  it('quirk (empty listing = absent; 5xx, 429 and transport are transient): get maps each failure', async () => {
    const h = await ctx.handle();
    const missing = await ctx.adapter.lifecycle.get(ctx.adapter.buildHandle(name()));
    assert.equal(!missing.ok && missing.error.code, 'not_found');
    ctx.stub.failNext('api', /^\/v2\/sandboxes/, {
      status: 503,
      body: { code: 503, message: 'busy', error_code: 'sandbox_capacity_unavailable' },
    });
    const busy = await ctx.adapter.lifecycle.get(h);
    assert.equal(!busy.ok && busy.error.code, 'unavailable', inspect(busy));
    ctx.stub.failNext('api', /^\/v2\/sandboxes/, {
      status: 429,
      body: { code: 429, message: 'slow down' },
      headers: { 'retry-after': '7' },
    });
    const limited = await ctx.adapter.lifecycle.get(h);
    assert.deepEqual(!limited.ok && [limited.error.code, limited.error.retryAfterMs], ['rate_limited', 7000]);
    ctx.stub.failNext('api', /^\/v2\/sandboxes/, { status: 404, body: { code: 404, message: 'no route' } });
    const proxy404 = await ctx.adapter.lifecycle.get(h);
    assert.equal(!proxy404.ok && proxy404.error.code, 'unavailable', 'a 404 on a listing is not an absence');
    const wrongKey = new E2BAdapter({
      apiKey: 'wrong-key-000000',
      baseUrl: ctx.stub.apiUrl,
      sandboxUrl: ctx.stub.sandboxUrl,
    });
    const denied = await wrongKey.lifecycle.get(h);
    assert.equal(!denied.ok && denied.error.code, 'denied');
    assert.ok(!inspect(denied).includes('wrong-key-000000'));
  });
});

describe('e2b quirk: egress', () => {
  const ctx = withStub({});
  it('quirk (the firewall allows what no rule matches; PUT /network replaces all): allow [] denies all, and each policy replaces the last', async () => {
    const h = await ctx.handle();
    const id = await sandboxIdOf(ctx.adapter, h);
    assert.equal(ctx.stub.egressAllowed(id, 'example.com'), true, 'open before any policy');
    assert.ok((await ctx.adapter.network.applyNetworkPolicy(h, { allow: [] })).ok);
    assert.equal(ctx.stub.egressAllowed(id, 'example.com'), false, 'allow: [] denies all');
    assert.equal(ctx.stub.egressAllowed(id, '1.1.1.1'), false);
    assert.ok((await ctx.adapter.network.applyNetworkPolicy(h, { allow: ['api.example.com'] })).ok);
    assert.equal(ctx.stub.egressAllowed(id, 'api.example.com'), true);
    assert.equal(ctx.stub.egressAllowed(id, 'example.org'), false);
    assert.ok((await ctx.adapter.network.applyNetworkPolicy(h, { allow: ['b.example.com'] })).ok);
    assert.equal(ctx.stub.egressAllowed(id, 'api.example.com'), false, 'the previous allow is gone');
    assert.equal(ctx.stub.egressAllowed(id, 'b.example.com'), true);
  });
});

describe('e2b: secrets stay private', () => {
  const ctx = withStub({});
  it('the API key and the envd access token never show in inspect, JSON or errors', async () => {
    const h = await ctx.handle();
    const token = (h.private?.reveal() as { accessToken: string }).accessToken;
    assert.ok(token && token.length > 8);
    for (const text of [
      inspect(h, { depth: 10 }),
      JSON.stringify(h),
      inspect(ctx.adapter, { depth: 10 }),
      String(h.private),
    ]) {
      assert.ok(!text.includes(token), text);
      assert.ok(!text.includes(KEY), text);
    }
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'echo hi'], { owner: f.sink });
    assert.ok(c.ok);
    assert.ok(!inspect(c.value, { depth: 10 }).includes(token));
    assert.ok(!JSON.stringify(c.value).includes(token));
    ctx.stub.failNext('envd', /Start/, { status: 500, body: { code: 'internal', message: `echo ${token} ${KEY}` } });
    const e = await ctx.adapter.processes.exec(h, 'true', []);
    assert.ok(!e.ok);
    assert.ok(!inspect(e).includes(token) && !inspect(e).includes(KEY), inspect(e));
  });
});

describe('issue 19: first-contact defects the stub used to hide', () => {
  const ctx = withStub({});

  it('item 1 (Connect-Timeout-Ms: 0 is a deadline already passed in connect-go): spawn, attach and an exec without a limit omit the header and work, and an exec runs once', async () => {
    const h = await ctx.handle();
    const before = ctx.stub.requests.length;
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'echo hi; read l; echo "got:$l"'], {
      owner: f.sink,
      stdin: true,
    });
    assert.ok(c.ok, inspect(c));
    await f.untilText('hi');
    const sessions = await ctx.adapter.processes.listSessions(h);
    assert.ok(sessions.ok && sessions.value[0], inspect(sessions));
    await ctx.adapter.processes.stopCommand(c.value);
    const g = new Frames();
    const a = await ctx.adapter.processes.attach(h, sessions.value[0].id, { owner: g.sink, stdin: true });
    assert.ok(a.ok, inspect(a));
    assert.ok((await ctx.adapter.processes.writeStdin(a.value, utf8('x\n'))).ok);
    await g.untilText('got:x');
    assert.deepEqual(await g.terminal(), { type: 'exit', ref: a.value.ref, code: 0 });
    const once = await ctx.adapter.processes.exec(h, 'sh', ['-c', 'echo ran >> "$HOME/count"; cat "$HOME/count"']);
    assert.ok(once.ok, inspect(once));
    assert.equal(Buffer.from(once.value.output).toString(), 'ran\n');
    await sleep(200);
    const count = await ctx.adapter.processes.exec(h, 'cat', ['/home/user/count']);
    assert.equal(count.ok && Buffer.from(count.value.output).toString(), 'ran\n', 'the command ran exactly once');
    const starts = ctx.stub.requests.slice(before).filter((r) => r.path === '/process.Process/Start');
    assert.ok(starts.length >= 3);
    for (const st of starts) assert.notEqual(st.headers['connect-timeout-ms'], '0');
  });

  it("item 3 (a stream open across a pause wedges envd's output fan-out for ~15 min, infra#3292): after resume the agent's output keeps flowing", async () => {
    const h = await ctx.handle();
    const f = new Frames();
    // Like an agent: answers each line, here with a large answer (4 MB) that needs the pipes to drain.
    const agent = 'echo ready; while read l; do head -c 4000000 /dev/zero | tr "\\0" a; echo; echo "done:$l"; done';
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', agent], { owner: f.sink, stdin: true });
    assert.ok(c.ok, inspect(c));
    await f.untilText('ready');
    assert.ok((await ctx.adapter.lifecycle.suspend(h)).ok);
    const r = await ctx.adapter.lifecycle.resume(h);
    assert.ok(r.ok, inspect(r));
    const sessions = await ctx.adapter.processes.listSessions(r.value);
    assert.ok(sessions.ok && sessions.value[0], inspect(sessions));
    const g = new Frames();
    const a = await ctx.adapter.processes.attach(r.value, sessions.value[0].id, { owner: g.sink, stdin: true });
    assert.ok(a.ok, inspect(a));
    await g.untilText('ready');
    assert.ok((await ctx.adapter.processes.writeStdin(a.value, utf8('one\n'))).ok);
    // A hang guard of its own: the frames hold megabytes, too much for a failure message.
    for (let i = 0; i < 300 && !g.stdout().includes('done:one'); i++) await sleep(100);
    assert.ok(
      g.stdout().includes('done:one'),
      `no answer after resume (the fan-out stall lasts ~15 min); ${g.stdout().length} bytes replayed`,
    );
    assert.ok((await ctx.adapter.processes.closeStdin(a.value)).ok);
    assert.deepEqual(await g.terminal(), { type: 'exit', ref: a.value.ref, code: 0 });
  });

  it('item 4 (envd host: 49983-<id>.<domain> off the four E2B domains; sh -c wrapper; stdin open by default): the URL, a missing binary is exit 127', async () => {
    assert.equal(envdBaseUrl('isb1', 'e2b.app', undefined), 'https://sandbox.e2b.app');
    assert.equal(envdBaseUrl('isb1', 'e2b-staging.dev', undefined), 'https://sandbox.e2b-staging.dev');
    assert.equal(envdBaseUrl('isb1', 'sandboxes.example.com', undefined), 'https://49983-isb1.sandboxes.example.com');
    assert.equal(envdBaseUrl('isb1', 'example.com', 'http://127.0.0.1:9'), 'http://127.0.0.1:9');
    const h = await ctx.handle();
    const missing = await ctx.adapter.processes.exec(h, 'no-such-binary-e2b', ['x']);
    assert.ok(missing.ok, inspect(missing));
    assert.equal(missing.value.exitCode, 127);
  });

  it('stop_command and a pause end the replayer a Command read through (and its tails), never the session', async () => {
    const h = await ctx.handle();
    const f = new Frames();
    const c = await ctx.adapter.processes.spawn(h, 'sh', ['-c', 'echo up; exec cat'], { owner: f.sink, stdin: true });
    assert.ok(c.ok, inspect(c));
    await f.untilText('up');
    const sessions = await ctx.adapter.processes.listSessions(h);
    assert.ok(sessions.ok && sessions.value[0], inspect(sessions));
    const id = sessions.value[0].id;
    // Processes on this host whose command line names the session: shim, replayer, two tails.
    const count = () => Number(spawnSync('pgrep', ['-fc', id], { encoding: 'utf8' }).stdout.trim() || '0');
    assert.ok(count() >= 4, `expected shim, replayer and tails, saw ${count()}`);
    assert.ok((await ctx.adapter.processes.stopCommand(c.value)).ok);
    for (let i = 0; i < 50 && count() > 1; i++) await sleep(100);
    assert.equal(count(), 1, 'only the shim is left');
    const g = new Frames();
    const a = await ctx.adapter.processes.attach(h, id, { owner: g.sink, stdin: true });
    assert.ok(a.ok, inspect(a));
    assert.ok((await ctx.adapter.processes.writeStdin(a.value, utf8('still-here\n'))).ok);
    await g.untilText('still-here');
    assert.ok((await ctx.adapter.lifecycle.suspend(h)).ok);
    assert.equal((await g.terminal()).type, 'error');
    const r = await ctx.adapter.lifecycle.resume(h);
    assert.ok(r.ok, inspect(r));
    for (let i = 0; i < 50 && count() > 1; i++) await sleep(100);
    assert.equal(count(), 1, 'the paused-over replayer is gone too');
  });
});
