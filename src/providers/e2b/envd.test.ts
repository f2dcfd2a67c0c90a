/**
 * The envd client against the stub, at the level below the adapter: why attach cannot use
 * Connect (no replay, output dropped while nobody listens), and unary error mapping.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { E2BStub } from '../../../test/stubs/e2b/server.ts';
import { Frames, sleep } from '../../../test/stubs/e2b/frames.ts';
import { E2BAdapter } from './index.ts';
import type { E2BTarget } from './index.ts';
import { Envd } from './envd.ts';
import type { EndEvent, ProcessEventSink, StreamClose } from './envd.ts';

const KEY = 'e2b_envd_test_key_0123';

class Recorder implements ProcessEventSink {
  out = '';
  started = false;
  ended: EndEvent | null = null;
  closedHow: StreamClose | null = null;
  start() {
    this.started = true;
  }
  stdout(d: Buffer) {
    this.out += d.toString();
  }
  stderr() {}
  end(e: EndEvent) {
    this.ended = e;
  }
  closed(how: StreamClose) {
    this.closedHow = how;
  }
}

describe('envd client against the stub', () => {
  let stub: E2BStub;
  let adapter: E2BAdapter;
  before(async () => {
    stub = await E2BStub.start({ apiKey: KEY });
    adapter = new E2BAdapter({ apiKey: KEY, baseUrl: stub.apiUrl, sandboxUrl: stub.sandboxUrl });
  });
  after(async () => {
    adapter.close();
    await stub.stop();
  });

  it('stub fidelity (#1640, #2639): Connect to a live process replays nothing and misses output printed while detached', async () => {
    const h = await adapter.create('fountain-envdtest-00000001');
    assert.ok(h.ok);
    const target = h.value.private?.reveal() as E2BTarget;
    const envd = new Envd({ sandboxId: target.sandboxId, accessToken: target.accessToken, sandboxUrl: stub.sandboxUrl }, { timeoutMs: 5000, keepaliveS: 30 });
    const f = new Frames();
    const c = await adapter.spawn(h.value, 'sh', ['-c', 'echo before; sleep 0.3; echo while-detached; read l; echo "after:$l"'], { owner: f.sink, stdin: true });
    assert.ok(c.ok);
    await f.untilText('before');
    await adapter.stopCommand(c.value);
    await sleep(600);
    const sessions = await adapter.listSessions(h.value);
    assert.ok(sessions.ok && sessions.value[0]);
    const rec = new Recorder();
    const s = await envd.connect({ tag: sessions.value[0].id }, rec);
    assert.ok(s.ok, inspect(s));
    const w = await envd.unary('process.Process/SendInput', { process: { tag: sessions.value[0].id }, input: { stdin: Buffer.from('x\n').toString('base64') } });
    assert.ok(w.ok, inspect(w));
    for (let i = 0; i < 100 && !rec.closedHow; i++) await sleep(50);
    assert.ok(rec.started);
    assert.equal(rec.out, 'after:x\n', 'Connect delivered only what was printed after it subscribed');
    assert.deepEqual(rec.ended && { exited: rec.ended.exited, exitCode: rec.ended.exitCode }, { exited: true, exitCode: undefined }, 'exit 0 is omitted');
    assert.deepEqual(rec.closedHow, { kind: 'end_stream' });
  });

  it('unary errors: a process envd does not know is not_found; a bad token is denied', async () => {
    const h = await adapter.create('fountain-envdtest-00000002');
    assert.ok(h.ok);
    const target = h.value.private?.reveal() as E2BTarget;
    const envd = new Envd({ sandboxId: target.sandboxId, accessToken: target.accessToken, sandboxUrl: stub.sandboxUrl }, { timeoutMs: 5000, keepaliveS: 30 });
    const missing = await envd.unary('process.Process/SendInput', { process: { tag: 'nope' }, input: { stdin: '' } });
    assert.equal(!missing.ok && missing.error.code, 'not_found');
    const bad = new Envd({ sandboxId: target.sandboxId, accessToken: 'wrong-token', sandboxUrl: stub.sandboxUrl }, { timeoutMs: 5000, keepaliveS: 30 });
    const denied = await bad.unary('process.Process/List', {});
    assert.equal(!denied.ok && denied.error.code, 'denied');
    const rec = new Recorder();
    const conn = await envd.connect({ tag: 'nope' }, rec);
    assert.ok(conn.ok);
    for (let i = 0; i < 100 && !rec.closedHow; i++) await sleep(20);
    assert.equal(rec.closedHow?.kind === 'end_stream' && rec.closedHow.error?.code, 'not_found', 'stream RPC errors arrive in the end-stream with HTTP 200');
  });
});
